// The daemon's /healthz probe (probeHealth): clients take a daemon for running only when it answers 200
// within the bound, and a daemon that hangs must not hang the CLI that probes it.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { probeHealth } from '../../../server/gateway/stateFile';

async function serve(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('gateway state file: probeHealth', () => {
  it('is true for a 200 from /healthz, false for any other status or path', async () => {
    const paths: string[] = [];
    const ok = await serve((req, res) => {
      paths.push(req.url ?? '');
      res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    });
    const unhealthy = await serve((_req, res) => res.writeHead(503).end('starting'));
    try {
      assert.equal(await probeHealth(ok.url), true);
      assert.deepEqual(paths, ['/healthz']);
      assert.equal(await probeHealth(unhealthy.url), false);
    } finally {
      await ok.close();
      await unhealthy.close();
    }
  });

  it('is false when nothing listens, and false within its bound when the daemon never answers', async () => {
    const gone = await serve((_req, res) => res.end());
    const goneUrl = gone.url;
    await gone.close();
    assert.equal(await probeHealth(goneUrl), false);

    const hung = await serve(() => undefined); // accepts, reads the request, never answers
    try {
      const started = Date.now();
      assert.equal(await probeHealth(hung.url, 300), false);
      assert.ok(Date.now() - started < 3000, `the probe took ${Date.now() - started} ms with a 300 ms bound`);
    } finally {
      await hung.close();
    }
  });
});
