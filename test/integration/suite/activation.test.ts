// The extension activates in a real VS Code, starts its companion server, and registers every
// command it declares.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { api, EXTENSION_ID } from './helpers';

describe('extension activation', () => {
  it('activates and starts the companion server', async () => {
    const exported = await api();
    const result = await exported.companion.request('initialize', { clientName: 'integration-test', protocolVersion: 1 });
    assert.ok(result.methods.includes('sandboxes/create'));
    assert.equal(vscode.extensions.getExtension(EXTENSION_ID)?.isActive, true);
  });

  it('registers every command of its manifest', async () => {
    const manifest = vscode.extensions.getExtension(EXTENSION_ID)!.packageJSON as { contributes: { commands: { command: string }[] } };
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = manifest.contributes.commands.map((c) => c.command).filter((c) => !registered.has(c));
    assert.deepEqual(missing, []);
  });
});
