// The two servers the era-D golden cases (specs/kruntimes-access-api.md §10.11) run against, behind
// one interface so eraD.golden.test.ts has a single case table: the local gateway daemon started
// with `api: 'era-d'` (plain HTTP, its bearer token, Runs through its `/local/v1` API) and the
// cluster simulator's Kruntimes Console (HTTPS with the simulator's CA and the Console's service
// name, a Kubernetes bearer token authorized per Run, Runs created through the simulated API
// server and mirrored by its controller). Both serve operations with the project's local runtime,
// so a case may look at the Run's session (its lease clock) and exec records in either.
import assert from 'node:assert/strict';
import https from 'node:https';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { WebSocket } from 'ws';
import type { Run, RunPhase } from '../../../protocol/kruntimes/run';
import type { GatewayApi } from '../../../server/gateway/apiEra';
import type { LocalRuntime } from '../../../server/local/localRuntime';
import type { LocalSession } from '../../../server/local/localSession';
import { startClusterSimulator } from '../../fixtures/cluster/simulator';
import { call, readyRun, runsPath, startTestGateway, waitPhase, type Reply } from './harness';
import { openSocket, operations, rawUpgrade, wrapSocket, wsUrl, type OpenSocket, type OperationRecord, type RawReply } from './wsHarness';

export interface CallOptions {
  body?: unknown;
  /** A bearer token other than the target's own; `null` sends none. */
  token?: string | null;
}

/** What a session Run may be created with (era D's `mode.session`). */
export interface SessionOptions {
  leaseTimeoutSeconds?: number;
  queueSize?: number;
}

export interface EraDTarget {
  /** The session runtime's name (the `{runtime}` of the endpoint path). */
  runtime: string;
  call(method: string, urlPath: string, opts?: CallOptions): Promise<Reply>;
  /** An open `operations:ws` socket of the endpoint path `P` (with the target's token). */
  socket(P: string): Promise<OpenSocket>;
  /** A raw upgrade request, for refusals checked byte for byte. */
  rawUpgrade(urlPath: string, headers: Record<string, string>): Promise<RawReply>;
  token: string;
  /** A new session Run, Ready, and its endpoint path P. */
  readyRun(session?: SessionOptions): Promise<{ run: Run; P: string }>;
  /** The Run as its API shows it now. */
  current(run: Run): Promise<Run>;
  waitPhase(run: Run, phases: RunPhase[], timeoutMs?: number): Promise<Run>;
  /** The Run's session in the runtime that serves it (its lease clock is what `leaseTimeoutSeconds` reads). */
  session(run: Run): LocalSession;
  /** The Run's exec records. */
  operations(run: Run): Promise<OperationRecord[]>;
  /** Access requests the server served for the Run (after Run lookup and authorization), by kind. */
  requests(run: Run): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

export interface TargetLimits {
  maxSessionConnections?: number;
  maxConcurrentRequests?: number;
  maxResponseBodyBytes?: number;
}

export interface TargetKind {
  title: string;
  start(api: GatewayApi, limits?: TargetLimits): Promise<EraDTarget>;
}

function sessionIn(runtime: LocalRuntime, run: Run): LocalSession {
  const found = runtime.sessionByUid(run.metadata.namespace ?? 'default', run.spec.runtime, run.metadata.uid ?? '');
  assert.ok(found, 'the Run has a session');
  return found.session;
}

export const localGateway: TargetKind = {
  title: 'local gateway',
  async start(api, limits = {}) {
    const t = await startTestGateway({ api, ...limits });
    const gw = t.gw;
    return {
      runtime: 'process',
      token: gw.token,
      call: (method, urlPath, opts = {}) => call(gw, method, urlPath, opts),
      socket: (P) => openSocket(gw, P),
      rawUpgrade: (urlPath, headers) => rawUpgrade(gw.url, urlPath, headers),
      readyRun: (session = {}) => readyRun(gw, { session: { ...session } }),
      current: async (run) => (await call(gw, 'GET', runsPath(run.metadata.namespace, run.metadata.name))).json() as Run,
      waitPhase: (run, phases, timeoutMs) => waitPhase(gw, run, phases, timeoutMs),
      session: (run) => sessionIn(gw.runtime, run),
      operations: (run) => operations(gw, run),
      requests: async (run) => ((await call(gw, 'GET', `${runsPath(run.metadata.namespace, run.metadata.name)}/requests`)).json() as { requests: Record<string, number> }).requests,
      stop: () => t.cleanup(),
    };
  },
};

export const simulatorConsole: TargetKind = {
  title: 'cluster simulator Console',
  async start(api, limits = {}) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-erad-sim-'));
    const runtime = 'process';
    const sim = await startClusterSimulator({
      dir,
      era: api === 'era-c' ? 'C' : 'D',
      runtimes: [{ namespace: 'default', name: runtime }],
      tickMs: 50,
      consoleLimits: limits,
    });
    const { servername } = sim.console;
    const consoleTls = { ca: sim.caPem, servername }; // ws and https hand servername on to tls.connect
    const consoleAgent = new Agent({ connect: consoleTls });
    const apiAgent = new Agent({ connect: { ca: sim.caPem } });
    const admin = sim.tokens.admin;
    const httpsCall = async (agent: Agent, base: string, method: string, urlPath: string, token: string | null, body?: unknown, contentType = 'application/json'): Promise<Reply> => {
      const headers: Record<string, string> = {};
      if (token !== null) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = contentType;
      const res = await request(base + urlPath, {
        method: method as 'GET',
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        dispatcher: agent,
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) as unknown };
    };
    const runPath = (run: Run): string => `/apis/kruntimes.io/v1alpha1/namespaces/${run.metadata.namespace ?? 'default'}/runs/${run.metadata.name ?? ''}`;
    const current = async (run: Run): Promise<Run> => (await httpsCall(apiAgent, sim.server, 'GET', runPath(run), admin)).json() as Run;
    const waitFor = async (run: Run, phases: RunPhase[], timeoutMs = 15_000): Promise<Run> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const cur = await current(run);
        if (cur.status?.phase && phases.includes(cur.status.phase)) return cur;
        if (Date.now() > deadline) throw new Error(`run ${run.metadata.name} is ${cur.status?.phase} (${cur.status?.message}), wanted ${phases.join('|')}`);
        await new Promise((res) => setTimeout(res, 25));
      }
    };
    return {
      runtime,
      token: admin,
      call: (method, urlPath, opts = {}) => httpsCall(consoleAgent, sim.console.url, method, urlPath, opts.token === undefined ? admin : opts.token, opts.body),
      socket: (P) => wrapSocket(new WebSocket(wsUrl(sim.console.url, P), { headers: { authorization: `Bearer ${admin}` }, ...consoleTls })),
      rawUpgrade: (urlPath, headers) =>
        new Promise((resolve, reject) => {
          const req = https.request(`${sim.console.url}${urlPath}`, {
            ...consoleTls,
            headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
          });
          req.on('upgrade', (res, socket) => {
            socket.destroy();
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '', upgraded: true });
          });
          req.on('response', (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), upgraded: false }));
          });
          req.on('error', reject);
          req.setTimeout(10_000, () => req.destroy(new Error('upgrade request timed out')));
          req.end();
        }),
      async readyRun(session = {}) {
        const created = await httpsCall(apiAgent, sim.server, 'POST', '/apis/kruntimes.io/v1alpha1/namespaces/default/runs', admin, {
          apiVersion: 'kruntimes.io/v1alpha1',
          kind: 'Run',
          metadata: { generateName: 'golden-' },
          spec: { runtime, mode: { session } },
        });
        assert.equal(created.status, 201, created.text);
        const run = await waitFor(created.json() as Run, ['Ready', 'Failed', 'Timeout', 'Cancelled']);
        assert.equal(run.status?.phase, 'Ready', run.status?.message);
        return { run, P: new URL(run.status?.endpoint?.url ?? '').pathname };
      },
      current,
      waitPhase: waitFor,
      session: (run) => sessionIn(sim.runtime, run),
      operations: (run) => sim.runtime.operations(run.metadata.namespace ?? 'default', run.metadata.name ?? ''),
      requests: (run) => Promise.resolve(sim.console.requests(run.metadata.uid ?? '')),
      async stop() {
        await sim.stop();
        await Promise.all([consoleAgent.close(), apiAgent.close()]);
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const ERA_D_TARGETS: TargetKind[] = [localGateway, simulatorConsole];

/** Waits (bounded) until the operation's exec record is in `state`; returns the record. */
export async function waitOperationState(t: EraDTarget, run: Run, id: string, state: 'running' | 'ended', timeoutMs = 10_000): Promise<OperationRecord> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rec = (await t.operations(run)).find((o) => o.operationId === id);
    if (rec?.state === state) return rec;
    assert.ok(Date.now() < deadline, `operation ${id} is ${rec?.state ?? 'unknown'}, not ${state}, after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
