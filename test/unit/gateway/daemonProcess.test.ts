// The daemon as a real process: one per user (a second start finds the first and exits 0),
// a 0600 state file, --detach/--stop, and recovery after kill -9 during a command: the Run is
// still listed and usable, the dead command's record is reported as lost (and its leftover
// processes killed), and nothing hangs.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { findGateway, ensureGateway, stopGateway } from '../../../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../../../server/gateway/localClient';
import { bootId, processStartTime } from '../../../server/platform/processIdentity';

const ROOT = path.resolve(__dirname, '../../..');
const GATEWAY = [process.execPath, '--import', 'tsx', path.join(ROOT, 'test/fixtures/gatewayMain.ts')];

function startForeground(stateDir: string): ChildProcess {
  const [file, ...args] = GATEWAY as [string, ...string[]];
  return spawn(file, [...args, '--state-dir', stateDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
}

function exited(child: ChildProcess, timeoutMs = 15_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('process did not exit in time')), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

async function waitHealthy(stateDir: string, pid?: number, timeoutMs = 15_000): Promise<{ url: string; token: string; pid: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await findGateway(stateDir);
    if (found && (pid === undefined || found.pid === pid)) return found;
    if (Date.now() > deadline) throw new Error('gateway did not become healthy');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker) && !/\) Z /.test(fs.readFileSync(`/proc/${name}/stat`, 'utf8'))) found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

describe('local gateway daemon process', function () {
  this.timeout(60_000);
  let stateDir: string;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    stateDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'ss-daemon-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGTERM');
        await exited(c).catch(() => c.kill('SIGKILL'));
      }
    }
    await stopGateway({ stateDir, timeoutMs: 5000 });
    for (const pid of processesWith('600.777')) process.kill(pid, 'SIGKILL');
    await fsp.rm(stateDir, { recursive: true, force: true });
  });

  it('publishes a 0600 state file; a second start finds the first and exits 0; --stop stops it', async () => {
    const first = startForeground(stateDir);
    children.push(first);
    const gw = await waitHealthy(stateDir, first.pid);
    const st = await fsp.stat(path.join(stateDir, 'gateway.json'));
    assert.equal(st.mode & 0o777, 0o600);
    const state = JSON.parse(await fsp.readFile(path.join(stateDir, 'gateway.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(Object.keys(state).sort(), ['api', 'bootId', 'host', 'pid', 'port', 'startTime', 'startedAt', 'token', 'url', 'version']);
    assert.equal(state.host, '127.0.0.1');
    assert.equal(state.api, 'era-c');

    const second = startForeground(stateDir);
    children.push(second);
    let out = '';
    second.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    assert.equal(await exited(second), 0);
    assert.match(out, new RegExp(`already running: ${gw.url.replace(/[.]/g, '\\.')} \\(pid ${first.pid}\\)`));

    // A wrong or missing token is refused.
    const bad = new LocalGatewayClient(gw.url, 'not-the-token');
    await assert.rejects(bad.listRuns(), (e: Error & { status?: number }) => e.status === 401);

    const ensured = await ensureGateway({ stateDir, command: GATEWAY });
    assert.equal(ensured.pid, first.pid);

    const stop = spawn(GATEWAY[0] as string, [...GATEWAY.slice(1), '--stop', '--state-dir', stateDir], { cwd: ROOT, stdio: 'ignore' });
    assert.equal(await exited(stop), 0);
    assert.equal(await exited(first), 0);
    assert.equal(fs.existsSync(path.join(stateDir, 'gateway.json')), false);
    assert.equal(fs.existsSync(path.join(stateDir, 'gateway.lock')), false);
  });

  it('a start that meets a stopping daemon (lock held, not answering) starts as soon as the lock is let go', async () => {
    // A stopping daemon keeps its lock until its server has closed, and answers no health check
    // meanwhile: a live process named in the lock, no state file.
    const stopping = spawn('sleep', ['30'], { stdio: 'ignore' });
    children.push(stopping);
    const lockFile = path.join(stateDir, 'gateway.lock');
    const startTime = processStartTime(stopping.pid as number);
    assert.ok(startTime);
    await fsp.writeFile(lockFile, JSON.stringify({ pid: stopping.pid, startTime, bootId: bootId() }) + '\n', { mode: 0o600 });
    const starter = startForeground(stateDir);
    children.push(starter);
    let err = '';
    starter.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    // The starter says when it found the lock held, and waits.
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (/holds .*gateway\.lock: waiting/.test(err)) resolve();
        else if (starter.exitCode !== null) reject(new Error(`the starter exited instead of waiting: ${err}`));
      };
      starter.stderr?.on('data', check);
      starter.once('exit', check);
      check();
    });
    await fsp.rm(lockFile); // the stopping daemon has closed and released its lock
    // Well inside the 15 s a starter waits for a holder to answer: it took the lock and serves.
    const found = await waitHealthy(stateDir, starter.pid, 5000);
    assert.equal(found.pid, starter.pid, err);
    assert.equal(JSON.parse(await fsp.readFile(lockFile, 'utf8')).pid, starter.pid);
  });

  it('--detach returns once healthy, and ensureGateway reuses it', async () => {
    const detach = spawn(GATEWAY[0] as string, [...GATEWAY.slice(1), '--detach', '--state-dir', stateDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    detach.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    assert.equal(await exited(detach), 0);
    const found = await findGateway(stateDir);
    assert.ok(found, out);
    assert.match(out, /gateway running: http:\/\/127\.0\.0\.1:\d+ \(pid \d+\)/);
    assert.equal((await ensureGateway({ stateDir, command: GATEWAY })).pid, found.pid);
    assert.equal(await stopGateway({ stateDir }), true);
    assert.equal(await findGateway(stateDir), undefined);
  });

  it('kill -9 during a command: restart finds the Run, reports the dead command, kills its leftovers, and nothing hangs', async () => {
    const first = startForeground(stateDir);
    children.push(first);
    const gw1 = await waitHealthy(stateDir, first.pid);
    const c1 = new LocalGatewayClient(gw1.url, gw1.token, 10_000);
    const created = await c1.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'survivor' },
      spec: { runtime: 'process', mode: { session: {} } },
    });
    const ready = await c1.waitPhase('default', created.metadata.name ?? '', ['Ready'], 10_000);
    const P = endpointPathOf(ready);
    const doomed = c1.execute(P, { command: { argv: ['sh', '-c', 'sleep 600.777 & sleep 600.777'] } }, { operationId: 'doomed', timeoutMs: 20_000 }).then(
      () => 'completed',
      (e: Error) => e.message,
    );
    const deadline = Date.now() + 10_000;
    while (processesWith('600.777').length < 2) {
      assert.ok(Date.now() < deadline, 'the command did not start');
      await new Promise((r) => setTimeout(r, 25));
    }
    first.kill('SIGKILL');
    await exited(first);
    assert.notEqual(await doomed, 'completed', 'the in-flight call fails instead of hanging');
    assert.ok(processesWith('600.777').length >= 1, 'the process backend command outlived its daemon');

    const second = startForeground(stateDir);
    children.push(second);
    const gw2 = await waitHealthy(stateDir, second.pid);
    const c2 = new LocalGatewayClient(gw2.url, gw2.token, 10_000);
    const runs = await c2.listRuns('default');
    assert.deepEqual(runs.map((r) => [r.metadata.name, r.status?.phase]), [['survivor', 'Ready']]);
    const run = runs[0];
    assert.ok(run);
    assert.ok(run.status?.endpoint?.url.startsWith(gw2.url), 'the endpoint names the new daemon');
    const lostCondition = run.status?.conditions?.find((c) => c.type === 'OperationsLost');
    assert.equal(lostCondition?.reason, 'ExecutionLost');
    assert.match(lostCondition?.message ?? '', /doomed/);
    const ops = await c2.operations('default', 'survivor');
    const rec = ops.find((o) => o.operationId === 'doomed');
    assert.equal(rec?.state, 'lost');
    assert.equal(rec?.outcome, 'lost');
    assert.match(rec?.message ?? '', /exited; its remaining processes were killed/);
    assert.deepEqual(processesWith('600.777'), []);
    assert.equal(await c2.cancel(endpointPathOf(run), 'doomed'), 'ended');
    const again = await c2.execute(endpointPathOf(run), { command: { argv: ['echo', 'alive'] } });
    assert.equal(again.command?.stdout, Buffer.from('alive\n').toString('base64'));
    second.kill('SIGTERM');
    assert.equal(await exited(second), 0);
  });

  it('with the daemon gone, `sandbox cancel` kills the command from its exec record', async () => {
    const daemon = startForeground(stateDir);
    children.push(daemon);
    const gw = await waitHealthy(stateDir, daemon.pid);
    const client = new LocalGatewayClient(gw.url, gw.token, 10_000);
    await client.createRun('default', { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'orphaned' }, spec: { runtime: 'process', mode: { session: {} } } });
    const ready = await client.waitPhase('default', 'orphaned', ['Ready'], 10_000);
    const pending = client.execute(endpointPathOf(ready), { command: { argv: ['sh', '-c', 'sleep 600.777 & sleep 600.777'] } }, { operationId: 'orphan', timeoutMs: 20_000 }).catch(() => undefined);
    const deadline = Date.now() + 10_000;
    while (processesWith('600.777').length < 2) {
      assert.ok(Date.now() < deadline, 'the command did not start');
      await new Promise((r) => setTimeout(r, 25));
    }
    daemon.kill('SIGKILL');
    await exited(daemon);
    await pending;
    let out = '';
    const stdout = new Writable({
      write(chunk: Buffer, _e, done) {
        out += chunk.toString();
        done();
      },
    });
    const code = await runSandboxCommand(['cancel', 'orphaned', 'orphan', '--json', '--state-dir', stateDir], { stdout, stderr: stdout }, { gatewayCommand: GATEWAY });
    assert.equal(code, 0, out);
    assert.deepEqual(JSON.parse(out), { result: 'cancelled' });
    assert.deepEqual(processesWith('600.777'), []);
  });
});
