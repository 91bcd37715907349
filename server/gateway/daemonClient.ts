// Finding and starting the local gateway daemon from another process (the companion server,
// the CLI): read the state file, check the pid identity and /healthz, and if nothing healthy
// is there, start `sandbox-sessions gateway` detached and wait (bounded) until it is. A daemon
// serves one access API era (`api`); one of the other era needs its own state dir.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import type { GatewayApi } from './apiEra';
import { findHealthyGateway, findLiveGateway, readGatewayState, stateProcessAlive, type GatewayState } from './stateFile';
import { SandboxSessionsError } from '../../protocol/errors';

export type GatewayStartErrorCode = 'gateway_start_failed' | 'gateway_start_timeout' | 'gateway_not_running' | 'gateway_api_mismatch';

export class GatewayStartError extends SandboxSessionsError<GatewayStartErrorCode> {
  override readonly name = 'GatewayStartError';
  readonly service = 'local-gateway';
}

export interface GatewayHandle {
  url: string;
  token: string;
  pid: number;
  /** The access API era the daemon serves. */
  api: GatewayApi;
}

/**
 * Node flags the daemon runs with. A young generation of at most 1 MiB per semi-space: under a burst of
 * executes V8 grows it to 16 MiB per semi-space (64 MB of new space) and keeps it, which took the daemon
 * from ~90 to ~210 MB RSS after 4,000 executes with no more live objects (bench/daemonSoak.ts, issue 25).
 * A command-line flag because V8 sizes the heap when the process starts. The price: more scavenges.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];

/** How to run the daemon: this program again with `gateway` (works for dist/server.js and tsx entries). */
export function defaultGatewayCommand(): string[] {
  return [process.execPath, ...process.execArgv, ...DAEMON_NODE_FLAGS, process.argv[1] ?? '', 'gateway'];
}

function handle(state: GatewayState): GatewayHandle {
  return { url: state.url, token: state.token, pid: state.pid, api: state.api };
}

/** The running daemon, or undefined (never starts one). */
export async function findGateway(stateDir = defaultStateDir()): Promise<GatewayHandle | undefined> {
  const state = await findHealthyGateway(new StateLayout(stateDir).gatewayStateFile);
  return state ? handle(state) : undefined;
}

/**
 * The daemon whose process is alive, without the /healthz probe, or undefined (never starts one): for a
 * short-lived caller whose first request is as good a probe (the `sandbox` CLI, issue 25) — it must take a
 * refused connection on that request for "not running" (isConnectionRefused).
 */
export async function findLiveGatewayUnprobed(stateDir = defaultStateDir()): Promise<GatewayHandle | undefined> {
  const state = await findLiveGateway(new StateLayout(stateDir).gatewayStateFile);
  return state ? handle(state) : undefined;
}

/** Whether `err` is a refused TCP connection: nothing listens where the state file says the daemon does. */
export function isConnectionRefused(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as NodeJS.ErrnoException).code === 'ECONNREFUSED';
}

async function tail(file: string, bytes = 2000): Promise<string> {
  const text = await fsp.readFile(file, 'utf8').catch(() => '');
  return text.slice(-bytes).trim();
}

/** Starts the daemon detached (stdio to `<state>/gateway.log`) and waits until it is healthy. */
export async function startDetachedGateway(opts: { stateDir?: string; command?: string[]; args?: string[]; timeoutMs?: number } = {}): Promise<GatewayHandle> {
  const stateDir = opts.stateDir ?? defaultStateDir();
  const layout = new StateLayout(stateDir);
  await fsp.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const [file, ...args] = opts.command ?? defaultGatewayCommand();
  if (!file) throw new GatewayStartError('gateway_start_failed', 'no command to start the gateway daemon with');
  const log = fs.openSync(layout.gatewayLogFile, 'a', 0o600);
  const logStart = fs.fstatSync(log).size;
  let exited: number | null | undefined;
  try {
    const child = spawn(file, [...args, ...(opts.args ?? [])], {
      detached: true,
      stdio: ['ignore', log, log],
      env: { ...process.env, SANDBOX_SESSIONS_STATE_DIR: stateDir },
    });
    child.on('exit', (code) => (exited = code));
    child.on('error', () => (exited = -1));
    child.unref();
  } finally {
    fs.closeSync(log);
  }
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  while (Date.now() < deadline) {
    const found = await findGateway(stateDir);
    if (found) return found;
    if (exited !== undefined && exited !== 0) {
      const text = (await fsp.readFile(layout.gatewayLogFile, 'utf8').catch(() => '')).slice(logStart).trim();
      throw new GatewayStartError('gateway_start_failed', `the gateway daemon exited (code ${exited}): ${text.slice(-2000) || 'no output'}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new GatewayStartError('gateway_start_timeout', `the gateway daemon did not become healthy within ${opts.timeoutMs ?? 15_000} ms; see ${layout.gatewayLogFile}: ${await tail(layout.gatewayLogFile, 500)}`);
}

export interface EnsureGatewayOptions {
  stateDir?: string;
  command?: string[];
  timeoutMs?: number;
  /**
   * The era the daemon must serve: a new daemon is started with `--api <api>`, and a running one
   * of the other era is an error (`gateway_api_mismatch`; use another state dir). Omitted: any
   * running daemon will do, and a new one serves era C.
   */
  api?: GatewayApi;
}

/** The daemon, started detached when none is healthy. */
export async function ensureGateway(opts: EnsureGatewayOptions = {}): Promise<GatewayHandle> {
  const { api, ...rest } = opts;
  const found = (await findGateway(opts.stateDir)) ?? (await startDetachedGateway({ ...rest, args: api ? ['--api', api] : [] }));
  if (api && found.api !== api) {
    throw new GatewayStartError(
      'gateway_api_mismatch',
      `the gateway daemon of ${opts.stateDir ?? defaultStateDir()} (pid ${found.pid}) serves the ${found.api} access API, not ${api}; stop it or use another state dir`,
    );
  }
  return found;
}

/** Stops the daemon with SIGTERM (SIGKILL after `timeoutMs`); false when none was running. */
export async function stopGateway(opts: { stateDir?: string; timeoutMs?: number } = {}): Promise<boolean> {
  const layout = new StateLayout(opts.stateDir ?? defaultStateDir());
  const state = await readGatewayState(layout.gatewayStateFile);
  if (!state || !stateProcessAlive(state)) {
    if (state) await fsp.rm(layout.gatewayStateFile, { force: true });
    return false;
  }
  process.kill(state.pid, 'SIGTERM');
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  while (Date.now() < deadline) {
    if (!stateProcessAlive(state)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (stateProcessAlive(state)) process.kill(state.pid, 'SIGKILL');
  await fsp.rm(layout.gatewayStateFile, { force: true });
  await fsp.rm(layout.gatewayLockFile, { force: true });
  return true;
}
