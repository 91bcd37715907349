// The Operations view and Show Sandbox Log in a real VS Code: three commands typed into a Sandbox
// terminal — one succeeding, one failing, one cancelled with Ctrl+C — appear in the view with their
// outcomes, newest first, and the Sandbox Log channel, opened before they ran, follows them live.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, until } from './helpers';

describe('Operations view and sandbox log', () => {
  let sandbox: SandboxSummary;
  let terminal: vscode.Terminal | undefined;
  after(() => terminal?.dispose());

  it('shows a succeeded, a failed and a cancelled command, newest first; the log follows them', async () => {
    const a = await api();
    sandbox = await newLocalSandbox();
    a.operations.retarget(sandbox.key);
    await vscode.commands.executeCommand('sandboxSessions.showSandboxLog', sandbox.key);
    assert.equal(a.sandboxLogText(sandbox.key), '', 'the log channel is open and the new sandbox has no lines yet');

    terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(terminal);
    const t = terminal;
    const screen = () => plain(a.terminalTranscript(t) ?? '');
    const prompts = () => screen().split(`\n${sandbox.ref.name}:`).length - 1;
    await until(() => screen().includes(`${sandbox.ref.name}:/$ `), 'the prompt');
    const run = async (line: string) => {
      const before = prompts();
      t.sendText(line, true);
      await until(() => prompts() > before, `the prompt after ${line}`);
    };
    await run('echo op-one');
    await run("sh -c 'exit 4'");
    const before = prompts();
    t.sendText('touch started && sleep 60', true);
    const client = await a.registry.connection(sandbox.key)!.client();
    await until(async () => (await client.read('started').then(() => true, () => false)), 'the sleep to start');
    t.sendText('\x03', false);
    await until(() => prompts() > before, 'the prompt after Ctrl+C');

    await until(() => a.operations.operations.filter((r) => r.audit.operation === 'command').length >= 3, 'three commands in the Operations view');
    const commands = a.operations.operations.filter((r) => r.audit.operation === 'command');
    assert.deepEqual(
      commands.map((r) => r.audit.outcome),
      ['cancelled', 'failed', 'succeeded'],
    );
    assert.equal(commands[1]!.audit.exit_code, 4);
    const items = a.operations.getChildren().map((n) => a.operations.getTreeItem(n));
    assert.match(String(items[1]!.description), /^failed · exit 4 · \d+ ms · /);
    assert.equal((items[0]!.iconPath as vscode.ThemeIcon).id, 'circle-slash');

    await until(() => /\[audit\] command cancelled/.test(a.sandboxLogText(sandbox.key) ?? ''), 'the cancelled command in the log');
    const log = a.sandboxLogText(sandbox.key) ?? '';
    assert.match(log, /Z \[stdout\] op-one\n[^\n]*Z \[audit\] command succeeded · exit 0 · \d+ ms/);
    assert.match(log, /\[audit\] command failed · exit 4 · \d+ ms/);
    assert.doesNotMatch(log, /sleep 60|exit 4'/, 'the log never holds command text');
  });
});
