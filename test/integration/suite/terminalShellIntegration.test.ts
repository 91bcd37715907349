// The Sandbox shell speaks VS Code's shell integration: VS Code activates it for the terminal, knows each command
// line and its exit code (what other extensions — an agent running commands in a terminal — read through
// `Terminal.shellIntegration` and the shell execution events), and can run a command and stream its output.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { newLocalSandbox, until } from './helpers';

describe('the Sandbox shell and VS Code shell integration', () => {
  it('reports each command line and its exit code, and runs commands through shellIntegration.executeCommand', async function () {
    this.timeout(60_000);
    const sandbox = await newLocalSandbox();
    const ended: { commandLine: string; exitCode: number | undefined }[] = [];
    let terminal: vscode.Terminal | undefined;
    const subscription = vscode.window.onDidEndTerminalShellExecution((e) => {
      if (e.terminal === terminal) ended.push({ commandLine: e.execution.commandLine.value, exitCode: e.exitCode });
    });
    try {
      terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
      assert.ok(terminal);
      const t = terminal;
      await until(() => t.shellIntegration !== undefined, 'shell integration to activate');
      t.sendText('sh -c "echo to-stdout; exit 3"', true);
      await until(() => ended.length === 1, 'the end of the first command');
      assert.deepEqual(ended[0], { commandLine: 'sh -c "echo to-stdout; exit 3"', exitCode: 3 });

      const execution = t.shellIntegration!.executeCommand('printf "%s\\n" one two');
      let output = '';
      for await (const data of execution.read()) output += data;
      assert.match(output, /one\r?\ntwo/);
      await until(() => ended.length === 2, 'the end of the second command');
      assert.deepEqual(ended[1], { commandLine: 'printf "%s\\n" one two', exitCode: 0 });
    } finally {
      subscription.dispose();
      terminal?.dispose();
    }
  });
});
