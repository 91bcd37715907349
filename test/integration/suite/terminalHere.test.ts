// Open Sandbox Terminal Here: the Explorer's menu on a folder of a sandbox opens a Sandbox terminal whose prompt and
// commands are in that folder (the Explorer passes the folder and the selection, as it does to every command).
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { api, EXTENSION_ID, newLocalSandbox, plain, until } from './helpers';

describe('Open Sandbox Terminal Here (Explorer, on a sandbox folder)', () => {
  it('is on the Explorer menu of sandbox folders only', () => {
    const manifest = vscode.extensions.getExtension(EXTENSION_ID)!.packageJSON as {
      contributes: { menus: Record<string, { command: string; when?: string }[]> };
    };
    const entry = manifest.contributes.menus['explorer/context']?.find((m) => m.command === 'sandboxSessions.openTerminalHere');
    // VS Code hands the manifest's `when` back normalized (terms sorted, values quoted).
    assert.deepEqual(entry?.when?.split(' && ').map((term) => term.replace(/'/g, '')).sort(), ['explorerResourceIsFolder', 'resourceScheme == sandbox']);
  });

  it('opens a terminal in the folder it was invoked on, also one whose name has a space', async function () {
    this.timeout(60_000);
    const sandbox = await newLocalSandbox();
    const uri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: p });
    await vscode.workspace.fs.createDirectory(uri('/a dir/inner'));
    await vscode.workspace.fs.writeFile(uri('/a dir/inner/here.txt'), new TextEncoder().encode('x'));
    const folder = uri('/a dir/inner');
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminalHere', folder, [folder]);
    assert.ok(terminal, 'a terminal was opened');
    try {
      const screen = async () => plain((await api()).terminalTranscript(terminal) ?? '');
      const prompt = `${sandbox.ref.name}:/a dir/inner$ `;
      await until(async () => (await screen()).endsWith(prompt), 'the prompt in the folder');
      const before = (await screen()).length;
      terminal.sendText('ls', true);
      await until(async () => (await screen()).slice(before).endsWith(prompt), 'the prompt after ls');
      assert.match((await screen()).slice(before), /\nhere\.txt\r\n/);
    } finally {
      terminal.dispose();
    }
  });

  it('on anything but a sandbox folder it opens nothing', async () => {
    assert.equal(await vscode.commands.executeCommand('sandboxSessions.openTerminalHere', vscode.Uri.file('/tmp')), undefined);
    assert.equal(await vscode.commands.executeCommand('sandboxSessions.openTerminalHere'), undefined);
    await vscode.commands.executeCommand('notifications.clearAll'); // its warnings, out of the next tests' way
  });
});
