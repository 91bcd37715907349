// `GET P/operations:ws` against a real local gateway (real HTTP upgrade, real `process`
// backend): spec §2.12 / §10 and golden cases 29–31 — exact event frames, a second send on the
// same socket, cancel → one `error` frame with the command killed and the socket left open (era D,
// §10.8; era C closed with 1011), the session lease kept by heartbeats and expiring once they
// stop — plus the upgrade's HTTP errors (426, 401, 404, 409, 403 Origin, 405), 1008 for invalid
// frames, and open sockets not holding HTTP request slots. The era-D golden cases D1–D12 are in
// eraD.golden.test.ts.
import assert from 'node:assert/strict';
import type { Run } from '../../../protocol/kruntimes/run';
import { call, createRun, readyRun, runsPath, startTestGateway, waitPhase, type TestGateway } from './harness';
import { errBody, openSocket, operations, rawUpgrade } from './wsHarness';

describe('local gateway: operations:ws (spec §2.12, golden 29–31)', function () {
  this.timeout(40_000);
  let t: TestGateway;
  let run: Run;
  let P: string;
  const auth = (): Record<string, string> => ({ authorization: `Bearer ${t.gw.token}` });

  before(async () => {
    t = await startTestGateway({ maxConcurrentRequests: 2 });
    ({ run, P } = await readyRun(t.gw));
  });
  after(async () => {
    await t.cleanup();
  });

  it('#29 send echo done → exact accepted and completed frames; a second send on the same socket works', async () => {
    const s = await openSocket(t.gw, P);
    s.send({ type: 'send', idempotencyKey: 'operation-1', operation: { command: { argv: ['echo', 'done'] } } });
    assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-1"}}');
    assert.equal(await s.next(), '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"ZG9uZQo="}}');
    assert.equal(await s.next(), '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}');

    s.send({ type: 'send', operation: { writeFile: { path: 'ws.txt', contents: 'b2s=' } } });
    const accepted = JSON.parse(await s.next()) as { sequence: number; type: string; accepted: { operationID: string } };
    assert.equal(accepted.type, 'accepted');
    assert.equal(accepted.sequence, 1);
    assert.match(accepted.accepted.operationID, /^[0-9a-f]{32}$/);
    assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{}}');
    assert.equal((await call(t.gw, 'GET', `${P}/files/ws.txt`)).text, '{"contents":"b2s=","truncated":false}\n');
    s.ws.close(1000);
    assert.equal((await s.closed).code, 1000);
  });

  it('#30 cancel of the active `sleep 30` → error frame "context canceled", the command killed, the socket stays open', async () => {
    const s = await openSocket(t.gw, P);
    s.send({ type: 'send', idempotencyKey: 'ws-cancel-1', operation: { command: { argv: ['sleep', '30'] } } });
    assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"ws-cancel-1"}}');
    const deadline = Date.now() + 10_000;
    while (!(await operations(t.gw, run)).some((o) => o.operationId === 'ws-cancel-1' && o.state === 'running')) {
      assert.ok(Date.now() < deadline, 'the command did not start');
      await new Promise((r) => setTimeout(r, 20));
    }
    const started = Date.now();
    s.send({ type: 'cancel', operationID: 'ws-cancel-1' });
    assert.equal(await s.next(), '{"type":"error","error":"context canceled"}\n');
    for (;;) {
      const rec = (await operations(t.gw, run)).find((o) => o.operationId === 'ws-cancel-1');
      if (rec?.state === 'ended') {
        assert.equal(rec.outcome, 'cancelled');
        assert.equal(rec.exitCode, -1);
        break;
      }
      assert.ok(Date.now() - started < 10_000, 'the cancelled command was not killed');
      await new Promise((r) => setTimeout(r, 20));
    }
    // Era D: no `failed` for the cancelled operation, and the same socket takes the next send.
    s.send({ type: 'send', idempotencyKey: 'ws-cancel-2', operation: { command: { argv: ['true'] } } });
    assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"ws-cancel-2"}}');
    assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
    s.ws.close(1000);
    assert.equal((await s.closed).code, 1000);
  });

  it('closes 1008 for an unknown frame type, an unknown field and a binary frame', async () => {
    for (const frame of ['{"type":"ping"}', '{"type":"heartbeat","extra":1}', 'not json']) {
      const s = await openSocket(t.gw, P);
      s.ws.send(frame);
      const closed = await s.closed;
      assert.equal(closed.code, 1008, frame);
      assert.equal(closed.reason, 'valid Session frame is required');
    }
    const s = await openSocket(t.gw, P);
    s.ws.send(Buffer.from('{"type":"heartbeat"}'), { binary: true });
    assert.equal((await s.closed).code, 1008);
  });

  it('closes 1008 for an operation with unknown fields (the decoder message as reason)', async () => {
    const s = await openSocket(t.gw, P);
    s.send({ type: 'send', operation: { command: { argv: ['true'], bogus: 1 } } });
    const closed = await s.closed;
    assert.equal(closed.code, 1008);
    assert.equal(closed.reason, 'decode request: json: unknown field "bogus"');
  });

  it('closes 1008 for a second send while one runs, and for a cancel of another operation (the active one is cancelled)', async () => {
    for (const second of [
      { type: 'send', operation: { command: { argv: ['true'] } } },
      { type: 'cancel', operationID: 'someone-else' },
    ]) {
      const s = await openSocket(t.gw, P);
      s.send({ type: 'send', operation: { command: { argv: ['sleep', '30'] } } });
      const id = (JSON.parse(await s.next()) as { accepted: { operationID: string } }).accepted.operationID;
      const state = async (): Promise<string | undefined> => (await operations(t.gw, run)).find((o) => o.operationId === id)?.state;
      let deadline = Date.now() + 10_000;
      while ((await state()) !== 'running') {
        assert.ok(Date.now() < deadline, 'the command did not start');
        await new Promise((r) => setTimeout(r, 20));
      }
      s.send({ type: 'heartbeat' }); // allowed while an operation runs
      s.send(second);
      const closed = await s.closed;
      assert.equal(closed.code, 1008);
      assert.equal(closed.reason, 'only cancellation of the active operation is allowed');
      deadline = Date.now() + 10_000;
      while ((await state()) !== 'ended') {
        assert.ok(Date.now() < deadline, 'the operation of a violating socket was not cancelled');
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  });

  it('a plain GET (no upgrade) → 426 WebSocket upgrade is required; POST → 405', async () => {
    const r = await call(t.gw, 'GET', `${P}/operations:ws`);
    assert.equal(r.status, 426);
    assert.equal(r.text, errBody('WebSocket upgrade is required'));
    assert.equal(r.headers['content-type'], 'application/json');
    const post = await call(t.gw, 'POST', `${P}/operations:ws`, { body: {} });
    assert.equal(post.status, 405);
    assert.equal(post.text, errBody('method not allowed'));
  });

  it('upgrade without a token → 401 with the JSON body, nothing upgraded; a wrong token → 401', async () => {
    const none = await rawUpgrade(t.gw.url, `${P}/operations:ws`, {});
    assert.equal(none.upgraded, false);
    assert.equal(none.status, 401);
    assert.equal(none.headers['content-type'], 'application/json');
    assert.equal(none.body, errBody('bearer token is required unless a verified client certificate is presented'));
    const wrong = await rawUpgrade(t.gw.url, `${P}/operations:ws`, { authorization: 'Bearer nope' });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body, errBody('bearer token is not authenticated'));
  });

  it('upgrade for an unknown Run → 404, a non-Ready Run → 409 (before authorization), a POST upgrade → 405', async () => {
    const unknown = await rawUpgrade(t.gw.url, '/v1/namespaces/default/runtimes/process/sessions/nope/operations:ws', auth());
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body, errBody('Session Run not found'));

    const pending = await createRun(t.gw, { termination: { mode: 'Immediate' } });
    const cancelled = await waitPhase(t.gw, pending, ['Cancelled']);
    const cP = `/v1/namespaces/default/runtimes/process/sessions/${cancelled.metadata.uid}`;
    const notReady = await rawUpgrade(t.gw.url, `${cP}/operations:ws`, {}); // no token: 409 still comes first
    assert.equal(notReady.upgraded, false);
    assert.equal(notReady.status, 409);
    assert.equal(notReady.body, errBody('Session Run is Cancelled, not Ready'));

    const post = await rawUpgrade(t.gw.url, `${P}/operations:ws`, auth(), 'POST');
    assert.equal(post.status, 405);
  });

  it('Origin must be same-origin when present (403 otherwise); native clients omit it', async () => {
    const host = new URL(t.gw.url).host;
    const cross = await rawUpgrade(t.gw.url, `${P}/operations:ws`, { ...auth(), origin: 'https://evil.example' });
    assert.equal(cross.upgraded, false);
    assert.equal(cross.status, 403);
    assert.equal(cross.body, errBody('websocket: request origin not allowed by Upgrader.CheckOrigin'));
    const same = await rawUpgrade(t.gw.url, `${P}/operations:ws`, { ...auth(), origin: `http://${host}` });
    assert.equal(same.upgraded, true);
    assert.equal(same.status, 101);
  });

  it('other routes with an Upgrade header are served as plain HTTP; unknown paths 404', async () => {
    const status = await rawUpgrade(t.gw.url, P, auth());
    assert.equal(status.upgraded, false);
    assert.equal(status.status, 200);
    assert.match(status.body, /"state":"SESSION_STATE_READY"/);
    const unknown = await rawUpgrade(t.gw.url, `${P}/operations:nope`, auth());
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body, errBody('endpoint not found'));
  });

  it('open sockets do not hold concurrency slots (limit 2, three sockets open, requests still served)', async () => {
    const sockets = await Promise.all([openSocket(t.gw, P), openSocket(t.gw, P), openSocket(t.gw, P)]);
    const r = await call(t.gw, 'GET', P);
    assert.equal(r.status, 200);
    for (const s of sockets) s.ws.close(1000);
    await Promise.all(sockets.map((s) => s.closed));
  });

  it('#31 leaseTimeoutSeconds 3: Ready while the socket heartbeats for > 3 s; Timeout `session lease expired` after it closes', async () => {
    const { run: leased, P: lP } = await readyRun(t.gw, { session: { leaseTimeoutSeconds: 3 } });
    const s = await openSocket(t.gw, lP);
    let lastHeartbeatSent = Date.now(); // the upgrade renews the lease too
    const timer = setInterval(() => {
      s.send({ type: 'heartbeat' });
      lastHeartbeatSent = Date.now();
    }, 1000);
    try {
      // A lease is shown to hold only by outliving it: poll the phase until 4.5 s (> 3 s) have passed.
      const end = Date.now() + 4500;
      while (Date.now() < end) {
        const during = (await call(t.gw, 'GET', runsPath('default', leased.metadata.name))).json() as Run;
        assert.equal(during.status?.phase, 'Ready', 'the heartbeats hold the lease');
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      clearInterval(timer);
    }
    s.ws.close(1000);
    await s.closed;
    const ended = await waitPhase(t.gw, leased, ['Timeout', 'Failed', 'Cancelled', 'Succeeded'], 10_000);
    assert.equal(ended.status?.phase, 'Timeout');
    assert.equal(ended.status?.message, 'session lease expired');
    // The server renews on receipt, after the send: an end seen sooner than 3 s after the last heartbeat left is early.
    assert.ok(Date.now() - lastHeartbeatSent >= 3000, 'the lease expired before 3 s had passed since the last heartbeat');
    const ready = ended.status?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'Timeout');
    // Unary calls never touched the lease: the gateway now answers 409.
    assert.equal((await call(t.gw, 'GET', lP)).status, 409);
  });

  it('a lease is not renewed by unary calls or NDJSON streams', async () => {
    const { run: leased, P: lP } = await readyRun(t.gw, { session: { leaseTimeoutSeconds: 1 } });
    const started = Date.now();
    while (Date.now() - started < 3000) {
      const r = await call(t.gw, 'POST', `${lP}/operations:execute`, { body: { command: { argv: ['true'] } } });
      if (r.status !== 200) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    const ended = await waitPhase(t.gw, leased, ['Timeout'], 5000);
    assert.equal(ended.status?.message, 'session lease expired');
    assert.ok(Date.now() - started < 4000);
  });
});
