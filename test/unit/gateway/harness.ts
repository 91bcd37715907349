// Test harness for the local gateway: an in-process daemon on a temp state dir, real HTTP
// through undici, helpers to create a Run and wait (bounded) for a phase.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../../server/gateway/daemon';
import type { Run, RunPhase } from '../../../protocol/kruntimes/run';

export interface TestGateway {
  gw: RunningGateway;
  stateDir: string;
  cleanup(): Promise<void>;
}

export async function startTestGateway(opts: Partial<GatewayOptions> = {}): Promise<TestGateway> {
  const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-gw-'));
  const gw = await startGateway({ stateDir, tickMs: 50, ...opts });
  return {
    gw,
    stateDir,
    cleanup: async () => {
      await gw.close();
      await fs.rm(stateDir, { recursive: true, force: true });
    },
  };
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): unknown;
}

export async function call(
  gw: { url: string; token: string },
  method: string,
  urlPath: string,
  opts: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; token?: string | null; timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token !== null) headers.authorization = `Bearer ${opts.token ?? gw.token}`;
  let body: string | Buffer | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const timeout = opts.timeoutMs ?? 15_000;
  const res = await request(gw.url + urlPath, {
    method: method as 'GET',
    headers,
    body,
    headersTimeout: timeout,
    bodyTimeout: timeout,
    signal: opts.signal ?? AbortSignal.timeout(timeout),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) as unknown };
}

export function runsPath(ns = 'default', name?: string): string {
  return `/local/v1/namespaces/${ns}/runs${name ? `/${name}` : ''}`;
}

export async function createRun(
  gw: RunningGateway,
  spec: Partial<Run['spec']> & { session?: Record<string, unknown> } = {},
  ns = 'default',
): Promise<Run> {
  const { session, ...rest } = spec;
  const body = {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { generateName: 'test-' },
    spec: { runtime: 'process', mode: { session: session ?? {} }, ...rest },
  };
  const r = await call(gw, 'POST', runsPath(ns), { body });
  if (r.status !== 201) throw new Error(`create run: ${r.status} ${r.text}`);
  return r.json() as Run;
}

export async function waitPhase(gw: RunningGateway, run: Run, phases: RunPhase[], timeoutMs = 15_000): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await call(gw, 'GET', runsPath(run.metadata.namespace, run.metadata.name));
    const cur = r.json() as Run;
    if (cur.status?.phase && phases.includes(cur.status.phase)) return cur;
    if (Date.now() > deadline) throw new Error(`run ${run.metadata.name} is ${cur.status?.phase} (${cur.status?.message}), wanted ${phases.join('|')}`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

export async function readyRun(gw: RunningGateway, spec: Parameters<typeof createRun>[1] = {}, ns = 'default'): Promise<{ run: Run; P: string }> {
  const run = await waitPhase(gw, await createRun(gw, spec, ns), ['Ready', 'Failed']);
  if (run.status?.phase !== 'Ready') throw new Error(`run failed: ${run.status?.message}`);
  const P = new URL(run.status.endpoint?.url ?? '').pathname;
  return { run, P };
}

export function b64(s: string): string {
  return Buffer.from(s).toString('base64');
}

export async function patchTermination(gw: RunningGateway, run: Run, mode: 'Drain' | 'Immediate'): Promise<Reply> {
  return call(gw, 'PATCH', runsPath(run.metadata.namespace, run.metadata.name), {
    raw: JSON.stringify({ spec: { termination: { mode } } }),
    headers: { 'content-type': 'application/merge-patch+json' },
  });
}

/** Waits (bounded) until the Run has a running command, seen through its exec records. */
export async function waitCommandRunning(gw: RunningGateway, run: Run, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await call(gw, 'GET', `${runsPath(run.metadata.namespace, run.metadata.name)}/operations`);
    const running = (r.json() as { items: Array<{ operationId: string; state: string }> }).items.find((o) => o.state === 'running');
    if (running) return running.operationId;
    if (Date.now() > deadline) throw new Error(`no command of ${run.metadata.name} started within ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 20));
  }
}
