// The daemon's discovery record, `<state>/gateway.json` (0600): where it listens, its bearer
// token, and who it is (pid + process start time + boot id, so a reused pid is never taken
// for a live daemon), and which access API era it serves (`api`; absent in files of daemons that
// predate it, which served era C). Clients find the daemon only through this file and a /healthz probe.
import fs from 'node:fs/promises';
import http from 'node:http';
import { z } from 'zod';
import { readJsonRecord, writeJsonAtomic } from '../local/atomicFile';
import { bootId, isSameProcessAlive, processStartTime } from '../platform/processIdentity';
import { GatewayApiSchema } from './apiEra';

/** Built on first parse (z.lazy): a zod schema costs start time and heap (issue 25). */
export const GatewayStateSchema = z.lazy(() =>
  z.strictObject({
    version: z.literal(1),
    pid: z.number().int().positive(),
    /** Process start time in clock ticks since boot (/proc/<pid>/stat field 22). */
    startTime: z.string(),
    bootId: z.string(),
    startedAt: z.string(),
    host: z.string(),
    port: z.number().int().min(1).max(65535),
    url: z.string(),
    token: z.string().min(16),
    api: GatewayApiSchema.default('era-c'),
  }),
);
export type GatewayState = z.infer<typeof GatewayStateSchema>;

export async function writeGatewayState(file: string, state: Omit<GatewayState, 'version' | 'pid' | 'startTime' | 'bootId' | 'startedAt'>): Promise<GatewayState> {
  const full: GatewayState = {
    version: 1,
    pid: process.pid,
    startTime: processStartTime(process.pid) ?? 'unknown',
    bootId: bootId(),
    startedAt: new Date().toISOString(),
    ...state,
  };
  await writeJsonAtomic(file, full, 0o600);
  await fs.chmod(file, 0o600);
  return full;
}

export async function readGatewayState(file: string): Promise<GatewayState | undefined> {
  try {
    return await readJsonRecord(file, GatewayStateSchema);
  } catch {
    return undefined; // a damaged state file is treated as absent; the daemon rewrites it
  }
}

export function stateProcessAlive(state: GatewayState): boolean {
  return isSameProcessAlive(state.pid, state.startTime, state.bootId);
}

/**
 * GET /healthz with a short bound (the whole exchange); true on 200. node:http rather than undici:
 * the daemon probes a predecessor at start, and undici would add ~25 MB to its idle RSS (issue 25).
 */
export function probeHealth(url: string, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.get(`${url}/healthz`, { agent: false, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
        res.on('error', () => resolve(false));
        res.on('end', () => resolve(res.statusCode === 200));
        res.resume();
      });
    } catch {
      resolve(false); // not an http: URL
      return;
    }
    req.on('error', () => resolve(false));
  });
}

/** The state of a live daemon process, not probed (its first request will tell), or undefined. */
export async function findLiveGateway(file: string): Promise<GatewayState | undefined> {
  const state = await readGatewayState(file);
  return state && stateProcessAlive(state) ? state : undefined;
}

/** The state of a live, healthy daemon, or undefined. */
export async function findHealthyGateway(file: string): Promise<GatewayState | undefined> {
  const state = await findLiveGateway(file);
  return state && (await probeHealth(state.url)) ? state : undefined;
}
