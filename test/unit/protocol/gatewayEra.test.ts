// How the session client tells era C from era D (spec §10.10) and what it remembers: only the
// catch-all 404 `{"error":"endpoint not found"}` means era D; any other answer (another 404
// body, 401, 405) is era C's route answering. The decision is remembered per gateway for the
// process (a second sandbox on the same gateway goes straight to the socket) and revised when a
// call meets the other era's answer. A real HTTP + WebSocket server stands in for the gateway.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import { eraFromExecuteAnswer, forgetGatewayEras } from '../../../protocol/kruntimes/gatewayEra';

type Mode = 'C' | 'D' | { status: number; body: string };

/** A gateway whose era (or whose answer to operation routes) the test switches. */
class SwitchableGateway {
  mode: Mode = 'C';
  readonly posts: string[] = [];
  upgrades = 0;
  private readonly server = http.createServer((req, res) => this.onRequest(req, res));
  private readonly wss = new WebSocketServer({ noServer: true });
  base = '';

  async start(): Promise<void> {
    this.server.on('upgrade', (req, socket, head) => this.onUpgrade(req, socket, head));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  endpoint(uid: string): string {
    return `${this.base}/v1/namespaces/default/runtimes/bash/sessions/${uid}`;
  }

  /** Switches the era; open sockets are closed (going away) as a gateway restart would, and the clients have seen it. */
  async setMode(mode: Mode): Promise<void> {
    this.mode = mode;
    await Promise.all(
      [...this.wss.clients].map((ws) => new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close(1001);
      })),
    );
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '';
      if (req.method === 'POST') this.posts.push(url);
      const isOperation = /\/operations:(execute|stream)$/.test(url);
      const json = (status: number, body: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(body);
      if (!isOperation) return json(200, '{"state":"SESSION_STATE_READY"}\n');
      if (typeof this.mode === 'object') return json(this.mode.status, this.mode.body);
      if (this.mode === 'D') return json(404, '{"error":"endpoint not found"}\n');
      if (url.endsWith(':execute')) return json(200, '{"command":{"exitCode":0,"stdout":"aHR0cA=="}}\n');
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' });
      res.end(
        '{"sequence":1,"type":"accepted","accepted":{"operationID":"h"}}\n' +
          '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"aHR0cA=="}}\n' +
          '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}\n',
      );
    });
  }

  private onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    this.upgrades++;
    if (this.mode !== 'D' || !(req.url ?? '').endsWith('/operations:ws')) {
      const body = '{"error":"endpoint not found"}\n';
      socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      ws.on('message', (data) => {
        const frame = JSON.parse(String(data)) as { type: string; idempotencyKey?: string };
        if (frame.type !== 'send') return;
        ws.send(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: frame.idempotencyKey } }));
        ws.send(JSON.stringify({ sequence: 2, type: 'output', output: { stream: 'unspecified', data: 'd3M=' } }));
        ws.send(JSON.stringify({ sequence: 3, type: 'completed', completed: { command: { exitCode: 0 } } }));
      });
    });
  }
}

describe('gateway era detection', () => {
  const gateway = new SwitchableGateway();
  const clients: GatewayClient[] = [];
  const client = (uid = 'session-uid') => {
    const c = new GatewayClient({ endpoint: { url: gateway.endpoint(uid) }, token: 't' });
    clients.push(c);
    return c;
  };

  before(() => gateway.start());
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await gateway.stop();
  });
  beforeEach(async () => {
    forgetGatewayEras();
    await gateway.setMode('C');
    gateway.posts.length = 0;
    gateway.upgrades = 0;
  });

  it('decides era D only on a 404 whose body is exactly {"error":"endpoint not found"}', () => {
    assert.equal(eraFromExecuteAnswer(404, '{"error":"endpoint not found"}\n'), 'D');
    assert.equal(eraFromExecuteAnswer(404, '{"error":"Session Run not found"}\n'), 'C');
    assert.equal(eraFromExecuteAnswer(404, '<html>endpoint not found</html>'), 'C');
    assert.equal(eraFromExecuteAnswer(401, '{"error":"endpoint not found"}\n'), 'C');
    assert.equal(eraFromExecuteAnswer(405, '{"error":"method not allowed"}\n'), 'C');
  });

  it('runs over HTTP on era C and never opens a socket', async () => {
    const c = client();
    const out = await c.runCommand({ argv: ['true'] });
    assert.equal(out.stdout.toString(), 'http');
    assert.equal(c.era, undefined, 'era C is what an unknown gateway is treated as');
    assert.equal(gateway.upgrades, 0);
  });

  it('switches to the socket after the catch-all 404, and the answer has no side effect to repeat', async () => {
    await gateway.setMode('D');
    const c = client();
    const out = await c.runCommand({ argv: ['true'] });
    assert.equal(out.stdout.toString(), 'ws', 'the output came over the socket (an "unspecified" stream counts as stdout)');
    assert.equal(c.era, 'D');
    assert.equal(gateway.posts.length, 1);
    assert.equal(gateway.upgrades, 1);
  });

  for (const answer of [
    { status: 404, body: '{"error":"Session Run not found"}\n' },
    { status: 404, body: 'not found' },
    { status: 401, body: '{"error":"bearer token is not authenticated"}\n' },
    { status: 405, body: '{"error":"method not allowed"}\n' },
  ]) {
    it(`treats ${answer.status} ${answer.body.trim()} as era C's own answer (no socket)`, async () => {
      await gateway.setMode(answer);
      const c = client();
      await assert.rejects(c.runCommand({ argv: ['true'] }), (e: unknown) => e instanceof GatewayError && e.status === answer.status);
      assert.equal(c.era, undefined);
      assert.equal(gateway.upgrades, 0);
    });
  }

  it('remembers era D per gateway: another sandbox on it goes straight to the socket', async () => {
    await gateway.setMode('D');
    await client('first').runCommand({ argv: ['true'] });
    gateway.posts.length = 0;
    const second = client('second');
    assert.equal(second.era, 'D');
    const events: string[] = [];
    for await (const e of second.stream({ command: { argv: ['true'] } })) events.push(e.type);
    assert.deepEqual(events, ['accepted', 'output', 'completed']);
    assert.equal(gateway.posts.length, 0, 'no HTTP operation call once era D is known');
  });

  it('looks again when the era changes: C → D on the 404, D → C when the socket route is gone', async () => {
    const c = client();
    assert.equal((await c.runCommand({ argv: ['true'] })).stdout.toString(), 'http');
    await gateway.setMode('D');
    assert.equal((await c.runCommand({ argv: ['true'] })).stdout.toString(), 'ws');
    assert.equal(c.era, 'D');
    await gateway.setMode('C');
    gateway.posts.length = 0;
    assert.equal((await c.runCommand({ argv: ['true'] })).stdout.toString(), 'http');
    assert.equal(c.era, 'C');
    assert.equal(gateway.posts.length, 1, 'the operation was sent once, over HTTP, after the upgrade was refused');
  });
});
