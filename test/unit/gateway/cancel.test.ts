// Cancel kills everything: a command started through the gateway and cancelled by another
// process (the CLI, through POST P/operations/{id}:cancel) leaves nothing of its process
// group alive — already when the cancel answers `cancelled` — ends with exit code −1 and
// outcome `cancelled`; a child that ignores SIGTERM dies after the 2 s grace; a finished command answers
// `ended`, an unknown id `unknown`; a caller that aborts its request cancels too.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { processGroupMembers } from '../../../server/local/procInfo';
import { call, readyRun, runsPath, startTestGateway, type TestGateway } from './harness';

const ROOT = path.resolve(__dirname, '../../..');

function cli(stateDir: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'test/fixtures/sandboxMain.ts'), ...args],
      { cwd: ROOT, env: { ...process.env, SANDBOX_SESSIONS_STATE_DIR: stateDir }, timeout: 20_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Whether a pid still runs (a zombie runs nothing). */
function running(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('local gateway: cancel', function () {
  this.timeout(40_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway({ writeStateFile: true });
  });
  after(async () => {
    await t.cleanup();
  });

  it("cancelled by another process, `sh -c 'sleep 600 & sleep 600'` leaves no process of its group", async () => {
    const { run, P } = await readyRun(t.gw);
    const opId = 'cancel-me-1';
    const pending = call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { command: { argv: ['sh', '-c', 'sleep 600 & sleep 600'] } },
      headers: { 'idempotency-key': opId },
      timeoutMs: 20_000,
    });
    const ops = async (): Promise<Array<{ operationId: string; state: string; outcome?: string; exitCode?: number; kill: { pgid: number } }>> =>
      ((await call(t.gw, 'GET', `${runsPath('default', run.metadata.name)}/operations`)).json() as { items: [] }).items;
    const rec = await waitFor('the exec record', async () => (await ops()).find((r) => r.operationId === opId && r.state === 'running'));
    const pgid = rec.kill.pgid;
    await waitFor('both sleeps', () => (processGroupMembers(pgid).length >= 3 ? true : undefined));

    const res = await cli(t.stateDir, ['cancel', run.metadata.name ?? '', opId, '--json']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), { result: 'cancelled' });
    assert.deepEqual(processGroupMembers(pgid), [], 'no process of the command group is left when the cancel result arrives');

    const reply = await pending;
    assert.equal(reply.status, 200);
    assert.deepEqual(reply.json(), { command: { exitCode: -1, cancelled: true } });
    assert.deepEqual(processGroupMembers(pgid), [], 'no process of the command group is left');
    const ended = await waitFor('the ended record', async () => (await ops()).find((r) => r.operationId === opId && r.state === 'ended'));
    assert.equal(ended.outcome, 'cancelled');
    assert.equal(ended.exitCode, -1);

    const again = await cli(t.stateDir, ['cancel', run.metadata.name ?? '', opId, '--json']);
    assert.deepEqual(JSON.parse(again.stdout), { result: 'ended' });
    const unknown = await call(t.gw, 'POST', `${P}/operations/no-such-op:cancel`);
    assert.equal(unknown.status, 200);
    assert.equal(unknown.text, '{"result":"unknown"}\n');
  });

  it('a command that ignores SIGTERM is killed after the 2 s grace, and its TERM-ignoring child is gone when the results arrive', async () => {
    const { P } = await readyRun(t.gw);
    const pending = call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { command: { argv: ['sh', '-c', "trap '' TERM; sleep 600 & echo $! > sleeper.pid; wait"] } },
      headers: { 'idempotency-key': 'stubborn' },
    });
    // The pid of the background sleep (which inherited the ignored SIGTERM), as the command wrote it.
    const pid = await waitFor('the sleeper pid', async () => {
      const r = await call(t.gw, 'GET', `${P}/files/sleeper.pid`);
      const text = r.status === 200 ? Buffer.from((r.json() as { contents: string }).contents, 'base64').toString() : '';
      return /^\d+\n$/.test(text) ? Number(text) : undefined;
    });
    assert.equal(running(pid), true);
    const started = Date.now();
    const c = await call(t.gw, 'POST', `${P}/operations/stubborn:cancel`);
    const took = Date.now() - started;
    assert.equal(c.text, '{"result":"cancelled"}\n');
    assert.equal(running(pid), false, 'the TERM-ignoring child is gone when the cancel result arrives');
    assert.ok(took >= 1900 && took < 8000, `SIGKILL after the grace, not before: took ${took} ms`);
    const reply = await pending;
    assert.deepEqual(reply.json(), { command: { exitCode: -1, cancelled: true } });
  });

  it('a finished command answers ended', async () => {
    const { P } = await readyRun(t.gw);
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['true'] } }, headers: { 'idempotency-key': 'done-1' } });
    assert.equal(r.text, '{"command":{"exitCode":0}}\n');
    const c = await call(t.gw, 'POST', `${P}/operations/done-1:cancel`);
    assert.equal(c.text, '{"result":"ended"}\n');
  });

  it('aborting the HTTP request (or stream) cancels the command', async () => {
    const { run, P } = await readyRun(t.gw);
    const controller = new AbortController();
    const pending = call(t.gw, 'POST', `${P}/operations:stream`, {
      body: { command: { argv: ['sleep', '600'] } },
      headers: { 'idempotency-key': 'aborted-1' },
      signal: controller.signal,
    }).catch((e: unknown) => e);
    const ops = async (): Promise<Array<{ operationId: string; state: string; outcome?: string }>> =>
      ((await call(t.gw, 'GET', `${runsPath('default', run.metadata.name)}/operations`)).json() as { items: [] }).items;
    await waitFor('running', async () => (await ops()).find((r) => r.operationId === 'aborted-1' && r.state === 'running'));
    controller.abort();
    await pending;
    const ended = await waitFor('ended', async () => (await ops()).find((r) => r.operationId === 'aborted-1' && r.state === 'ended'));
    assert.equal(ended.outcome, 'cancelled');
  });

  it('the per-command timeout gives exit −1 with timedOut and partial output', async () => {
    const { P } = await readyRun(t.gw);
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, {
      // It must print before its timeout: 2 s leaves a loaded machine time to start `sh` (300 ms did not).
      body: { command: { argv: ['sh', '-c', 'printf partial; sleep 30'], timeoutMillis: 2000 } },
    });
    assert.equal(r.status, 200);
    assert.equal(r.text, `{"command":{"exitCode":-1,"stdout":"${Buffer.from('partial').toString('base64')}","timedOut":true}}\n`);
  });

  it('the operation timeout answers 504 context deadline exceeded', async () => {
    const { P } = await readyRun(t.gw, { session: { operationTimeout: '500ms' } });
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sleep', '30'] } } });
    assert.equal(r.status, 504);
    assert.equal(r.text, '{"error":"context deadline exceeded"}\n');
  });
});
