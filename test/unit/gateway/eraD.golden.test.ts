// The era-D golden cases D1–D12 (specs/kruntimes-access-api.md §10.11), one table run against
// each server that speaks era D (eraD.targets.ts): the real local gateway daemon started with
// `api: 'era-d'` and the cluster simulator's Kruntimes Console (both real HTTP(S) and WebSocket,
// the real `process` backend behind them). Where upstream's case rests on a fake Runtime, the
// nearest real behaviour is tested and the test name says so: D3 watches the Run's lease clock
// instead of counting RenewSessionLease calls; D4's command output arrives as `output` events (as
// era-C Bash sends it), not inside `completed`; D5's "retained event limit" has no local journal,
// so a queue-full refusal (also ResourceExhausted, also before `accepted`) stands in for it. Last,
// the local daemon as a detached process: `ensureGateway({api: 'era-d'})`, the mode in its state
// file, and a mode mismatch.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import type { Run } from '../../../protocol/kruntimes/run';
import { ensureGateway, findGateway, GatewayStartError, stopGateway } from '../../../server/gateway/daemonClient';
import { readGatewayState } from '../../../server/gateway/stateFile';
import { StateLayout } from '../../../server/local/stateRoot';
import { ERA_D_TARGETS, waitOperationState, type EraDTarget } from './eraD.targets';
import { b64, call, runsPath } from './harness';
import { errBody, wsUrl } from './wsHarness';

const ROOT = path.resolve(__dirname, '../../..');
const GATEWAY = [process.execPath, '--import', 'tsx', path.join(ROOT, 'test/fixtures/gatewayMain.ts')];
const ENDPOINT_NOT_FOUND = '{"error":"endpoint not found"}\n';

/** Waits (bounded) until `value()` differs from `before`; returns the new value. */
async function waitChange<T>(value: () => T, before: T, what: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = value();
    if (now !== before) return now;
    assert.ok(Date.now() < deadline, `${what} did not change within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until the wall clock has moved past `ms` (so a renewal after it is a new value). */
async function clockPast(ms: number): Promise<void> {
  while (Date.now() <= ms) await new Promise((r) => setTimeout(r, 2));
}

for (const kind of ERA_D_TARGETS) {
  describe(`${kind.title}, era D: golden cases D1–D12 (spec §10.11)`, function () {
    this.timeout(40_000);
    let t: EraDTarget;
    let run: Run;
    let P: string;

    before(async () => {
      t = await kind.start('era-d');
      ({ run, P } = await t.readyRun());
    });
    after(async () => {
      await t?.stop();
    });

    it('D1 execute, stream, resume and cancel paths → 404 endpoint not found, with or without a token, before Run lookup; nothing runs', async () => {
      const unknownP = `/v1/namespaces/default/runtimes/${t.runtime}/sessions/no-such-run`;
      for (const base of [P, unknownP]) {
        for (const [method, suffix] of [
          ['GET', '/operations:execute'],
          ['POST', '/operations:execute'],
          ['POST', '/operations:stream'],
          ['GET', '/operations/op-1:stream'],
          ['POST', '/operations/op-1:cancel'],
          ['GET', '/capabilities'],
        ] as const) {
          for (const token of [undefined, null]) {
            const r = await t.call(method, `${base}${suffix}`, { token, ...(method === 'POST' ? { body: { command: { argv: ['touch', 'ran'] } } } : {}) });
            assert.equal(r.status, 404, `${method} ${suffix}`);
            assert.equal(r.text, ENDPOINT_NOT_FOUND, `${method} ${suffix}`);
            assert.equal(r.headers['content-type'], 'application/json');
          }
        }
      }
      // The Runtime was never reached: no operation, no file, no request counted for the Run.
      assert.deepEqual(await t.operations(run), []);
      assert.equal((await t.call('GET', `${P}/files/ran`)).status, 404);
      assert.deepEqual(Object.keys(await t.requests(run)), ['read']);
    });

    it('D1 (contrast) era C answers the same probe after Run lookup and auth (405, 401), so a client can tell the eras apart', async () => {
      const c = await kind.start('era-c');
      try {
        const { P: cP } = await c.readyRun();
        assert.equal((await c.call('GET', `${cP}/operations:execute`)).text, errBody('method not allowed'));
        assert.equal((await c.call('GET', `${cP}/operations:execute`, { token: null })).status, 401);
      } finally {
        await c.stop();
      }
    });

    it('era D still serves GET P (without the local capabilities), files and files/{path}; ranged-read parameters are ignored', async () => {
      const status = await t.call('GET', P);
      assert.equal(status.status, 200);
      assert.match(status.text, /^\{"state":"SESSION_STATE_READY","lastActivityUnixNano":\d{19}\}\n$/);
      const s = await t.socket(P);
      s.send({ type: 'send', operation: { writeFile: { path: 'd/era.txt', contents: b64('era-d'), createParents: true } } });
      assert.equal(JSON.parse(await s.next()).type, 'accepted');
      assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{}}');
      s.ws.close(1000);
      await s.closed;
      assert.equal((await t.call('GET', `${P}/files?path=d`)).text, '{"entries":[{"path":"era.txt","directory":false,"sizeBytes":5}],"nextPageToken":""}\n');
      assert.equal((await t.call('GET', `${P}/files/d/era.txt?offset=2&length=1`)).text, `{"contents":"${b64('era-d')}","truncated":false}\n`);
    });

    it('D3 a heartbeat frame renews the lease (as the upgrade did) and gets no reply frame', async () => {
      const { run: leased, P: lP } = await t.readyRun({ leaseTimeoutSeconds: 600 });
      const session = t.session(leased);
      const atReady = session.leaseRenewedMs;
      await clockPast(atReady);
      const s = await t.socket(lP);
      const atUpgrade = await waitChange(() => session.leaseRenewedMs, atReady, 'the lease at the upgrade');
      assert.ok(atUpgrade > atReady);
      await clockPast(atUpgrade);
      s.send({ type: 'heartbeat' });
      const atHeartbeat = await waitChange(() => session.leaseRenewedMs, atUpgrade, 'the lease after a heartbeat');
      assert.ok(atHeartbeat > atUpgrade);
      // No frame answered the heartbeat: the next frame is the `accepted` of the next send.
      s.send({ type: 'send', idempotencyKey: 'after-heartbeat', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"after-heartbeat"}}');
      s.ws.close(1000);
      await s.closed;
    });

    it('D4 two sends on one socket: exact accepted/output/completed frames for each (output as events, local Bash style)', async () => {
      const s = await t.socket(P);
      s.send({ type: 'send', idempotencyKey: 'operation-1', operation: { command: { argv: ['echo', 'done'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-1"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"ZG9uZQo="}}');
      assert.equal(await s.next(), '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}');
      s.send({ type: 'send', idempotencyKey: 'operation-2', operation: { command: { argv: ['echo', 'done'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-2"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"ZG9uZQo="}}');
      assert.equal(await s.next(), '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}');
      s.ws.close(1000);
      assert.equal((await s.closed).code, 1000);
    });

    it('D5 (nearest local case) a send refused before `accepted` (queue full, ResourceExhausted) → error frame, socket open, the next send works', async () => {
      const { run: q, P: qP } = await t.readyRun({ queueSize: 1 });
      const busy = await t.socket(qP);
      busy.send({ type: 'send', idempotencyKey: 'holds-the-queue', operation: { command: { argv: ['sleep', '30'] } } });
      assert.equal(JSON.parse(await busy.next()).type, 'accepted');
      await waitOperationState(t, q, 'holds-the-queue', 'running');
      const s = await t.socket(qP);
      s.send({ type: 'send', idempotencyKey: 'operation-1', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"type":"error","error":"session operation queue is full"}\n');
      busy.send({ type: 'cancel', operationID: 'holds-the-queue' });
      assert.equal(JSON.parse(await busy.next()).type, 'error');
      await waitOperationState(t, q, 'holds-the-queue', 'ended');
      s.send({ type: 'send', idempotencyKey: 'operation-2', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-2"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
      for (const socket of [s, busy]) socket.ws.close(1000);
      assert.deepEqual(await Promise.all([s.closed, busy.closed]).then((c) => c.map((x) => x.code)), [1000, 1000]);
    });

    it('D6 a cancel with nothing running → error frame `no active Session operation to cancel`; the socket stays open', async () => {
      const s = await t.socket(P);
      s.send({ type: 'cancel', operationID: 'old' });
      assert.equal(await s.next(), '{"type":"error","error":"no active Session operation to cancel"}\n');
      s.send({ type: 'send', idempotencyKey: 'after-cancel', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"after-cancel"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
      s.ws.close(1000);
      assert.equal((await s.closed).code, 1000);
    });

    it('D7 cancel of the running operation → one error frame `context canceled`, no `failed`, the command killed, the socket open', async () => {
      const s = await t.socket(P);
      s.send({ type: 'send', idempotencyKey: 'operation-7', operation: { command: { argv: ['sleep', '30'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-7"}}');
      await waitOperationState(t, run, 'operation-7', 'running');
      s.send({ type: 'cancel', operationID: 'operation-7' });
      assert.equal(await s.next(), '{"type":"error","error":"context canceled"}\n');
      const rec = await waitOperationState(t, run, 'operation-7', 'ended');
      assert.equal(rec.outcome, 'cancelled');
      // Nothing else came for operation-7: the next frame is the next operation's `accepted`.
      s.send({ type: 'send', idempotencyKey: 'operation-8', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-8"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
      s.ws.close(1000);
      assert.equal((await s.closed).code, 1000);
    });

    it('D8 while one runs, a second send or a cancel of another id → close 1008 `only cancellation of the active operation is allowed`; the running one is cancelled', async () => {
      for (const [i, second] of [
        { type: 'send', operation: { command: { argv: ['true'] } } },
        { type: 'cancel', operationID: 'someone-else' },
      ].entries()) {
        const s = await t.socket(P);
        const id = `d8-${i}`;
        s.send({ type: 'send', idempotencyKey: id, operation: { command: { argv: ['sleep', '30'] } } });
        assert.equal(JSON.parse(await s.next()).type, 'accepted');
        await waitOperationState(t, run, id, 'running');
        s.send(second);
        assert.deepEqual(await s.closed, { code: 1008, reason: 'only cancellation of the active operation is allowed' });
        assert.equal((await waitOperationState(t, run, id, 'ended')).outcome, 'cancelled');
      }
    });

    it('D9 idle invalid frames → close 1008 `valid Session frame is required`; empty or null fields count as absent, as in Go', async () => {
      for (const frame of [
        '{"type":"ping"}',
        '{"type":"heartbeat","operationID":"x"}',
        '{"type":"send","operation":{"command":{"argv":["true"]}},"extra":1}',
        '{"type":"send","operationID":"x","operation":{"command":{"argv":["true"]}}}',
        '{"type":"cancel","operationID":"x","idempotencyKey":"k"}',
        '{"type":"heartbeat"} {"type":"heartbeat"}',
      ]) {
        const s = await t.socket(P);
        s.ws.send(frame);
        assert.deepEqual(await s.closed, { code: 1008, reason: 'valid Session frame is required' }, frame);
      }
      const binary = await t.socket(P);
      binary.ws.send(Buffer.from('{"type":"heartbeat"}'), { binary: true });
      assert.deepEqual(await binary.closed, { code: 1008, reason: 'valid Session frame is required' });

      const lenient = await t.socket(P);
      lenient.ws.send('{"type":"heartbeat","operationID":"","idempotencyKey":null}');
      lenient.ws.send('{"type":"send","idempotencyKey":"lenient","operationID":"","operation":{"command":{"argv":["true"]}}}');
      assert.equal(await lenient.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"lenient"}}');
      assert.equal(await lenient.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
      lenient.ws.close(1000);
      assert.equal((await lenient.closed).code, 1000);
    });

    it('D10 a send with an invalid idempotency key → close 1008 with the validation message, nothing accepted', async () => {
      const s = await t.socket(P);
      s.send({ type: 'send', idempotencyKey: 'bad key', operation: { command: { argv: ['touch', 'd10'] } } });
      assert.deepEqual(await s.closed, { code: 1008, reason: 'idempotency key contains unsupported characters' });
      assert.deepEqual(s.pending(), []);
      const long = await t.socket(P);
      long.send({ type: 'send', idempotencyKey: 'k'.repeat(129), operation: { command: { argv: ['touch', 'd10'] } } });
      assert.deepEqual(await long.closed, { code: 1008, reason: 'idempotency key exceeds 128 bytes' });
      assert.equal((await t.call('GET', `${P}/files/d10`)).status, 404);
    });

    it('D11 a send frame over 1 MiB (writeFile of 800 000 bytes) → close 1009 from the WebSocket layer, nothing accepted or written', async () => {
      const s = await t.socket(P);
      const contents = Buffer.alloc(800_000, 0x61).toString('base64');
      s.send({ type: 'send', idempotencyKey: 'too-big', operation: { writeFile: { path: 'big.bin', contents } } });
      assert.equal((await s.closed).code, 1009);
      assert.deepEqual(s.pending(), []);
      assert.equal((await t.call('GET', `${P}/files/big.bin`)).status, 404);
    });

    it('D12 leaseTimeoutSeconds 2: Ready while the socket is open and heartbeats; Timeout `session lease expired` once it closes', async () => {
      const { run: leased, P: lP } = await t.readyRun({ leaseTimeoutSeconds: 2 });
      const session = t.session(leased);
      const atReady = session.leaseRenewedMs;
      await clockPast(atReady);
      const s = await t.socket(lP);
      const opened = await waitChange(() => session.leaseRenewedMs, atReady, 'the lease at the upgrade');
      await clockPast(opened);
      s.send({ type: 'heartbeat' });
      const lastRenewal = await waitChange(() => session.leaseRenewedMs, opened, 'the lease after a heartbeat');
      assert.equal((await t.current(leased)).status?.phase, 'Ready');
      s.ws.close(1000);
      await s.closed;
      const ended = await t.waitPhase(leased, ['Timeout', 'Failed', 'Cancelled', 'Succeeded'], 15_000);
      assert.equal(ended.status?.phase, 'Timeout');
      assert.equal(ended.status?.message, 'session lease expired');
      assert.ok(Date.now() - lastRenewal >= 2000, 'the lease expired before leaseTimeoutSeconds had passed since the last heartbeat');
    });
  });

  describe(`${kind.title}, era D: the connection cap (D2)`, function () {
    this.timeout(30_000);
    let t: EraDTarget;
    let P: string;

    before(async () => {
      t = await kind.start('era-d', { maxSessionConnections: 1, maxConcurrentRequests: 1 });
      ({ P } = await t.readyRun());
    });
    after(async () => {
      await t?.stop();
    });

    it('D2 one connection slot, one request slot: GET P → 200 while a socket is open; a second upgrade → 429 before Run lookup and auth; freed on close', async () => {
      const s = await t.socket(P);
      const status = await t.call('GET', P);
      assert.equal(status.status, 200);
      for (const [path, headers] of [
        [`${P}/operations:ws`, { authorization: `Bearer ${t.token}` }],
        [`/v1/namespaces/default/runtimes/${t.runtime}/sessions/no-such-run/operations:ws`, {}],
      ] as const) {
        const refused = await t.rawUpgrade(path, headers);
        assert.equal(refused.upgraded, false);
        assert.equal(refused.status, 429);
        assert.equal(refused.body, '{"error":"gateway Session connection limit reached"}\n');
        assert.equal(refused.headers['content-type'], 'application/json');
      }
      s.ws.close(1000);
      await s.closed;
      // The slot is given back when the server side of the connection has closed.
      const deadline = Date.now() + 5_000;
      for (;;) {
        const again = await t.rawUpgrade(`${P}/operations:ws`, { authorization: `Bearer ${t.token}` });
        if (again.upgraded) break;
        assert.equal(again.status, 429);
        assert.ok(Date.now() < deadline, 'the connection slot was not given back');
        await new Promise((r) => setTimeout(r, 20));
      }
    });

  });

  describe(`${kind.title}, era D: the event frame limit`, function () {
    this.timeout(30_000);
    let t: EraDTarget;
    let P: string;

    before(async () => {
      t = await kind.start('era-d', { maxResponseBodyBytes: 4096 });
      ({ P } = await t.readyRun());
    });
    after(async () => {
      await t?.stop();
    });

    it('an event frame over the response limit → error frame `gateway stream event exceeds configured limit`; the socket stays open', async () => {
      const s = await t.socket(P);
      s.send({ type: 'send', idempotencyKey: 'loud', operation: { command: { argv: ['head', '-c', '8000', '/dev/zero'] } } });
      assert.equal(JSON.parse(await s.next()).type, 'accepted');
      assert.equal(await s.next(), '{"type":"error","error":"gateway stream event exceeds configured limit"}\n');
      s.send({ type: 'send', idempotencyKey: 'quiet', operation: { command: { argv: ['true'] } } });
      assert.equal(await s.next(), '{"sequence":1,"type":"accepted","accepted":{"operationID":"quiet"}}');
      assert.equal(await s.next(), '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0}}}');
      s.ws.close(1000);
      await s.closed;
    });
  });
}

describe('local gateway --api era-d as a detached daemon (ensureGateway)', function () {
  this.timeout(60_000);
  let stateDir: string;

  before(async () => {
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-gw-erad-'));
  });
  after(async () => {
    await stopGateway({ stateDir });
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  it('ensureGateway({api: "era-d"}) starts a daemon that records its mode and serves only era-D routes; another era on the same state dir is refused', async () => {
    const gw = await ensureGateway({ stateDir, command: GATEWAY, api: 'era-d' });
    assert.equal(gw.api, 'era-d');
    assert.equal((await readGatewayState(new StateLayout(stateDir).gatewayStateFile))?.api, 'era-d');
    assert.equal((await findGateway(stateDir))?.api, 'era-d');
    assert.equal((await ensureGateway({ stateDir, api: 'era-d' })).pid, gw.pid);
    assert.equal((await ensureGateway({ stateDir })).pid, gw.pid);
    await assert.rejects(ensureGateway({ stateDir, command: GATEWAY, api: 'era-c' }), (err: unknown) => err instanceof GatewayStartError && err.code === 'gateway_api_mismatch');

    const created = await call(gw, 'POST', runsPath('default'), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'erad' }, spec: { runtime: 'process', mode: { session: {} } } },
    });
    assert.equal(created.status, 201);
    const deadline = Date.now() + 15_000;
    let ready: Run;
    for (;;) {
      ready = (await call(gw, 'GET', runsPath('default', 'erad'))).json() as Run;
      if (ready.status?.phase === 'Ready') break;
      assert.ok(Date.now() < deadline, `the Run is ${ready.status?.phase}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const P = new URL(ready.status.endpoint?.url ?? '').pathname;
    assert.equal((await call(gw, 'GET', `${P}/operations:execute`, { token: null })).text, ENDPOINT_NOT_FOUND);
    const ws = new WebSocket(wsUrl(gw.url, P), { headers: { authorization: `Bearer ${gw.token}` } });
    const frames: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      ws.on('message', (data) => {
        frames.push((data as Buffer).toString('utf8'));
        if (frames.length === 3) resolve();
      });
      ws.on('error', reject);
    });
    ws.on('open', () => ws.send(JSON.stringify({ type: 'send', idempotencyKey: 'detached', operation: { command: { argv: ['echo', 'hi'] } } })));
    await done;
    assert.deepEqual(frames, [
      '{"sequence":1,"type":"accepted","accepted":{"operationID":"detached"}}',
      `{"sequence":2,"type":"output","output":{"stream":"stdout","data":"${b64('hi\n')}"}}`,
      '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}',
    ]);
    ws.close(1000);
  });
});
