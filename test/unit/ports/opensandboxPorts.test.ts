// Forwarding a port of a local Run on the OpenSandbox backend, end to end: the OpenSandbox
// SIMULATOR (each sandbox has a network of its own; execd's `/proxy/{port}` reaches it and, like
// upstream execd started with an access token, refuses a request without the endpoint's header),
// a real local gateway daemon (in-process, a temp state root, the connection in opensandbox.json),
// the companion's LocalSandboxProvider and PortForwardService. A server started in the sandbox is
// fetched through 127.0.0.1:<local> — plain HTTP, a streamed upload, a streamed download and an
// Upgrade; the forward stops, ends with its sandbox and with its client; the listener binds
// 127.0.0.1 only; the API key is in nothing the client gets.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@alibaba-group/opensandbox';
import { CompanionError } from '../../../protocol/companion';
import type { Run } from '../../../protocol/kruntimes/run';
import type { PortEnded } from '../../../protocol/ports';
import { LOCAL_CONTEXT, type SandboxRef } from '../../../protocol/sandboxes';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { LocalGatewayClient } from '../../../server/gateway/localClient';
import { createLogger } from '../../../server/log';
import { hostListeningPorts } from '../../../server/ports/localPorts';
import type { PortForwardService } from '../../../server/ports/portForwardService';
import { portForwardService } from '../../../server/ports/portSubstrates';
import { localBackends } from '../../../server/sandboxes/localBackends';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { writeConnectionFile } from '../../../server/sandboxes/opensandbox/connectionFile';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { startOpenSandboxSimulator, type OpenSandboxSimulator } from '../../fixtures/opensandbox/simulator';
import { call, patchTermination, runsPath, waitPhase } from '../gateway/harness';
import { until } from '../../fixtures/waits';
import { accepts } from '../../fixtures/loopback';

const API_KEY = `canary-key-${Date.now().toString(36)}-must-not-reach-the-client`;
const EXECD_TOKEN_HEADER = 'x-execd-access-token';

/** A server for the sandbox (Node is in the simulated image's /usr): echoes requests, streams, and answers an Upgrade by echoing bytes. */
const ECHO_SERVER = `
const http = require('node:http');
const server = http.createServer((q, s) => {
  if (q.url.startsWith('/stream')) {
    s.writeHead(200, { 'content-type': 'text/plain' });
    let i = 0;
    const t = setInterval(() => { s.write('chunk ' + i + '\\n'); if (++i === 3) { clearInterval(t); s.end(); } }, 150);
    return;
  }
  const chunks = [];
  q.on('data', (d) => chunks.push(d));
  q.on('end', () => {
    s.setHeader('content-type', 'application/json');
    s.end(JSON.stringify({ method: q.method, url: q.url, headers: q.headers, body: Buffer.concat(chunks).toString() }));
  });
});
server.on('upgrade', (q, sock, head) => {
  sock.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n');
  if (head.length) sock.write(head);
  sock.pipe(sock);
});
server.listen(8001, '127.0.0.1');
`;

/** This machine's IPv4 addresses other than loopback (a listener on 127.0.0.1 must not answer there). */
function otherAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((a): a is os.NetworkInterfaceInfo => !!a && a.family === 'IPv4' && !a.internal)
    .map((a) => a.address);
}

describe('ports: a local Run on the OpenSandbox backend (simulator + local gateway daemon)', function () {
  this.timeout(120_000);
  let sim: OpenSandboxSimulator;
  let stateDir: string;
  let gw: RunningGateway;
  let provider: LocalSandboxProvider;
  let service: PortForwardService;
  const ended: PortEnded[] = [];

  before(async () => {
    sim = await startOpenSandboxSimulator({ apiKey: API_KEY, graceMs: 50 });
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-ports-'));
    // The daemon finds OpenSandbox through its connection file, as it does when the editor configured it.
    await writeConnectionFile(stateDir, { domain: sim.url, apiKey: API_KEY });
    gw = await startGateway({ stateDir, tickMs: 50, writeStateFile: true, backends: localBackends(stateDir, {}) });
    const log = createLogger(process.stderr, 'warn');
    provider = new LocalSandboxProvider({ stateDir, log });
    service = portForwardService(new Map([['local', provider]]), log);
  });
  after(async () => {
    await service?.dispose();
    await gw?.close();
    await sim?.close();
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  /** A Ready opensandbox Run with `python3 -m http.server 8000` and the echo server on 8001 running in its sandbox. */
  async function servingRun(): Promise<{ run: Run; ref: SandboxRef; sandboxId: string }> {
    const r = await call(gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { generateName: 'osb-ports-' }, spec: { runtime: 'opensandbox', mode: { session: {} } } },
    });
    assert.equal(r.status, 201, r.text);
    const run = await waitPhase(gw, r.json() as Run, ['Ready', 'Failed'], 60_000);
    assert.equal(run.status?.phase, 'Ready', run.status?.message);
    const gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    try {
      await gc.writeFile('served-by-the-sandbox.txt', Buffer.from('hi'));
      await gc.writeFile('echo.js', Buffer.from(ECHO_SERVER));
    } finally {
      await gc.close();
    }
    const client = new OpenSandboxClient(resolveConnection({ domain: sim.url, apiKey: API_KEY, env: {} }));
    const [mine] = await client.listOurs({ run: run.metadata.uid ?? '' });
    assert.ok(mine, 'the Run has its OpenSandbox sandbox');
    // Started as background commands of the sandbox (as a terminal would), so the session's queue stays free.
    const sbx = await Sandbox.connect({ sandboxId: mine.id, connectionConfig: resolveConnection({ domain: sim.url, apiKey: API_KEY, env: {} }).config() });
    try {
      await sbx.commands.run('cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1', { background: true });
      await sbx.commands.run('exec node /workspace/echo.js', { background: true });
    } finally {
      await sbx.close();
    }
    const ref: SandboxRef = { provider: 'local', context: LOCAL_CONTEXT, namespace: 'default', name: run.metadata.name as string };
    // Both servers listen in the sandbox's own network, as its /proc/net/tcp (read through the session) says.
    await until('the servers in the sandbox', async () => {
      const listed = await service.list(ref);
      return [8000, 8001].every((p) => listed.ports.some((l) => l.port === p && l.address === '127.0.0.1'));
    });
    return { run, ref, sandboxId: mine.id };
  }

  it('serves the sandbox\'s port 8000 on 127.0.0.1 only, through its endpoint with the headers it requires; stopping it closes the address', async () => {
    const { run, ref } = await servingRun();
    const listed = await service.list(ref);
    assert.match(listed.note ?? '', /read from \/proc\/net\/tcp in the OpenSandbox sandbox/);

    const forward = await service.forward(ref, 8000, undefined, (e) => ended.push(e));
    assert.equal(forward.via, 'proxy');
    assert.equal(forward.localHost, '127.0.0.1');
    assert.equal(forward.url, `http://127.0.0.1:${forward.localPort}/`);
    assert.match(forward.message, /through|proxy/);
    assert.ok(!JSON.stringify(forward).includes(API_KEY), 'the forward the client gets holds no API key');

    const page = await fetch(forward.url);
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /served-by-the-sandbox\.txt/, 'the directory listing of the sandbox\'s /workspace');
    assert.ok(!html.includes(API_KEY));
    // The server listens in the sandbox's network, not this machine's: only the forward reaches it.
    const direct = await fetch('http://127.0.0.1:8000/').then((r) => r.text(), () => '');
    assert.doesNotMatch(direct, /served-by-the-sandbox\.txt/);

    // Bound to 127.0.0.1 only: listed so by the kernel, and not answering on this machine's other addresses.
    const socket = (await hostListeningPorts()).find((p) => p.port === forward.localPort);
    assert.deepEqual(socket, { port: forward.localPort, address: '127.0.0.1', family: 'ipv4' });
    for (const address of otherAddresses()) assert.equal(await accepts(forward.localPort, address), false, `answers on ${address}`);

    // The simulator refuses a proxied request without the endpoint's header: the daemon's endpoint, fetched bare, is 401.
    const endpoint = await new LocalGatewayClient(gw.url, gw.token).portEndpoint('default', ref.name, 8000);
    assert.ok(endpoint.headers['X-EXECD-ACCESS-TOKEN'], 'the endpoint requires the execd access token');
    assert.ok(!JSON.stringify(endpoint).includes(API_KEY), 'the daemon hands out the endpoint, never the API key');
    assert.equal((await fetch(endpoint.url)).status, 401);
    assert.equal((await fetch(endpoint.url, { headers: endpoint.headers })).status, 200);

    assert.equal(await service.stop(forward.id), true);
    assert.equal(await accepts(forward.localPort), false, 'the address stops answering once the forward is stopped');
    assert.deepEqual(ended, [], 'a forward the client stopped is not reported as ended');
    await patchTermination(gw, run, 'Immediate');
    await waitPhase(gw, run, ['Cancelled'], 30_000);
  });

  it('passes headers, streamed uploads, streamed downloads and Upgrades; the client cannot replace the endpoint\'s header', async () => {
    const { run, ref } = await servingRun();
    const forward = await service.forward(ref, 8001, undefined, (e) => ended.push(e));

    // A streamed (chunked) upload, with a forged execd token that must not win over the endpoint's.
    const parts = ['first part;', 'second part;', 'last part'];
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = parts.shift();
        if (next === undefined) return controller.close();
        await new Promise((r) => setTimeout(r, 20)); // a pause between parts, so the body reaches the proxy in separate chunks
        controller.enqueue(new TextEncoder().encode(next));
      },
    });
    const res = await fetch(`${forward.url}upload?x=1&y=%20z`, { method: 'POST', body, duplex: 'half', headers: { [EXECD_TOKEN_HEADER]: 'forged', 'x-app': 'kept' } } as RequestInit);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.ok(!text.includes(API_KEY), 'the API key never reaches the server in the sandbox');
    const echoed = JSON.parse(text) as { method: string; url: string; headers: Record<string, string>; body: string };
    assert.equal(echoed.method, 'POST');
    assert.equal(echoed.url, '/upload?x=1&y=%20z');
    assert.equal(echoed.body, 'first part;second part;last part');
    assert.equal(echoed.headers['x-app'], 'kept');
    assert.equal(echoed.headers['transfer-encoding'], 'chunked', 'the upload was streamed, not buffered into one Content-Length body');
    assert.notEqual(echoed.headers[EXECD_TOKEN_HEADER], 'forged');
    assert.ok(!('open-sandbox-api-key' in echoed.headers));

    // A streamed download: the first chunk arrives on its own, before the server has written the rest.
    const stream = await fetch(`${forward.url}stream`);
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.equal(new TextDecoder().decode(first.value), 'chunk 0\n');
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    assert.equal(rest, 'chunk 1\nchunk 2\n');

    // An Upgrade (the WebSocket path): switched, then bytes both ways.
    const echoedBytes = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: forward.localPort, path: '/ws', headers: { connection: 'Upgrade', upgrade: 'echo' } });
      req.on('upgrade', (r, socket) => {
        assert.equal(r.statusCode, 101);
        socket.write('ping through the tunnel');
        socket.once('data', (d: Buffer) => {
          socket.destroy();
          resolve(d.toString());
        });
      });
      req.on('response', (r) => reject(new Error(`no upgrade: HTTP ${r.statusCode}`)));
      req.on('error', reject);
      req.end();
    });
    assert.equal(echoedBytes, 'ping through the tunnel');

    // The sandbox ends: the forward ends with it (ports/ended) and its address closes.
    await patchTermination(gw, run, 'Immediate');
    await until('ports/ended for the forward', () => ended.some((e) => e.forward.id === forward.id));
    assert.match(ended.find((e) => e.forward.id === forward.id)?.reason ?? '', /ended|deleted/);
    assert.equal(await accepts(forward.localPort), false);

    // A forward to the sandbox that ended is refused with a stable code.
    await waitPhase(gw, run, ['Cancelled'], 30_000);
    await assert.rejects(service.forward(ref, 8001, undefined, () => undefined), (e: unknown) => e instanceof CompanionError && e.causeCode === 'sandbox_ended' && /has ended \(Cancelled\)/.test(e.message));
  });

  it('the forwards end when their client goes (dispose)', async () => {
    const { run, ref } = await servingRun();
    const mine = portForwardService(new Map([['local', provider]]), createLogger(process.stderr, 'warn'));
    const forward = await mine.forward(ref, 8000, undefined, () => undefined);
    assert.equal((await fetch(forward.url)).status, 200);
    await mine.dispose();
    assert.equal(await accepts(forward.localPort), false);
    await patchTermination(gw, run, 'Immediate');
    await waitPhase(gw, run, ['Cancelled'], 30_000);
  });
});
