// The lease keeper against a real local gateway: it keeps a Run with a 2 s lease Ready for 6 s,
// the Run expires (`session lease expired`) once it stops, it reconnects when the gateway
// restarts, and it reports — and stops on — a refusal for good (401, 409 after the Run ended).
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Run } from '../../../protocol/kruntimes/run';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { LeaseKeeperUsageError, LeaseLostError, heartbeatIntervalMs, holdLease, sessionSocketUrl } from '../../../server/sandboxes/leaseKeeper';
import { call, patchTermination, readyRun, runsPath, startTestGateway, waitPhase, type TestGateway } from '../gateway/harness';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function phaseOf(gw: { url: string; token: string }, run: Run): Promise<string | undefined> {
  return ((await call(gw, 'GET', runsPath(run.metadata.namespace, run.metadata.name))).json() as Run).status?.phase;
}

/** Waits (bounded) until the Run's lease was renewed after `afterMs`: the keeper's socket reached the daemon. */
async function renewedAfter(gw: { runtime: RunningGateway['runtime'] }, run: Run, afterMs: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = gw.runtime.sessionByUid(run.metadata.namespace ?? 'default', run.spec.runtime, run.metadata.uid ?? '');
    if (found && found.session.leaseRenewedMs > afterMs) return;
    assert.ok(Date.now() < deadline, 'the keeper never renewed the lease');
    await sleep(20);
  }
}

function lostPromise(): { onLost: (err: LeaseLostError) => void; lost: Promise<LeaseLostError> } {
  let onLost: (err: LeaseLostError) => void = () => undefined;
  const lost = new Promise<LeaseLostError>((resolve) => (onLost = resolve));
  return { onLost, lost };
}

describe('lease keeper (holdLease) against the local gateway', function () {
  this.timeout(40_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    await t.cleanup();
  });

  it('derives the socket URL and the heartbeat interval', () => {
    assert.equal(sessionSocketUrl('http://127.0.0.1:9/v1/namespaces/d/runtimes/p/sessions/u'), 'ws://127.0.0.1:9/v1/namespaces/d/runtimes/p/sessions/u/operations:ws');
    assert.equal(sessionSocketUrl('https://gw.example/v1/x/sessions/u/'), 'wss://gw.example/v1/x/sessions/u/operations:ws');
    assert.throws(() => sessionSocketUrl('ftp://x/y'), LeaseKeeperUsageError);
    assert.equal(heartbeatIntervalMs(3), 1000);
    assert.equal(heartbeatIntervalMs(0.1), 100);
    assert.equal(heartbeatIntervalMs(3600), 30_000);
    assert.throws(() => holdLease({ endpointUrl: 'http://127.0.0.1:9/', token: 't', leaseTimeoutSeconds: 0 }), LeaseKeeperUsageError);
  });

  it('keeps a 2 s-lease Run Ready for 6 s; after stop() the lease expires', async () => {
    const { run } = await readyRun(t.gw, { session: { leaseTimeoutSeconds: 2 } });
    const { onLost, lost } = lostPromise();
    const hold = holdLease({ endpointUrl: run.status?.endpoint?.url ?? '', token: t.gw.token, leaseTimeoutSeconds: 2, onLost });
    let lostEarly: LeaseLostError | undefined;
    void lost.then((e) => (lostEarly = e));
    // A lease is shown to hold only by outliving it: 6 s of polls, each one Ready.
    for (let i = 0; i < 12; i++) {
      await sleep(500);
      assert.equal(await phaseOf(t.gw, run), 'Ready', `not Ready after ${(i + 1) * 0.5} s`);
    }
    assert.equal(lostEarly, undefined);
    await hold.stop();
    await hold.stop(); // idempotent
    const stoppedAt = Date.now();
    const ended = await waitPhase(t.gw, run, ['Timeout', 'Failed', 'Cancelled'], 8000);
    assert.equal(ended.status?.phase, 'Timeout');
    assert.equal(ended.status?.message, 'session lease expired');
    assert.ok(Date.now() - stoppedAt < 5000);
  });

  it('reports a wrong token through onLost (401, the gateway message) and stops', async () => {
    const { run } = await readyRun(t.gw, { session: { leaseTimeoutSeconds: 5 } });
    const { onLost, lost } = lostPromise();
    const hold = holdLease({ endpointUrl: run.status?.endpoint?.url ?? '', token: 'wrong', leaseTimeoutSeconds: 5, onLost });
    const err = await lost;
    assert.ok(err instanceof LeaseLostError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'unauthenticated');
    assert.equal(err.message, 'bearer token is not authenticated');
    await hold.stop();
    await patchTermination(t.gw, run, 'Immediate');
  });

  it('notices a Run that ended while held: reconnect → 409 → onLost', async () => {
    const { run } = await readyRun(t.gw, { session: { leaseTimeoutSeconds: 1 } });
    const { onLost, lost } = lostPromise();
    const heldFrom = Date.now();
    const hold = holdLease({ endpointUrl: run.status?.endpoint?.url ?? '', token: t.gw.token, leaseTimeoutSeconds: 1, onLost });
    await renewedAfter(t.gw, run, heldFrom);
    await patchTermination(t.gw, run, 'Immediate');
    await waitPhase(t.gw, run, ['Cancelled']);
    const err = await Promise.race([lost, sleep(10_000).then(() => undefined)]);
    assert.ok(err, 'onLost was not called');
    assert.equal(err.status, 409);
    assert.equal(err.code, 'not_ready');
    assert.equal(err.message, 'Session Run is Cancelled, not Ready');
    await hold.stop();
  });

  it('reconnects after the gateway daemon restarts (the Run stays Ready past its lease)', async () => {
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-lease-'));
    let gw = await startGateway({ stateDir, tickMs: 50 });
    const { port, token } = gw;
    let hold: { stop(): Promise<void> } | undefined;
    try {
      const { run } = await readyRun(gw, { session: { leaseTimeoutSeconds: 2 } });
      let lostWith: LeaseLostError | undefined;
      // No grace for 404/409: the restarted daemon must not answer them while it loads its Runs.
      const heldFrom = Date.now();
      hold = holdLease({ endpointUrl: run.status?.endpoint?.url ?? '', token, leaseTimeoutSeconds: 2, refusalGraceMs: 0, onLost: (e) => (lostWith = e) });
      await renewedAfter(gw, run, heldFrom);
      await gw.close();
      await sleep(700); // the keeper's reconnects are refused meanwhile
      gw = await startGateway({ stateDir, port, token, tickMs: 50 });
      // The restart starts a fresh lease clock; staying Ready well past it needs the keeper's reconnect.
      // Outliving the lease is the point: 5 s of polls, each one Ready.
      for (let i = 0; i < 10; i++) {
        await sleep(500);
        assert.equal(await phaseOf(gw, run), 'Ready', `not Ready ${(i + 1) * 0.5} s after the restart`);
      }
      assert.equal(lostWith, undefined);
      await hold.stop();
      const ended = await waitPhase(gw, run, ['Timeout'], 8000);
      assert.equal(ended.status?.message, 'session lease expired');
    } finally {
      await hold?.stop();
      await gw.close();
      await fs.rm(stateDir, { recursive: true, force: true });
    }
  });
});
