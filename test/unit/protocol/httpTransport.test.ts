// The HTTP transport under the gateway clients keeps the same promises whichever implementation serves
// a URL — node:http for a plain-http loopback gateway (the local daemon), undici for TLS — so the
// clients' timeouts, aborts and caps mean the same thing on both: a request and its answer (a non-2xx
// is an answer), the headers timeout, a body timeout that bounds each wait (not the whole body), an
// abort before and during the body, a refused connection's code, keep-alive reuse that never cuts an
// active request, and the body cap.
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCertificateAuthority } from '../../fixtures/cluster/certificates';
import { freePort } from '../../fixtures/loopback';
import { type HttpResponse, type HttpTransport, isLoopbackHttp, openHttpTransport, readText } from '../../../protocol/kruntimes/httpTransport';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface Served {
  base: string;
  transport: HttpTransport;
  /** Connections the server accepted. */
  connections: () => number;
  /** Requests whose connection closed before the response ended. */
  cutOff: () => number;
  handle(h: Handler): void;
  stop(): Promise<void>;
}

const SETUPS: { name: string; start(): Promise<Served> }[] = [
  {
    name: 'node:http (plain-http loopback)',
    start: () => serve((handler) => http.createServer(handler), 'http', {}),
  },
  {
    name: 'undici (https)',
    start: async () => {
      const ca = await createCertificateAuthority('httpTransport test CA');
      const cert = await ca.issueServer('localhost', ['localhost'], ['127.0.0.1']);
      return serve((handler) => https.createServer({ cert: cert.certPem, key: cert.keyPem }, handler), 'https', { ca: ca.certPem });
    },
  },
];

async function serve(make: (h: Handler) => http.Server, scheme: 'http' | 'https', tls: { ca?: string }): Promise<Served> {
  let handler: Handler = (_req, res) => res.end();
  let connections = 0;
  let cutOff = 0;
  const server = make((req, res) => {
    res.on('close', () => {
      if (!res.writableFinished) cutOff++;
    });
    handler(req, res);
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const transport = openHttpTransport(base, { maxConnections: 4, keepAliveMs: 150, tls, nodeHttpForLoopback: true });
  return {
    base,
    transport,
    connections: () => connections,
    cutOff: () => cutOff,
    handle: (h) => (handler = h),
    stop: async () => {
      await transport.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const GET = { method: 'GET', headers: {}, headersTimeoutMs: 5000, bodyTimeoutMs: 5000 } as const;

describe('HTTP transport', () => {
  it('serves plain-http loopback with node:http only when asked (short-lived processes), everything else with undici', () => {
    for (const url of ['http://127.0.0.1:1/x', 'http://localhost:8080', 'http://[::1]:9/', 'http://127.3.2.1']) assert.equal(isLoopbackHttp(url), true, url);
    for (const url of ['https://127.0.0.1:1/x', 'http://10.0.0.1/', 'http://example.com/', 'http://127.0.0.1.example.com/', 'not a url']) assert.equal(isLoopbackHttp(url), false, url);
    const kind = (url: string, nodeHttpForLoopback?: boolean) => openHttpTransport(url, { nodeHttpForLoopback }).constructor.name;
    assert.equal(kind('http://127.0.0.1:1/'), 'LazyUndiciTransport');
    assert.equal(kind('http://127.0.0.1:1/', true), 'NodeHttpTransport');
    assert.equal(kind('https://127.0.0.1:1/', true), 'LazyUndiciTransport');
  });

  for (const setup of SETUPS) {
    describe(setup.name, () => {
      let s: Served;
      before(async () => {
        s = await setup.start();
      });
      after(() => s.stop());

      it('sends the method, headers and body (with its length) and answers any status with its body', async () => {
        s.handle((req, res) => {
          let body = '';
          req.on('data', (d: Buffer) => (body += d.toString()));
          req.on('end', () => {
            res.writeHead(409, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ method: req.method, auth: req.headers.authorization, length: req.headers['content-length'], body }));
          });
        });
        const res = await s.transport.request(`${s.base}/runs`, { ...GET, method: 'PATCH', headers: { authorization: 'Bearer t' }, body: '{"ü":1}' });
        assert.equal(res.statusCode, 409);
        assert.deepEqual(JSON.parse(await readText(res)), { method: 'PATCH', auth: 'Bearer t', length: '8', body: '{"ü":1}' });
      });

      it('rejects when the headers do not come within the headers timeout', async () => {
        s.handle(() => undefined); // never answers
        await assert.rejects(s.transport.request(`${s.base}/slow`, { ...GET, headersTimeoutMs: 200 }), { code: 'UND_ERR_HEADERS_TIMEOUT' });
      });

      it('bounds each wait for the body, not the whole body', async () => {
        // Four chunks 100 ms apart: 300 ms in all, each wait well under the 250 ms bound.
        s.handle((_req, res) => {
          res.writeHead(200);
          let n = 0;
          const timer = setInterval(() => {
            res.write(`${n}\n`);
            if (++n === 4) {
              clearInterval(timer);
              res.end();
            }
          }, 100);
          res.on('close', () => clearInterval(timer));
        });
        const res = await s.transport.request(`${s.base}/trickle`, { ...GET, bodyTimeoutMs: 250 });
        assert.equal(await readText(res), '0\n1\n2\n3\n');

        s.handle((_req, res) => {
          res.writeHead(200);
          res.write('first\n'); // then nothing
        });
        const stalled = await s.transport.request(`${s.base}/stall`, { ...GET, bodyTimeoutMs: 200 });
        await assert.rejects(readText(stalled), { code: 'UND_ERR_BODY_TIMEOUT' });
      });

      it('does not count the time the reader spends on a chunk against the body timeout', async () => {
        s.handle((_req, res) => {
          res.writeHead(200);
          res.write('a');
          setTimeout(() => res.end('b'), 20);
        });
        const res = await s.transport.request(`${s.base}/slow-reader`, { ...GET, bodyTimeoutMs: 150 });
        const chunks: string[] = [];
        for await (const chunk of res.body) {
          chunks.push(chunk.toString());
          if (chunks.length === 1) await new Promise((r) => setTimeout(r, 400)); // the reader is slow: longer than the bound
        }
        assert.equal(chunks.join(''), 'ab');
      });

      it('rejects with the abort reason before the headers, and breaks off the body (closing the connection) during it', async () => {
        s.handle(() => undefined);
        const early = new AbortController();
        const pending = s.transport.request(`${s.base}/never`, { ...GET, signal: early.signal });
        early.abort();
        await assert.rejects(pending, { name: 'AbortError' });

        const cutBefore = s.cutOff();
        s.handle((_req, res) => {
          res.writeHead(200);
          res.write('started\n');
        });
        const late = new AbortController();
        const res: HttpResponse = await s.transport.request(`${s.base}/stream`, { ...GET, bodyTimeoutMs: 0, signal: late.signal });
        const reading = (async () => {
          for await (const _chunk of res.body) late.abort();
        })();
        await assert.rejects(reading, { name: 'AbortError' });
        for (let i = 0; i < 200 && s.cutOff() === cutBefore; i++) await new Promise((r) => setTimeout(r, 10)); // until the server sees it
        assert.equal(s.cutOff(), cutBefore + 1, 'the server saw the response cut off');
      });

      it('reports a refused connection by its code', async () => {
        const port = await freePort();
        const url = `${s.base.split(':')[0]}://127.0.0.1:${port}/`;
        const other = openHttpTransport(url, { tls: {}, nodeHttpForLoopback: true });
        try {
          await assert.rejects(other.request(url, GET), { code: 'ECONNREFUSED' });
        } finally {
          await other.close();
        }
      });

      it('reuses a kept-alive connection, and never cuts an active request at the idle timeout', async () => {
        s.handle((_req, res) => res.end('ok'));
        const before = s.connections();
        for (let i = 0; i < 4; i++) await readText(await s.transport.request(`${s.base}/${i}`, GET));
        // undici may open a second connection when the next request comes as the first one completes.
        assert.ok(s.connections() - before <= 2, `4 requests one after another opened ${s.connections() - before} connections`);
        // Silent for twice the 150 ms idle (keep-alive) timeout while the request is active.
        s.handle((_req, res) => setTimeout(() => res.end('late'), 400));
        assert.equal(await readText(await s.transport.request(`${s.base}/quiet`, GET)), 'late');
      });

      it('stops reading a body over the cap and rejects with the caller\'s error', async () => {
        s.handle((_req, res) => res.end('x'.repeat(10_000)));
        const res = await s.transport.request(`${s.base}/big`, GET);
        await assert.rejects(readText(res, 1024, () => new Error('too large')), /too large/);
        assert.equal(res.destroyed, true);
      });
    });
  }
});
