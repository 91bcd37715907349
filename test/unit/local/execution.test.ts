// One command through a backend, without HTTP: output caps with the truncation marker, exit
// code −1 for a signal, nothing of a command's group outliving it, the SIGTERM→SIGKILL grace
// for a background process that ignores SIGTERM, and stdin. A cancelled, timed-out or finished
// command reports its outcome only once its processes (children and grandchildren that ignore
// SIGTERM; under bubblewrap the whole pid namespace, even a setsid one) are gone from /proc;
// a group that cannot be killed is reported with its survivors, never as gone.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCommand, type CommandRun } from '../../../server/local/execution';
import { ProcessBackend } from '../../../server/local/processBackend';
import { BubblewrapBackend } from '../../../server/local/bubblewrapBackend';
import { CommandLostError } from '../../../server/local/commandLost';
import { OperationAbort } from '../../../server/local/operationAbort';
import { liveGroupMembers } from '../../../server/local/procInfo';
import type { Backend, LaunchSpec } from '../../../server/local/backend';

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

/** Whether a host pid still runs (a zombie runs nothing). */
function running(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The pid in a file the command writes (read once the file is complete). */
async function pidFrom(file: string): Promise<number> {
  let pid = 0;
  await waitUntil(() => {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    pid = /^\d+\n$/.test(text) ? Number(text) : 0;
    return pid > 0;
  });
  return pid;
}

/** The last (innermost) entry of a process's NSpid: its pid inside its own pid namespace. */
function nsPid(pid: number): number | undefined {
  try {
    const line = /^NSpid:\s+(.*)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return line ? Number(line.trim().split(/\s+/).pop()) : undefined;
  } catch {
    return undefined;
  }
}

/** Host pids whose command line contains `marker`. */
function hostPidsWith(marker: string): number[] {
  return fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p) && running(Number(p)) && (() => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
    } catch {
      return false;
    }
  })()).map(Number);
}

/**
 * A command whose processes all ignore SIGTERM: the shell itself, a background child, and a
 * grandchild (no setsid: same process group). `extra` adds more, e.g. a setsid one under bwrap.
 * Each writes its pid (as its own pid namespace sees it) to <dir>/<name>.pid.
 */
function stubbornScript(dir: string, marker: string, extra?: (dir: string, marker: string) => string): string {
  return [
    "trap '' TERM",
    `sleep ${marker}1 & echo $! > ${dir}/child.pid`,
    `sh -c 'sleep ${marker}2 & echo $! > ${dir}/grandchild.pid; wait' &`,
    extra?.(dir, marker) ?? '',
    'wait',
  ].join('\n');
}

const PIDS = ['child', 'grandchild'];

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
    assert.equal(alive('600.31'), false, 'gone when the result arrives');
  });

  it('a background process that ignores SIGTERM gets SIGKILL after the grace, not before', async () => {
    const controller = new AbortController();
    let settled = false;
    const pending = runCommand(backend, { spec: spec(['sh', '-c', "(trap '' TERM; sleep 600.32) & sleep 600.33"]), timeoutMs: 0, signal: controller.signal, graceMs: 3000 });
    void pending.finally(() => (settled = true));
    await waitUntil(() => alive('sleep\u0000600.32') && alive('sleep\u0000600.33'));
    const aborted = Date.now();
    controller.abort(new OperationAbort('cancel'));
    await waitUntil(() => !alive('sleep\u0000600.33'));
    // SIGKILL goes to the whole group at once: the main command gone while its TERM-ignoring sibling lives and the
    // outcome is still pending means SIGTERM ended it (no elapsed-time bound: a loaded machine may poll late).
    assert.equal(alive('600.32'), true, 'the TERM-ignoring child is still in its grace');
    assert.equal(settled, false, 'the outcome waits for the grace');
    const r = await pending;
    assert.equal(r.exitCode, -1);
    assert.ok(r.abortReason instanceof OperationAbort);
    assert.ok(Date.now() - aborted >= 2900, `SIGKILL came after ${Date.now() - aborted} ms`);
    assert.equal(alive('600.32'), false);
  });

  describe('the outcome waits until nothing of the command is left', () => {
    let dir: string;
    let n = 0;
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-exec-'));
    });
    afterEach(() => {
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const marker = (): string => `6${process.pid % 1000}.${++n}0`; // a sleep argument unique to this test

    /** Starts the stubborn script, waits for its pids, ends it with `end`, returns the outcome and the host pids. */
    async function stubborn(
      b: Backend,
      end: 'cancel' | 'timeout',
      extra?: (dir: string, marker: string) => string,
      names = PIDS,
    ): Promise<{ outcome: Awaited<ReturnType<typeof runCommand>>; pids: number[]; group: number[] }> {
      const controller = new AbortController();
      const m = marker();
      let pgid = 0;
      const run: CommandRun = {
        onStarted: (id) => {
          pgid = id;
        },
        spec: { ...spec(['sh', '-c', stubbornScript(dir, m, extra)]), cwd: dir, writable: [dir], tmpDir: dir },
        timeoutMs: end === 'timeout' ? 2000 : 0, // well after the script has set its trap and written its pids
        signal: controller.signal,
        graceMs: 300,
      };
      const pending = runCommand(b, run);
      const inner = await Promise.all(names.map((name) => pidFrom(path.join(dir, `${name}.pid`))));
      // Host pids: the same as written, or (in a pid namespace) the marked sleeps whose innermost pid was written.
      const pids = inner.map((p) => (b.capabilities.pidNamespace ? hostPidsWith(m).find((h) => nsPid(h) === p) ?? -1 : p));
      assert.ok(pids.every((p) => p > 0 && running(p)), `all started: ${inner.join(',')} → ${pids.join(',')}`);
      if (end === 'cancel') controller.abort(new OperationAbort('cancel'));
      const outcome = await pending;
      return { outcome, pids, group: liveGroupMembers(pgid) };
    }

    it('cancel: a TERM-ignoring child and grandchild are gone from /proc when the result arrives', async () => {
      const { outcome, pids, group } = await stubborn(backend, 'cancel');
      assert.deepEqual(pids.filter(running), [], 'nothing of the command runs any more');
      assert.deepEqual(group, [], 'nor anything of its process group');
      assert.equal(outcome.exitCode, -1);
      assert.ok(outcome.abortReason instanceof OperationAbort);
    });

    it('timeout: the same, and the outcome says timedOut', async () => {
      const { outcome, pids, group } = await stubborn(backend, 'timeout');
      assert.deepEqual(pids.filter(running), [], 'nothing of the command runs any more');
      assert.deepEqual(group, [], 'nor anything of its process group');
      assert.deepEqual([outcome.exitCode, outcome.timedOut, outcome.abortReason], [-1, true, undefined]);
    });

    describe('bubblewrap', () => {
      const bwrap = new BubblewrapBackend();
      before(async () => {
        // As in the isolation tests: never skipped (scripts/install-test-deps.sh installs bwrap).
        const probe = await bwrap.probe();
        assert.ok(probe.ok, `bwrap does not work here: ${probe.ok ? '' : probe.reason}`);
      });
      const setsid = (d: string, m: string): string => `setsid sh -c 'sleep ${m}3 & echo $! > ${d}/escaped.pid; wait' &`;

      for (const end of ['cancel', 'timeout'] as const) {
        it(`${end}: every process of the namespace, even one that left the group with setsid, is gone when the result arrives`, async () => {
          const { outcome, pids, group } = await stubborn(bwrap, end, setsid, [...PIDS, 'escaped']);
          assert.deepEqual(pids.filter(running), [], 'nothing of the namespace runs any more');
          assert.deepEqual(group, [], 'nor anything of its process group (the namespace init included)');
          assert.equal(outcome.exitCode, -1);
          assert.equal(outcome.timedOut, end === 'timeout');
        });
      }
    });
  });

  it('a group that cannot be killed is reported with its survivors after the bound, never as gone', async function () {
    // A process of the group that the waiter may not signal (a daemon user facing a command
    // that became root through sudo): run the waiter as `nobody` against a group of ours.
    assert.equal(process.getuid?.(), 0, 'this test runs the waiter as nobody, which needs root (as on the test machines)');
    const leader = spawn('sleep', ['600.61'], { detached: true, stdio: 'ignore' });
    const pgid = leader.pid as number;
    try {
      const code = `import('${path.resolve(__dirname, '../../../server/local/procInfo.ts')}').then((m) => m.killGroupAndWait(${pgid}, 300)).then((s) => process.stdout.write(JSON.stringify(s)))`;
      const started = Date.now();
      const out = await new Promise<string>((resolve, reject) =>
        execFile('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '--import', 'tsx', '-e', code], { cwd: path.resolve(__dirname, '../../..'), timeout: 15_000 }, (err, stdout, stderr) =>
          err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
        ),
      );
      assert.deepEqual(JSON.parse(out), [pgid], 'the survivor is named');
      assert.ok(Date.now() - started >= 300, 'only after the bound');
      assert.deepEqual(liveGroupMembers(pgid), [pgid], 'and it really still runs');
      const err = new CommandLostError(pgid, [pgid], 300);
      assert.equal(err.code, 'CommandLost');
      assert.equal(err.httpStatus, 500);
      assert.match(err.message, new RegExp(`^command lost: 1 process\\(es\\) of its group ${pgid} \\(pid ${pgid}\\) still running 0.3 s after SIGKILL`));
    } finally {
      leader.kill('SIGKILL');
    }
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

  it('the command does not start before the promise onStarted returns (the exec record being written) has settled', async () => {
    const marker = `/tmp/ss-gate-async-${process.pid}-${Date.now()}`;
    let seenEarly = true;
    const r = await runCommand(backend, {
      spec: spec(['touch', marker]),
      timeoutMs: 0,
      signal: never,
      onStarted: async () => {
        // The gate stays shut while the event loop runs on: only the passing of time can show that nothing ran meanwhile.
        await new Promise((res) => setTimeout(res, 300));
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
