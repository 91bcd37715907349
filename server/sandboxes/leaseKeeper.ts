// Keeps a Session Run's lease (`mode.session.leaseTimeoutSeconds`) alive from the client side:
// the lease runs on connection heartbeats alone (spec §10.3), so a sandbox created with one
// closes unless someone holds `operations:ws` open and sends `{"type":"heartbeat"}` every
// lease/3 (0.1–30 s, as the kruntimes SDKs do). The heartbeats go over this process's one
// shared Session connection to the sandbox (protocol/kruntimes/sessionConnection.ts — the same
// socket its commands use on era D), which reconnects with backoff when it drops (each
// reconnect renews the lease too). The keeper gives up — reporting through `onLost` — only when
// the gateway refuses the upgrade for good (401/403: bad token, no access; 404/409: gone, not
// Ready — those only once they persist for `refusalGraceMs`, since a kruntimes gateway's
// informer cache can lag just after Ready or a restart, spec §7.12).
import type { GatewayError } from '../../protocol/kruntimes/gatewayErrors';
import { gatewayTlsOptions } from '../../protocol/kruntimes/gatewayTls';
import { heartbeatIntervalMs } from '../../protocol/kruntimes/sessionConnection';
import { acquireSessionConnection } from '../../protocol/kruntimes/sessionConnectionPool';
import { sessionSocketUrl as socketUrlOf } from '../../protocol/kruntimes/sessionFrames';
import { SandboxSessionsError } from '../../protocol/errors';

export { heartbeatIntervalMs };

export interface HoldLeaseOptions {
  /** The Run's `status.endpoint.url` (http or https; its path is kept). */
  endpointUrl: string;
  token: string;
  /** The Run's `status.endpoint.caBundle`: base64 of PEM, or PEM itself. */
  caBundle?: string;
  servername?: string;
  rejectUnauthorized?: boolean;
  leaseTimeoutSeconds: number;
  /** How long 404/409 refusals must persist before they count as final (default 3 s; 0: at once). */
  refusalGraceMs?: number;
  /** Called once when the lease cannot be held any more (the keeper has stopped by then). */
  onLost?: (err: LeaseLostError) => void;
  log?: (line: string) => void;
}

export interface LeaseHold {
  /** Stops the heartbeats (the shared connection closes once nothing else uses it); the Run's lease then runs out. Idempotent. */
  stop(): Promise<void>;
}

export type LeaseLostCode = 'unauthenticated' | 'forbidden' | 'not_found' | 'not_ready';

/** The gateway refused the connection for good; `message` is the gateway's `error` text. */
export class LeaseLostError extends SandboxSessionsError<LeaseLostCode> {
  override readonly name = 'LeaseLostError';
  readonly service = 'lease';
  constructor(
    code: LeaseLostCode,
    readonly status: number,
    message: string,
  ) {
    super(code, message);
  }
}

/** A call the keeper cannot make at all (bad endpoint URL or lease). */
export class LeaseKeeperUsageError extends SandboxSessionsError<'invalid_argument'> {
  override readonly name = 'LeaseKeeperUsageError';
  readonly service = 'lease';
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

const LOST_CODES: Record<number, LeaseLostCode> = { 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found', 409: 'not_ready' };

/** `http(s)://host/…/sessions/{uid}` → `ws(s)://host/…/sessions/{uid}/operations:ws`. */
export function sessionSocketUrl(endpointUrl: string): string {
  let url: URL;
  try {
    url = new URL(endpointUrl);
  } catch {
    throw new LeaseKeeperUsageError(`invalid gateway endpoint URL: ${endpointUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new LeaseKeeperUsageError(`gateway endpoint must be http or https: ${endpointUrl}`);
  return socketUrlOf(endpointUrl);
}

/** Holds the lease until `stop()` or until the gateway refuses the connection for good. */
export function holdLease(opts: HoldLeaseOptions): LeaseHold {
  if (!Number.isFinite(opts.leaseTimeoutSeconds) || opts.leaseTimeoutSeconds <= 0) {
    throw new LeaseKeeperUsageError(`leaseTimeoutSeconds must be a positive number, not ${opts.leaseTimeoutSeconds}`);
  }
  const url = sessionSocketUrl(opts.endpointUrl);
  const ref = acquireSessionConnection({
    endpointUrl: opts.endpointUrl,
    token: opts.token,
    tls: gatewayTlsOptions(opts.caBundle, { ...(opts.servername ? { servername: opts.servername } : {}), ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}) }),
  });
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    hold.release();
    ref.release();
  };
  const hold = ref.connection.holdLease(opts.leaseTimeoutSeconds, {
    ...(opts.refusalGraceMs !== undefined ? { refusalGraceMs: opts.refusalGraceMs } : {}),
    log: (line) => opts.log?.(`lease keeper ${url}: ${line}`),
    onLost: (err: GatewayError) => {
      stop();
      opts.onLost?.(new LeaseLostError(LOST_CODES[err.status] ?? 'not_ready', err.status, err.message));
    },
  });
  return {
    stop: () => {
      stop();
      return Promise.resolve();
    },
  };
}
