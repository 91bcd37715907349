// The interactive terminal of OpenSandbox Runs, end to end: the editor's client
// (protocol/kruntimes/terminalSocket.ts, through GatewayClient.openTerminal) → the real local
// gateway daemon's `GET P/pty` → the daemon's connection to execd's PTY socket in the
// simulator (a real pty: `script` inside the sandbox's bubblewrap root, host /usr). Everything
// the editor receives is recorded, to prove the OpenSandbox API key and execd's token never
// reach it.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@alibaba-group/opensandbox';
import { request } from 'undici';
import { WebSocket } from 'ws';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { Run } from '../../../protocol/kruntimes/run';
import { terminalSocketUrl } from '../../../protocol/kruntimes/terminalSocket';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { localBackends } from '../../../server/sandboxes/localBackends';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { expectEndedByDrain, TerminalOpener, terminalContract } from '../../fixtures/terminalContract';
import { call, patchTermination, runsPath, waitPhase } from '../gateway/harness';
import { connection, startTarget, type Target } from './target';

const CANARY_KEY = `canary-key-${Date.now().toString(36)}-pty-never-to-the-editor`;

describe('OpenSandbox interactive terminal through the local gateway (GET P/pty)', function () {
  this.timeout(120_000);
  let target: Target;
  let gw: RunningGateway;
  let stateDir: string;
  let run: Run;
  let gc: GatewayClient;
  let execdToken: string | undefined;
  /** Its terminals; `wire` is every byte and message the editor side received, in any test. */
  const terms = new TerminalOpener(() => gc);
  const { openTerm, shell, wire } = terms;

  before(async () => {
    target = await startTarget({ apiKey: CANARY_KEY, graceMs: 50 });
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-pty-'));
    const env = { OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey };
    gw = await startGateway({ stateDir, tickMs: 50, backends: localBackends(stateDir, env) });
    const r = await call(gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { generateName: 'pty-' }, spec: { runtime: 'opensandbox', mode: { session: {} } } },
    });
    assert.equal(r.status, 201, r.text);
    run = await waitPhase(gw, r.json() as Run, ['Ready', 'Failed'], 60_000);
    assert.equal(run.status?.phase, 'Ready', run.status?.message);
    gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    // What the daemon sends execd: the token the endpoint lookup hands out with the API key.
    const client = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: target.apiKey ?? '', env: {} }));
    const [mine] = await client.listOurs({ run: run.metadata.uid ?? '' });
    const sbx = await Sandbox.connect({ sandboxId: mine?.id ?? '', connectionConfig: connection(target) });
    execdToken = Object.values((await sbx.getEndpoint(44772)).headers ?? {})[0];
    await sbx.close();
  });

  afterEach(() => terms.endAll());

  after(async () => {
    await gc?.close();
    await gw?.close();
    await target?.simulator?.close();
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  it('the status advertises the terminal for an OpenSandbox Run', async () => {
    const status = await gc.status();
    assert.equal(status.capabilities?.terminal, true);
    wire.push(JSON.stringify(status, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
  });

  terminalContract(() => ({ openTerm, shell, read: async (rel) => (await gc.read(rel)).contents.toString('utf8'), url: run.status?.endpoint?.url ?? '', token: gw.token }));

  it('refuses without the gateway token, with a wrong one, for an unknown Run, a bad query, and a plain GET', async () => {
    const url = run.status?.endpoint?.url ?? '';
    const attempt = (u: string, headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = new WebSocket(u, { headers });
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString('utf8')));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.once('open', () => {
          ws.terminate();
          reject(new Error(`upgraded: ${u}`));
        });
        ws.once('error', () => undefined);
      });
    const none = await attempt(terminalSocketUrl(url), {});
    assert.equal(none.status, 401);
    const wrong = await attempt(terminalSocketUrl(url), { Authorization: `Bearer ${gw.token}x` });
    assert.equal(wrong.status, 401);
    const other = await attempt(terminalSocketUrl(url.replace(run.metadata.uid ?? '', '00000000-0000-0000-0000-000000000000')), { Authorization: `Bearer ${gw.token}` });
    assert.equal(other.status, 404);
    const bad = await attempt(`${terminalSocketUrl(url)}?cols=0`, { Authorization: `Bearer ${gw.token}` });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /cols must be/);
    const foreign = await attempt(terminalSocketUrl(url), { Authorization: `Bearer ${gw.token}`, Origin: 'http://evil.example' });
    assert.equal(foreign.status, 403);
    const plain = await request(`${url}/pty`, { headers: { authorization: `Bearer ${gw.token}` } });
    assert.equal(plain.statusCode, 426);
    await plain.body.text();
    for (const r of [none, wrong, other, bad, foreign]) wire.push(r.body);
  });

  it('the OpenSandbox API key and execd token never reach the editor, not even through `env` in the sandbox', async () => {
    const t = await shell();
    const mark = t.text.length;
    t.socket.write('env; echo env-d""one\r');
    await t.see(/env-done/, mark);
    assert.ok(execdToken && execdToken.length > 8, 'the simulator hands out an execd token');
    const seen = wire.join('\n');
    assert.ok(seen.length > 1000, 'the editor saw a lot');
    assert.ok(!seen.includes(CANARY_KEY), 'the API key reached the editor');
    assert.ok(!seen.includes(execdToken), 'the execd token reached the editor');
  });

  it('Drain closes open terminals (SESSION_GONE) and new ones are refused', async () => {
    const t = await shell();
    const patched = await patchTermination(gw, run, 'Drain');
    assert.equal(patched.status, 200, patched.text);
    await expectEndedByDrain(t, openTerm);
    const done = await waitPhase(gw, run, ['Succeeded', 'Failed'], 30_000);
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
  });
});
