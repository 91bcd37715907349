// The gateway's round trip in the status bar, in a real VS Code: measured by the item's status checks of the
// sandbox you work in, shown in the item once it is above `sandboxSessions.latencyWarningMs` (0: always), and
// gone from the item again below it — without a reload.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { api, newLocalSandbox, until } from './helpers';

describe('the gateway round trip in the status bar', () => {
  const setting = () => vscode.workspace.getConfiguration('sandboxSessions');
  after(async () => {
    await setting().update('latencyWarningMs', undefined, vscode.ConfigurationTarget.Global);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('shows the measured round trip when asked to (0), and hides it when it is under the threshold', async () => {
    const a = await api();
    const sandbox = await newLocalSandbox();
    const uri = vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: '/round-trip.txt' });
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode('x\n'));
    await vscode.window.showTextDocument(uri);
    await until(() => (a.statusBarText() ?? '').includes(`${sandbox.ref.name}: Ready`), 'the status bar to show the sandbox');
    assert.doesNotMatch(a.statusBarText() ?? '', /\$\(pulse\)/, 'a local gateway answers in far less than 250 ms');
    await setting().update('latencyWarningMs', 0, vscode.ConfigurationTarget.Global);
    await until(() => /\$\(pulse\) \d+ ms/.test(a.statusBarText() ?? ''), 'the round trip in the item');
    const ms = Number(/\$\(pulse\) (\d+) ms/.exec(a.statusBarText() ?? '')?.[1]);
    assert.ok(ms >= 0 && ms < 5000, `a plausible round trip: ${ms} ms`);
    await setting().update('latencyWarningMs', 100_000, vscode.ConfigurationTarget.Global);
    await until(() => !/\$\(pulse\)/.test(a.statusBarText() ?? ''), 'the round trip to leave the item');
  });
});
