// `sandbox exec` and the other verbs that need a running daemon (issue 25: a CLI call in a loop pays every round
// trip) send their first request straight to the daemon the state file names, without a /healthz probe first —
// and still say "the local gateway is not running" (same words, same exit code) when its process lives but its
// port refuses the connection. (No daemon at all — no state file, or a stale one — starts one: cli.test.ts.)
// `cancel`, which has a way without the daemon, never starts one: it falls back to the exec record.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { writeGatewayState } from '../../../server/gateway/stateFile';
import { StateLayout } from '../../../server/local/stateRoot';

const TOKEN = 'a'.repeat(32);
const NOT_RUNNING = 'error: the local gateway is not running; start it with `sandbox-sessions gateway --detach` (HTTP 503)\n';

async function sandbox(stateDir: string, args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const sink = (add: (s: string) => void): Writable =>
    new Writable({
      write(chunk: Buffer, _enc, done) {
        add(chunk.toString());
        done();
      },
    });
  const code = await runSandboxCommand([...args.slice(0, 1), '--state-dir', stateDir, ...args.slice(1)], { stdout: sink((s) => (out += s)), stderr: sink((s) => (err += s)) });
  return { code, out, err };
}

/** A stand-in daemon on loopback: records each request's path; a Run named `gone` is not found, as the daemon answers. */
async function fakeDaemon(): Promise<{ url: string; port: number; paths: string[]; server: http.Server }> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? '');
    if (req.url === '/healthz') return void res.end();
    res.writeHead(req.headers.authorization === `Bearer ${TOKEN}` ? 404 : 401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', message: req.headers.authorization === `Bearer ${TOKEN}` ? 'runs.kruntimes.io "gone" not found' : 'bearer token is not authenticated' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, port, paths, server };
}

describe('CLI: verbs reach the daemon without a /healthz probe first', function () {
  this.timeout(30_000);
  let stateDir: string;
  let stateFile: string;
  beforeEach(async () => {
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-noprobe-'));
    stateFile = new StateLayout(stateDir).gatewayStateFile;
  });
  afterEach(() => fs.rm(stateDir, { recursive: true, force: true }));

  it('the first request is the verb\'s own: get and exec send one GET of the Run, and its answer is what they say', async () => {
    const daemon = await fakeDaemon();
    try {
      // This process is the "daemon" the state file names: alive, so it is taken without a probe.
      await writeGatewayState(stateFile, { host: '127.0.0.1', port: daemon.port, url: daemon.url, token: TOKEN, api: 'era-c' });
      const got = await sandbox(stateDir, ['get', 'gone']);
      assert.deepEqual(got, { code: 1, out: '', err: 'error: no sandbox default/gone here (`sandbox-sessions sandbox list --all-namespaces` lists them)\n' });
      const exec = await sandbox(stateDir, ['exec', 'gone', '--', 'true']);
      assert.deepEqual(exec, got);
      assert.deepEqual(daemon.paths, ['/local/v1/namespaces/default/runs/gone', '/local/v1/namespaces/default/runs/gone']);
      // A wrong token is still the daemon's own clear answer.
      await writeGatewayState(stateFile, { host: '127.0.0.1', port: daemon.port, url: daemon.url, token: 'b'.repeat(32), api: 'era-c' });
      assert.deepEqual(await sandbox(stateDir, ['exec', 'gone', '--', 'true']), { code: 1, out: '', err: 'error: bearer token is not authenticated (HTTP 401)\n' });
    } finally {
      daemon.server.close();
      daemon.server.closeAllConnections();
    }
  });

  it('a live daemon process whose port refuses is "not running", the same for every verb; cancel then reads the exec record', async () => {
    // A live process (this one) whose port nothing listens on any more: the refused first request says it.
    const daemon = await fakeDaemon();
    await new Promise((resolve) => daemon.server.close(resolve));
    await writeGatewayState(stateFile, { host: '127.0.0.1', port: daemon.port, url: daemon.url, token: TOKEN, api: 'era-c' });
    for (const verb of [['exec', 'gone', '--', 'true'], ['get', 'gone'], ['list']]) assert.deepEqual(await sandbox(stateDir, verb), { code: 1, out: '', err: NOT_RUNNING }, verb.join(' '));
    assert.deepEqual(await sandbox(stateDir, ['exec', 'gone', '--json', '--', 'true']), { code: 1, out: '', err: `${JSON.stringify({ error: NOT_RUNNING.slice('error: '.length, -1) })}\n` });
    // `cancel` has a way without the daemon: the exec record (none here), and an id it does not know is no success.
    assert.deepEqual(await sandbox(stateDir, ['cancel', 'gone', 'op-1']), {
      code: 1,
      out: '',
      err: 'error: sandbox default/gone has no operation op-1 (`sandbox-sessions sandbox operations gone` lists them)\n',
    });
    assert.deepEqual(daemon.paths, []);
  });
});
