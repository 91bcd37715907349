// The Operations view and Show Sandbox Log in a real VS Code: three commands typed into a Sandbox
// terminal — one succeeding, one failing, one cancelled with Ctrl+C — appear in the view with their
// outcomes, newest first, and the Sandbox Log channel, opened before they ran, follows them live;
// each of them, run from this window, opens its output in a read-only editor and re-runs in the
// Sandbox terminal (a new row in the view).
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

    // This window ran them: each row opens its output in a read-only editor, and re-runs in the Sandbox terminal.
    const rowOf = (outcome: string) => {
      const node = a.operations.getChildren().find((n) => n.kind === 'operation' && n.row.audit.operation === 'command' && n.row.audit.outcome === outcome);
      assert.ok(node, `a ${outcome} command row`);
      return node;
    };
    const outputOf = async (outcome: string) => {
      const editor = await vscode.commands.executeCommand<vscode.TextEditor>('sandboxSessions.openOperationOutput', rowOf(outcome));
      assert.equal(editor.document.uri.scheme, 'sandbox-output', 'a read-only document of this window, not a file');
      return editor.document.getText();
    };
    for (const outcome of ['succeeded', 'failed', 'cancelled']) {
      assert.match(String(a.operations.getTreeItem(rowOf(outcome)).contextValue), /\.ranHere$/, `the ${outcome} row offers Re-run and Open Output`);
    }
    assert.match(await outputOf('succeeded'), /^\$ echo op-one\n# sandbox [^\n]* · terminal · operation [^\n]+\n\nop-one\n\[exit 0\]\n$/);
    assert.match(await outputOf('failed'), /^\$ sh -c 'exit 4'\n[\s\S]*\[exit 4\]\n$/);
    assert.match(await outputOf('cancelled'), /^\$ touch started && sleep 60\n[\s\S]*\[cancelled\]\n$/);

    const beforeRerun = prompts();
    const rerunIn = await vscode.commands.executeCommand<vscode.Terminal>('sandboxSessions.rerunOperation', rowOf('succeeded'));
    assert.equal(rerunIn, t, 'the idle Sandbox terminal of the sandbox runs it');
    await until(() => prompts() > beforeRerun, 'the prompt after the re-run');
    assert.equal(screen().split('\n').filter((l) => l.trim() === 'op-one').length, 2, 'op-one printed twice');
    await until(() => a.operations.operations.filter((r) => r.audit.operation === 'command').length >= 4, 'the re-run in the Operations view');
    const newest = a.operations.getChildren()[0]!;
    assert.equal(newest.kind === 'operation' && newest.row.audit.outcome, 'succeeded');
    assert.match(await vscode.commands.executeCommand<vscode.TextEditor>('sandboxSessions.openOperationOutput', newest).then((e) => e.document.getText()), /^\$ echo op-one\n/);
  });
});
