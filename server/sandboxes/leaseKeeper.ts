// Keeps a Session Run's lease (`mode.session.leaseTimeoutSeconds`) alive from the client side:
// the lease runs on connection heartbeats alone (spec §1.2, §2.12), so a sandbox created with
// one closes unless someone holds `operations:ws` open. The keeper opens it (bearer token, no
// Origin, TLS with the Run's CA bundle), sends `{"type":"heartbeat"}` every lease/3 (0.1–30 s,
// as the kruntimes SDKs do), reconnects with backoff when the connection drops (each
// reconnect renews the lease too), and gives up — reporting through `onLost` — only when the
// gateway refuses the upgrade for good (401/403: bad token, no access; 404/409: gone, not Ready —
// those only once they persist for `refusalGraceMs`, since a kruntimes gateway's informer cache
// can lag just after Ready or a restart, spec §7.12).
import { WebSocket, type RawData } from 'ws';
import { z } from 'zod';

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
  /** Closes the connection and stops heartbeats; the Run's lease then runs out. Idempotent. */
  stop(): Promise<void>;
}

export type LeaseLostCode = 'unauthenticated' | 'forbidden' | 'not_found' | 'not_ready';

/** The gateway refused the connection for good; `message` is the gateway's `error` text. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly code: LeaseLostCode,
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A call the keeper cannot make at all (bad endpoint URL or lease). */
export class LeaseKeeperUsageError extends Error {
  override readonly name = 'LeaseKeeperUsageError';
  readonly code = 'invalid_argument';
}

const FINAL_STATUSES: Record<number, LeaseLostCode> = { 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found', 409: 'not_ready' };
const ErrorBodySchema = z.object({ error: z.string() });
const ServerErrorFrameSchema = z.looseObject({ type: z.literal('error'), error: z.string() });

/** lease/3, clamped to 0.1–30 s. */
export function heartbeatIntervalMs(leaseTimeoutSeconds: number): number {
  return Math.min(Math.max((leaseTimeoutSeconds * 1000) / 3, 100), 30_000);
}

/** `http(s)://host/…/sessions/{uid}` → `ws(s)://host/…/sessions/{uid}/operations:ws`. */
export function sessionSocketUrl(endpointUrl: string): string {
  let url: URL;
  try {
    url = new URL(endpointUrl);
  } catch {
    throw new LeaseKeeperUsageError(`invalid gateway endpoint URL: ${endpointUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new LeaseKeeperUsageError(`gateway endpoint must be http or https: ${endpointUrl}`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/operations:ws`;
  url.search = '';
  url.hash = '';
  return url.toString();
}

function decodeCaBundle(caBundle: string): string {
  const trimmed = caBundle.trim();
  return trimmed.startsWith('-----BEGIN') ? trimmed : Buffer.from(trimmed, 'base64').toString('utf8');
}

function rawText(data: RawData): string {
  const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
  return bytes.toString('utf8');
}

/** Holds the lease until `stop()` or until the gateway refuses the connection for good. */
export function holdLease(opts: HoldLeaseOptions): LeaseHold {
  if (!Number.isFinite(opts.leaseTimeoutSeconds) || opts.leaseTimeoutSeconds <= 0) {
    throw new LeaseKeeperUsageError(`leaseTimeoutSeconds must be a positive number, not ${opts.leaseTimeoutSeconds}`);
  }
  const url = sessionSocketUrl(opts.endpointUrl);
  const interval = heartbeatIntervalMs(opts.leaseTimeoutSeconds);
  // Reconnect quickly at first, never waiting longer than a third of the lease (or 5 s).
  const minBackoff = 100;
  const maxBackoff = Math.max(minBackoff, Math.min(interval, 5_000));
  // A connection that answers no ping for this long is dead even if TCP has not noticed.
  const silenceLimit = Math.max(3 * interval, 5_000);
  const ca = opts.caBundle ? decodeCaBundle(opts.caBundle) : undefined;
  const log = (line: string): void => opts.log?.(`lease keeper ${url}: ${line}`);
  const refusalGraceMs = opts.refusalGraceMs ?? 3_000;
  let refusedSince: number | undefined; // the first of a run of 404/409 refusals

  let stopped = false;
  let socket: WebSocket | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let backoff = minBackoff;

  const clearTimers = (): void => {
    if (ticker) clearInterval(ticker);
    if (retry) clearTimeout(retry);
    ticker = retry = undefined;
  };

  const lose = (err: LeaseLostError): void => {
    if (stopped) return;
    stopped = true;
    clearTimers();
    log(`lost: ${err.message} (HTTP ${err.status})`);
    opts.onLost?.(err);
  };

  const scheduleReconnect = (why: string): void => {
    if (stopped || retry) return;
    log(`reconnecting in ${backoff} ms (${why})`);
    retry = setTimeout(() => {
      retry = undefined;
      connect();
    }, backoff);
    backoff = Math.min(backoff * 2, maxBackoff);
  };

  const connect = (): void => {
    if (stopped) return;
    const ws = new WebSocket(url, {
      headers: { Authorization: `Bearer ${opts.token}` },
      handshakeTimeout: 10_000,
      perMessageDeflate: false,
      ...(ca ? { ca } : {}),
      ...(opts.servername ? { servername: opts.servername } : {}),
      ...(opts.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
    });
    socket = ws;
    let done = false; // this attempt has ended (refused, closed or failed)
    let lastPong = Date.now();
    const ended = (why: string): void => {
      if (done) return;
      done = true;
      if (ticker) clearInterval(ticker);
      ticker = undefined;
      if (socket === ws) socket = undefined;
      scheduleReconnect(why);
    };
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const body = ErrorBodySchema.safeParse(safeJson(Buffer.concat(chunks).toString('utf8')));
        const message = body.success ? body.data.error : `the gateway answered HTTP ${status} to the WebSocket upgrade`;
        const code = FINAL_STATUSES[status];
        const now = Date.now();
        if (code && (status === 401 || status === 403 || now - (refusedSince ??= now) >= refusalGraceMs)) {
          done = true;
          lose(new LeaseLostError(code, status, message));
        } else {
          ended(`upgrade refused with HTTP ${status}: ${message}`);
        }
        ws.terminate(); // ends the handshake; its error and close events find this attempt done
      });
      res.on('error', () => {
        ended('upgrade response failed');
        ws.terminate();
      });
    });
    ws.on('open', () => {
      backoff = minBackoff;
      refusedSince = undefined;
      lastPong = Date.now();
      log('connected');
      ticker = setInterval(() => {
        if (ws.readyState !== WebSocket.OPEN) return;
        if (Date.now() - lastPong > silenceLimit) {
          ws.terminate();
          return;
        }
        ws.send('{"type":"heartbeat"}');
        ws.ping();
      }, interval);
    });
    ws.on('pong', () => {
      lastPong = Date.now();
    });
    ws.on('message', (data) => {
      const frame = ServerErrorFrameSchema.safeParse(safeJson(rawText(data)));
      if (frame.success) log(`gateway error: ${frame.data.error}`);
    });
    ws.on('close', (code, reason) => ended(`closed with ${code}${reason.length > 0 ? ` ${reason.toString('utf8')}` : ''}`));
    ws.on('error', (err) => ended(err.message));
  };

  connect();

  let stopping: Promise<void> | undefined;
  return {
    stop: () =>
      (stopping ??= (async () => {
        stopped = true;
        clearTimers();
        const ws = socket;
        socket = undefined;
        if (!ws || ws.readyState === WebSocket.CLOSED) return;
        if (ws.readyState === WebSocket.CONNECTING) {
          ws.terminate();
          return;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            ws.terminate();
            resolve();
          }, 2_000);
          ws.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
          ws.close(1000);
        });
      })()),
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
