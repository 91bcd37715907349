// What the gateway client promises beyond parsing: bigint-safe status, path encoding, the
// read-retry window, never retrying a mutation, "outcome unknown" on a broken mutation,
// cancellation by abort, and bounded responses.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodeFilePath, GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import {
  GatewayError,
  GatewayProtocolError,
  GatewayTransportError,
  GatewayUsageError,
} from '../../../protocol/kruntimes/gatewayErrors';
import { ReplayGateway } from '../../fixtures/replayGateway';

describe('gateway client behaviour', () => {
  const gateway = new ReplayGateway();
  const clients: GatewayClient[] = [];
  const newClient = (opts: { readRetryWindowMs?: number; maxResponseBytes?: number } = {}) => {
    const c = new GatewayClient({ endpoint: { url: gateway.endpoint }, token: 't', ...opts });
    clients.push(c);
    return c;
  };

  before(() => gateway.start());
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await gateway.stop();
  });
  beforeEach(() => {
    gateway.received.length = 0;
  });

  it('keeps lastActivityUnixNano exact above 2^53', async () => {
    gateway.respondWith({ status: 200, body: '{"state":"SESSION_STATE_READY","lastActivityUnixNano":1788256802123456789}\n' });
    const status = await newClient().status();
    assert.equal(status.lastActivityUnixNano, 1788256802123456789n);
  });

  it('names an operation with the idempotency key it was given, and sends none otherwise', async () => {
    gateway.respondWith({ status: 200, body: '{"command":{"exitCode":0}}\n' });
    const c = newClient();
    await c.runCommand({ argv: ['true'] }, { idempotencyKey: 'save-r2.attempt-1' });
    await c.runCommand({ argv: ['true'] });
    assert.equal(gateway.received[0]!.headers['idempotency-key'], 'save-r2.attempt-1');
    assert.equal(gateway.received[1]!.headers['idempotency-key'], undefined);
  });

  it('reads an empty file whose contents are null', async () => {
    gateway.respondWith({ status: 200, body: '{"contents":null,"truncated":false}\n' });
    const r = await newClient().read('empty.txt');
    assert.equal(r.contents.length, 0);
    assert.equal(r.truncated, false);
  });

  it('percent-encodes each path segment and keeps the slashes', async () => {
    gateway.respondWith({ status: 200, body: '{"contents":"eA==","truncated":true}\n' });
    await newClient().read('dir with space/ü?#%.txt', { maxBytes: 1 });
    assert.equal(
      new URL(gateway.received[0]!.url, 'http://x').pathname,
      '/v1/namespaces/default/runtimes/bash/sessions/session-uid/files/dir%20with%20space/%C3%BC%3F%23%25.txt',
    );
  });

  it('refuses paths and sizes the API cannot take, without a request', async () => {
    const c = newClient();
    for (const bad of ['', '/etc/passwd', '../x', 'a/../b', 'a//b', './a']) {
      assert.throws(() => encodeFilePath(bad), GatewayUsageError, bad);
    }
    await assert.rejects(c.read('a', { maxBytes: 786_001 }), GatewayUsageError);
    await assert.rejects(c.writeFile('big', Buffer.alloc(786_001)), GatewayUsageError);
    assert.equal(gateway.received.length, 0);
  });

  it('retries a read on 409/503 inside the retry window, then succeeds', async () => {
    let n = 0;
    gateway.respondWith(() =>
      ++n < 3
        ? { status: n === 1 ? 409 : 503, body: '{"error":"Session Run is Running, not Ready"}\n' }
        : { status: 200, body: '{"state":"SESSION_STATE_READY"}\n' },
    );
    const status = await newClient({ readRetryWindowMs: 5000 }).status();
    assert.equal(status.state, 'SESSION_STATE_READY');
    assert.equal(gateway.received.length, 3);
  });

  it('does not retry reads outside the window', async () => {
    gateway.respondWith({ status: 409, body: '{"error":"Session Run is Cancelled, not Ready"}\n' });
    await assert.rejects(newClient().status(), GatewayError);
    assert.equal(gateway.received.length, 1);
  });

  it('never retries a mutation, even inside the read-retry window', async () => {
    gateway.respondWith({ status: 503, body: '{"error":"dial Runtime Service: refused"}\n' });
    await assert.rejects(newClient({ readRetryWindowMs: 5000 }).runCommand({ argv: ['true'] }), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.status, 503);
      return true;
    });
    assert.equal(gateway.received.length, 1);
  });

  it('reports "outcome unknown" when a mutation connection breaks after sending', async () => {
    gateway.respondWith((_req, res) => {
      res.socket?.destroy();
      return 'handled';
    });
    await assert.rejects(newClient().runCommand({ argv: ['touch', 'x'] }), (e: unknown) => {
      assert.ok(e instanceof GatewayTransportError, String(e));
      assert.equal(e.outcomeUnknown, true);
      assert.equal(e.code, 'outcome_unknown');
      return true;
    });
    assert.equal(gateway.received.length, 1, 'sent once, not retried');
  });

  it('reports an unreachable gateway as unsent (not outcome unknown)', async () => {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    const c = new GatewayClient({ endpoint: { url: `http://127.0.0.1:${port}/v1/namespaces/a/runtimes/b/sessions/c` } });
    clients.push(c);
    await assert.rejects(c.writeFile('x', Buffer.from('y')), (e: unknown) => {
      assert.ok(e instanceof GatewayTransportError);
      assert.equal(e.outcomeUnknown, false);
      assert.equal(e.code, 'gateway_unreachable');
      return true;
    });
  });

  it('cancels a stream by abort and closes the connection', async () => {
    let closed!: () => void;
    const connectionClosed = new Promise<void>((r) => (closed = r));
    gateway.respondWith((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' });
      res.write('{"sequence":1,"type":"accepted","accepted":{"operationID":"op"}}\n');
      res.on('close', () => closed());
      return 'handled';
    });
    const controller = new AbortController();
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of newClient().stream({ command: { argv: ['sleep', '60'] } }, { signal: controller.signal })) {
          seen.push(e.type);
          controller.abort();
        }
      })(),
      (e: unknown) => (e as Error).name === 'AbortError',
    );
    assert.deepEqual(seen, ['accepted']);
    await connectionClosed;
  });

  it('treats a stream that ends without a terminal event as outcome unknown', async () => {
    gateway.respondWith({
      status: 200,
      headers: { 'content-type': 'application/x-ndjson; charset=utf-8' },
      body: '{"sequence":1,"type":"accepted","accepted":{"operationID":"op"}}\n',
    });
    await assert.rejects(
      (async () => {
        for await (const _e of newClient().stream({ command: { argv: ['true'] } })) {
          /* drain */
        }
      })(),
      (e: unknown) => e instanceof GatewayTransportError && e.outcomeUnknown,
    );
  });

  it('maps an error before the stream starts like any other call', async () => {
    gateway.respondWith({ status: 429, body: '{"error":"session operation queue is full"}\n' });
    await assert.rejects(
      (async () => {
        for await (const _e of newClient().stream({ command: { argv: ['true'] } })) {
          /* never */
        }
      })(),
      (e: unknown) => e instanceof GatewayError && e.status === 429 && e.message === 'session operation queue is full',
    );
  });

  it('refuses a response body larger than its cap', async () => {
    gateway.respondWith({ status: 200, body: `{"contents":"${'A'.repeat(4096)}","truncated":false}\n` });
    await assert.rejects(newClient({ maxResponseBytes: 1024 }).read('x'), GatewayProtocolError);
  });

  it('refuses a 200 body of the wrong shape', async () => {
    gateway.respondWith({ status: 200, body: '{"contents":"not base64!","truncated":false}\n' });
    await assert.rejects(newClient().read('x'), GatewayProtocolError);
    gateway.respondWith({ status: 200, body: '<html>proxy</html>' });
    await assert.rejects(newClient().status(), GatewayProtocolError);
  });

  it('keeps a non-JSON error body as the message (e.g. a 431 from the HTTP server)', async () => {
    gateway.respondWith({ status: 431, headers: { 'content-type': 'text/plain' }, body: 'Request Header Fields Too Large' });
    await assert.rejects(newClient().status(), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.status, 431);
      assert.equal(e.message, 'Request Header Fields Too Large');
      assert.equal(e.describe(), 'Runtime access API returned HTTP 431: Request Header Fields Too Large');
      return true;
    });
  });

  it('sends the cancel extension to operations/{id}:cancel', async () => {
    gateway.respondWith({ status: 200, body: '{"result":"ended"}\n' });
    assert.equal(await newClient().cancelOperation('op/1'), 'ended');
    assert.equal(new URL(gateway.received[0]!.url, 'http://x').pathname.endsWith('/operations/op%2F1:cancel'), true);
  });
});
