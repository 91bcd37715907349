// The Sandbox terminal in a real VS Code: keystrokes in (sendText feeds the Pseudoterminal's
// handleInput), the terminal's screen out: a command, a failing exit code, cd, and Ctrl+C
// stopping `sleep 60` (the process itself, not just the screen).
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, sandboxTask, until } from './helpers';

/** Whether a process of this machine exists (signal 0 sends nothing). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

describe('Sandbox terminal', () => {
  let sandbox: SandboxSummary;
  let terminal: vscode.Terminal;
  const screen = async () => plain((await api()).terminalTranscript(terminal) ?? '');
  const typeLine = (line: string) => terminal.sendText(line, true);
  // A new prompt starts a line; the line editor's redraws of the same prompt start with a bare \r.
  const promptCount = async () => (await screen()).split(`\n${sandbox.ref.name}:`).length - 1;

  before(async () => {
    sandbox = await newLocalSandbox();
    const t = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(t, 'a terminal was opened');
    terminal = t;
    await until(async () => (await screen()).includes(`${sandbox.ref.name}:/$ `), 'the prompt');
  });
  after(() => terminal?.dispose());

  it('runs a command and shows its output', async () => {
    const prompts = await promptCount();
    typeLine('echo hello-from-sandbox');
    await until(async () => (await promptCount()) > prompts, 'the next prompt');
    assert.match(await screen(), /hello-from-sandbox\r\n/);
  });

  it('shows the exit code of a failing command', async () => {
    const prompts = await promptCount();
    typeLine("sh -c 'exit 7'");
    await until(async () => (await promptCount()) > prompts, 'the next prompt');
    assert.match(await screen(), /\[exit 7\]/);
  });

  it('tracks cd and runs later commands in that directory', async () => {
    let prompts = await promptCount();
    typeLine('mkdir -p deep/er');
    await until(async () => (await promptCount()) > prompts, 'mkdir');
    prompts = await promptCount();
    typeLine('cd deep/er');
    await until(async () => (await screen()).endsWith(`${sandbox.ref.name}:/deep/er$ `), 'the cd prompt');
    prompts = await promptCount();
    typeLine('pwd');
    await until(async () => (await promptCount()) > prompts, 'pwd');
    assert.match(await screen(), /\/deep\/er\r\n/);
    typeLine('cd ..');
    await until(async () => (await screen()).endsWith(`${sandbox.ref.name}:/deep$ `), 'cd ..');
  });

  it('stops `sleep 60` on Ctrl+C: the prompt comes back and the sandbox process is gone', async () => {
    typeLine('cd /');
    await until(async () => (await screen()).endsWith(`${sandbox.ref.name}:/$ `), 'the root prompt');
    const client = await (await api()).registry.connection(sandbox.key)!.client();
    const prompts = await promptCount();
    const started = Date.now();
    typeLine("sh -c 'echo $$ > ctrlc.pid; exec sleep 60'");
    // Ctrl+C once the command runs: it has written its pid (the `process` runtime runs it on this machine).
    let pid = 0;
    const pidOf = async () => Number((await client.read('ctrlc.pid').catch(() => undefined))?.contents.toString('utf8').trim() || 0);
    await until(async () => (pid = await pidOf()) > 1 && alive(pid), 'the command to start');
    terminal.sendText('\x03', false);
    await until(async () => (await promptCount()) > prompts, 'the prompt after Ctrl+C', 10_000);
    assert.ok(Date.now() - started < 10_000, 'well before 60 s');
    assert.match(await screen(), /\^C\r\n\[cancelled\]/);
    await until(() => !alive(pid), `the sandbox's sleep (pid ${pid}) to end`, 5_000);
    // The sandbox is usable right after.
    const after = await promptCount();
    typeLine('echo still-here');
    await until(async () => (await promptCount()) > after, 'the next command');
    assert.match(await screen(), /still-here/);
  });

  it('runs a `sandbox` task from tasks.json (CustomExecution) and reports its exit code', async () => {
    const { task, exitCode } = await sandboxTask('sandbox exit 3', 'printf task-ran > task.txt; exit 3', sandbox.key);
    await vscode.tasks.executeTask(task);
    assert.equal(await exitCode, 3);
    const client = await (await api()).registry.connection(sandbox.key)!.client();
    assert.equal((await client.read('task.txt')).contents.toString(), 'task-ran');
  });
});
