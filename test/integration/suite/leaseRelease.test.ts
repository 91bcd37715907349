// A sandbox created with a lease timeout lives while this window uses it and expires once it does not: the
// companion server holds the lease from the moment the window opens the sandbox (here: a Sandbox terminal), keeps
// it while the terminal is open (or a `sandbox` task runs), and stops (sandboxes/release) a few seconds after the
// last use ends — without touching sandboxes that have no lease. (Workspace folders count the same way, but adding a folder to this
// single-folder test window would restart the extension host; the e2e flows open sandboxes as folders.)
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { sandboxKey, type SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, sandboxTask, until } from './helpers';

// Short enough to watch it expire, long enough that opening the sandbox right after its create (a terminal, a
// task: one or two process starts and a WebSocket upgrade) fits in it on a loaded machine.
const LEASE_SECONDS = 5;

async function summaryOf(ref: SandboxSummary['ref']): Promise<SandboxSummary> {
  const { sandbox } = await (await api()).companion.request('sandboxes/get', { ref });
  return sandbox;
}

describe('session leases follow what the window uses', () => {
  it('holds a leased sandbox while its terminal is open and releases it after the terminal closes', async function () {
    this.timeout(60_000);
    const exported = await api();
    // The sandbox without a lease first: a leased sandbox nobody opens within its lease expires,
    // so the leased one is opened as soon as it is Ready.
    const unleased = await newLocalSandbox();
    const other = vscode.Uri.from({ scheme: 'sandbox', authority: unleased.key, path: '/' });
    const { sandbox: leased } = await exported.companion.request('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default', leaseTimeoutSeconds: LEASE_SECONDS },
      waitForReady: true,
    });

    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', leased.key);
    assert.ok(terminal, 'a terminal was opened');
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    await until(() => screen().includes(`${leased.ref.name}:/$ `), 'the prompt');
    terminal.sendText('echo leased-and-alive', true);
    // The output on a line of its own (the typed command is echoed on the prompt's line).
    await until(() => /\nleased-and-alive\r\n/.test(screen()), 'the command output');
    await vscode.workspace.fs.readDirectory(other); // an open connection without a lease
    assert.deepEqual(exported.registry.leasedKeys(), [leased.key]);

    // Well past the lease: only the heartbeats keep it Ready.
    await new Promise((r) => setTimeout(r, (LEASE_SECONDS + 3) * 1000));
    assert.equal((await summaryOf(leased.ref)).phase, 'Ready');

    terminal.dispose();
    await until(async () => (await summaryOf(leased.ref)).phase !== 'Ready', 'the released sandbox to expire', 20_000);
    const expired = await summaryOf(leased.ref);
    assert.equal(expired.phase, 'Timeout');
    assert.equal(expired.message, 'session lease expired');
    assert.deepEqual(exported.registry.leasedKeys(), []);
    // A save into it is refused with why it ended (the Run's own message), not only that it did.
    const mine = vscode.Uri.from({ scheme: 'sandbox', authority: leased.key, path: '/after-expiry.txt' });
    await assert.rejects(Promise.resolve(vscode.workspace.fs.writeFile(mine, Buffer.from('late'))), (err: Error) => {
      assert.match(err.message, new RegExp(`${leased.ref.name} is closed \\(Timeout: session lease expired\\): its files are read-only`));
      return true;
    });
    // The sandbox without a lease is untouched and still answers.
    assert.equal((await summaryOf(unleased.ref)).phase, 'Ready');
    assert.ok(Array.isArray(await vscode.workspace.fs.readDirectory(other)));
  });

  it('a running `sandbox` task holds the lease (its stream is not cut), and the sandbox is released when it ends', async function () {
    this.timeout(60_000);
    const exported = await api();
    // The task is set up first: a leased sandbox nobody opens within its lease expires, so it is opened right away.
    const ref = { provider: 'local' as const, context: 'local', namespace: 'default', name: 'leased-task' };
    const { task, exitCode } = await sandboxTask('leased sleep', 'sleep 13; printf done > slept.txt', sandboxKey(ref));
    const { sandbox: leased } = await exported.companion.request('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default', name: ref.name, leaseTimeoutSeconds: LEASE_SECONDS },
      waitForReady: true,
    });
    assert.equal(leased.key, sandboxKey(ref));
    await vscode.tasks.executeTask(task);
    // Past the release grace (3 s) and the lease together, before the task ends: only the task's hold keeps it.
    await new Promise((r) => setTimeout(r, (3 + LEASE_SECONDS + 2) * 1000));
    assert.equal((await summaryOf(leased.ref)).phase, 'Ready');
    assert.equal(await exitCode, 0, 'the task ran to its end');
    await until(async () => (await summaryOf(leased.ref)).phase !== 'Ready', 'the released sandbox to expire', 20_000);
    assert.equal((await summaryOf(leased.ref)).message, 'session lease expired');
  });
});
