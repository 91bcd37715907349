// One command through a backend, without HTTP: output caps with the truncation marker, exit
// code −1 for a signal, nothing of a command's group outliving it, the SIGTERM→SIGKILL grace
// for a background process that ignores SIGTERM, and stdin.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { runCommand } from '../../../server/local/execution';
import { ProcessBackend } from '../../../server/local/processBackend';
import { OperationAbort } from '../../../server/local/operationAbort';
import type { LaunchSpec } from '../../../server/local/backend';

const backend = new ProcessBackend();
const spec = (argv: string[]): LaunchSpec => ({ argv, cwd: '/tmp', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, writable: [], tmpDir: '/tmp', hide: [], isolateNetwork: false });
const never = new AbortController().signal;

function alive(marker: string): boolean {
  return fs.readdirSync('/proc').some((p) => {
    try {
      return /^\d+$/.test(p) && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker) && !/\) Z /.test(fs.readFileSync(`/proc/${p}/stat`, 'utf8'));
    } catch {
      return false;
    }
  });
}

async function waitUntil(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((res) => setTimeout(res, 10));
  }
}

describe('local runtime: command execution', function () {
  this.timeout(20_000);

  it('caps each stream and appends the marker once', async () => {
    const r = await runCommand(backend, { spec: spec(['sh', '-c', 'printf 0123456789abcdef; printf e >&2']), timeoutMs: 0, signal: never, maxOutputBytes: 10 });
    assert.equal(r.stdout.toString(), '0123456789\n[output truncated]\n');
    assert.equal(r.stderr.toString(), 'e');
    assert.equal(r.exitCode, 0);
  });

  it('streams in chunks and reports the same cap', async () => {
    const chunks: string[] = [];
    const r = await runCommand(backend, { spec: spec(['sh', '-c', 'printf 0123456789abcdef']), timeoutMs: 0, signal: never, maxOutputBytes: 4, onOutput: (_s, d) => chunks.push(d.toString()) });
    assert.equal(chunks.join(''), '0123\n[output truncated]\n');
    assert.equal(r.stdout.length, 0);
  });

  it('feeds stdin, keeps exit codes, and gives −1 when a signal ends the command', async () => {
    const cat = await runCommand(backend, { spec: spec(['sh', '-c', 'cat; exit 5']), stdin: Buffer.from('in'), timeoutMs: 0, signal: never });
    assert.deepEqual([cat.exitCode, cat.stdout.toString()], [5, 'in']);
    const killed = await runCommand(backend, { spec: spec(['sh', '-c', 'kill -9 $$']), timeoutMs: 0, signal: never });
    assert.equal(killed.exitCode, -1);
    assert.equal(killed.timedOut, false);
  });

  it('kills what a finished command left in its group', async () => {
    const r = await runCommand(backend, { spec: spec(['sh', '-c', 'sleep 600.31 & echo started']), timeoutMs: 0, signal: never });
    assert.equal(r.stdout.toString(), 'started\n');
    await new Promise((res) => setTimeout(res, 100));
    assert.equal(alive('600.31'), false);
  });

  it('a background process that ignores SIGTERM gets SIGKILL after the grace, not before', async () => {
    const controller = new AbortController();
    const pending = runCommand(backend, { spec: spec(['sh', '-c', "(trap '' TERM; sleep 600.32) & sleep 600.33"]), timeoutMs: 0, signal: controller.signal, graceMs: 3000 });
    await waitUntil(() => alive('sleep\u0000600.32') && alive('sleep\u0000600.33'));
    const aborted = Date.now();
    controller.abort(new OperationAbort('cancel'));
    await waitUntil(() => !alive('sleep\u0000600.33'));
    assert.ok(Date.now() - aborted < 1000, 'the main command died on SIGTERM');
    assert.equal(alive('600.32'), true, 'the TERM-ignoring child is still in its grace');
    const r = await pending;
    assert.equal(r.exitCode, -1);
    assert.ok(r.abortReason instanceof OperationAbort);
    assert.ok(Date.now() - aborted >= 2900, `SIGKILL came after ${Date.now() - aborted} ms`);
    assert.equal(alive('600.32'), false);
  });

  it('refuses isolateNetwork on the process backend', () => {
    assert.throws(() => runCommand(backend, { spec: { ...spec(['true']), isolateNetwork: true }, timeoutMs: 0, signal: never }), /cannot isolate the network/);
  });

  it('the command does not start before onStarted (the exec record) has returned', async () => {
    const marker = `/tmp/ss-gate-${process.pid}-${Date.now()}`;
    let seenEarly = true;
    const r = await runCommand(backend, {
      spec: spec(['touch', marker]),
      timeoutMs: 0,
      signal: never,
      onStarted: () => {
        const until = Date.now() + 300;
        while (Date.now() < until) {
          // hold the gate shut for a while, synchronously
        }
        seenEarly = fs.existsSync(marker);
      },
    });
    assert.equal(r.exitCode, 0);
    assert.equal(seenEarly, false);
    assert.equal(fs.existsSync(marker), true);
    fs.rmSync(marker);
  });

  it('refuses an executable that is not on PATH before starting anything', () => {
    assert.throws(() => runCommand(backend, { spec: spec(['no-such-tool-xyz']), timeoutMs: 0, signal: never }), {
      message: 'start command: exec: "no-such-tool-xyz": executable file not found in $PATH',
    });
  });
});
