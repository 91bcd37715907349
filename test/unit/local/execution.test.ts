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
    const started = Date.now();
    const pending = runCommand(backend, { spec: spec(['sh', '-c', "(trap '' TERM; sleep 600.32) & sleep 600.33"]), timeoutMs: 0, signal: controller.signal, graceMs: 1000 });
    await new Promise((res) => setTimeout(res, 200));
    controller.abort(new OperationAbort('cancel'));
    await new Promise((res) => setTimeout(res, 500));
    assert.equal(alive('600.33'), false, 'the main command died on SIGTERM');
    assert.equal(alive('600.32'), true, 'the TERM-ignoring child is still in its grace');
    const r = await pending;
    assert.equal(r.exitCode, -1);
    assert.ok(r.abortReason instanceof OperationAbort);
    assert.ok(Date.now() - started >= 1100);
    assert.equal(alive('600.32'), false);
  });

  it('refuses isolateNetwork on the process backend', () => {
    assert.throws(() => runCommand(backend, { spec: { ...spec(['true']), isolateNetwork: true }, timeoutMs: 0, signal: never }), /cannot isolate the network/);
  });
});
