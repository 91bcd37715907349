// The era-D Session connection's edge cases that a real gateway produces only by races or
// faults, played by a scripted WebSocket server on a real socket: a cancel that crosses its
// operation's end (the gateway's `no active Session operation to cancel` answer belongs to no
// later call), error frames mapped to the status era C would answer, a 1008 close on a `send`
// (refused before admission: not "outcome unknown"), a malformed server frame, and an
// idempotency key the gateway would refuse (refused locally, nothing sent).
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { GatewayError, GatewayProtocolError, GatewayTransportError, GatewayUsageError } from '../../../protocol/kruntimes/gatewayErrors';
import { SessionConnection } from '../../../protocol/kruntimes/sessionConnection';
import type { StreamEvent } from '../../../protocol/kruntimes/gateway';

interface Frame {
  type: string;
  idempotencyKey?: string;
  operationID?: string;
  operation?: { command?: { argv?: string[] } };
}

/** A gateway whose answer to each client frame the test scripts. */
class ScriptedGateway {
  readonly frames: Frame[] = [];
  onFrame: (ws: WebSocket, frame: Frame) => void = () => undefined;
  private readonly server = http.createServer();
  private readonly wss = new WebSocketServer({ server: this.server });
  url = '';

  async start(): Promise<void> {
    this.wss.on('connection', (ws) =>
      ws.on('message', (data) => {
        const frame = JSON.parse(String(data)) as Frame;
        this.frames.push(frame);
        this.onFrame(ws, frame);
      }),
    );
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/namespaces/d/runtimes/r/sessions/u`;
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((r) => this.wss.close(() => r()));
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const completeWith = (ws: WebSocket, key: string | undefined, stdout: string) => {
  ws.send(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: key } }));
  ws.send(JSON.stringify({ sequence: 2, type: 'completed', completed: { command: { exitCode: 0, stdout: Buffer.from(stdout).toString('base64') } } }));
};

async function drain(events: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const all: StreamEvent[] = [];
  for await (const e of events) all.push(e);
  return all;
}

describe('Session connection edge cases (scripted gateway)', () => {
  const gateway = new ScriptedGateway();
  let conn: SessionConnection;
  before(() => gateway.start());
  after(() => gateway.stop());
  beforeEach(() => {
    gateway.frames.length = 0;
    conn = new SessionConnection({ endpointUrl: gateway.url, token: 't' });
  });
  afterEach(() => conn.close());

  it('ignores the "no active operation" answer to a cancel that crossed the end of its operation', async () => {
    gateway.onFrame = (ws, frame) => {
      if (frame.type === 'send' && frame.operation?.command?.argv?.[0] === 'slow') {
        ws.send(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: frame.idempotencyKey } }));
      } else if (frame.type === 'cancel') {
        // The operation finished just before the cancel arrived: completed, then the error for the cancel.
        ws.send(JSON.stringify({ sequence: 2, type: 'completed', completed: { command: { exitCode: 0 } } }));
        ws.send('{"type":"error","error":"no active Session operation to cancel"}\n');
      } else if (frame.type === 'send') {
        completeWith(ws, frame.idempotencyKey, 'next');
      }
    };
    const controller = new AbortController();
    const slow = drain(conn.operate({ command: { argv: ['slow'] } }, { signal: controller.signal }));
    const next = drain(conn.operate({ command: { argv: ['next'] } }));
    while (!gateway.frames.some((f) => f.type === 'send')) await new Promise((r) => setImmediate(r));
    controller.abort();
    await assert.rejects(slow, (e: unknown) => (e as Error).name === 'AbortError');
    const events = await next;
    assert.deepEqual(events.map((e) => e.type), ['accepted', 'completed']);
    assert.deepEqual(gateway.frames.map((f) => f.type), ['send', 'cancel', 'send']);
  });

  it('ends an operation on an error frame with the status era C would answer, and keeps the socket', async () => {
    gateway.onFrame = (ws, frame) => {
      if (frame.operation?.command?.argv?.[0] === 'full') ws.send('{"type":"error","error":"session operation queue is full"}\n');
      else if (frame.operation?.command?.argv?.[0] === 'done') ws.send('{"type":"error","error":"session is finalizing"}\n');
      else completeWith(ws, frame.idempotencyKey, 'ok');
    };
    await assert.rejects(drain(conn.operate({ command: { argv: ['full'] } })), (e: unknown) => e instanceof GatewayError && e.status === 429 && e.message === 'session operation queue is full');
    await assert.rejects(drain(conn.operate({ command: { argv: ['done'] } })), (e: unknown) => e instanceof GatewayError && e.status === 409);
    assert.equal((await drain(conn.operate({ command: { argv: ['ok'] } }))).at(-1)?.type, 'completed');
    assert.equal(conn.upgrades, 1);
  });

  it('treats a 1008 close on a send as refused before admission (not outcome unknown), then reconnects', async () => {
    gateway.onFrame = (ws, frame) => {
      if (frame.operation?.command?.argv?.[0] === 'bad') ws.close(1008, 'decode request: json: unknown field "x"');
      else completeWith(ws, frame.idempotencyKey, 'ok');
    };
    await assert.rejects(drain(conn.operate({ command: { argv: ['bad'] } })), (e: unknown) => e instanceof GatewayError && e.status === 400 && /unknown field/.test(e.message));
    assert.equal((await drain(conn.operate({ command: { argv: ['ok'] } }))).at(-1)?.type, 'completed');
    assert.equal(conn.upgrades, 2);
  });

  it('fails the operation with a protocol error on a frame that is not a Session event', async () => {
    gateway.onFrame = (ws) => ws.send('{"sequence":0,"type":"accepted"}');
    await assert.rejects(drain(conn.operate({ command: { argv: ['x'] } })), GatewayProtocolError);
  });

  it('refuses an idempotency key the gateway would close the socket for, without sending anything', async () => {
    await assert.rejects(conn.operate({ command: { argv: ['x'] } }, { idempotencyKey: 'bad key' }).next(), GatewayUsageError);
    await assert.rejects(conn.operate({ command: { argv: ['x'] } }, { idempotencyKey: 'x'.repeat(129) }).next(), GatewayUsageError);
    assert.equal(conn.upgrades, 0);
    assert.equal(gateway.frames.length, 0);
  });

  it('drops a socket that stops answering pings mid-operation: outcome unknown instead of a hang', async function () {
    this.timeout(15_000);
    // A relay that can go silent without closing anything, as a NAT that forgot the connection.
    let frozen = false;
    const target = Number(new URL(gateway.url).port);
    const relay = net.createServer((client) => {
      const upstream = net.connect(target, '127.0.0.1');
      client.on('data', (d) => frozen || upstream.write(d));
      upstream.on('data', (d) => frozen || client.write(d));
      for (const s of [client, upstream]) s.on('error', () => undefined).on('close', () => (client.destroy(), upstream.destroy()));
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    try {
      const url = new URL(gateway.url);
      url.port = String((relay.address() as AddressInfo).port);
      gateway.onFrame = (ws, frame) => {
        ws.send(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: frame.idempotencyKey } }));
        frozen = true;
      };
      const silent = new SessionConnection({ endpointUrl: url.toString(), keepAliveMs: 100 });
      const started = Date.now();
      await assert.rejects(drain(silent.operate({ command: { argv: ['sleep', '600'] } })), (e: unknown) => e instanceof GatewayTransportError && e.outcomeUnknown);
      assert.ok(Date.now() - started < 10_000);
      silent.close();
    } finally {
      relay.close();
    }
  });
});
