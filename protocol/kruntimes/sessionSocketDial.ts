// Opening the era-D `operations:ws` socket (spec §10.4): the upgrade with its bearer token, frame cap and CA
// bundle, and the one outcome of each attempt — open, refused with an HTTP answer, or unreachable — reported
// exactly once. Apart from SessionConnection, which decides what each outcome means for its queue and leases.
import { WebSocket, type RawData } from 'ws';
import { ErrorBodySchema, GatewayLimits } from './gateway';
import { GatewayError } from './gatewayErrors';
import type { GatewayTlsOptions } from './gatewayTls';
import { type ServerFrame, ServerFrameSchema, sessionSocketUrl } from './sessionFrames';

const MAX_UPGRADE_BODY_BYTES = 64 * 1024;
const DEFAULT_MAX_SERVER_FRAME_BYTES = GatewayLimits.maxResponseBodyBytes + 64 * 1024;

export interface SessionConnectionOptions {
  /** The Run's `status.endpoint.url` (http or https, ending in `sessions/<uid>`). */
  endpointUrl: string;
  token?: string | undefined;
  tls?: GatewayTlsOptions | undefined;
  /** Client frame cap: the gateway's read limit (1 MiB) closes with 1009 above it. */
  maxClientFrameBytes?: number | undefined;
  /** Largest server frame accepted (the gateway's 1 MiB response limit plus headroom). */
  maxServerFrameBytes?: number | undefined;
  handshakeTimeoutMs?: number | undefined;
  /** Upgrades answered 429 are retried this many times with jittered backoff (default 5). */
  maxUpgradeRetries?: number | undefined;
  /**
   * Ping period of an open socket (default 15 s; the lease heartbeat period while one is held).
   * A socket that answers no ping for three periods (at least 5 s) is dropped, so a dead
   * connection — a NAT or proxy that forgot it — fails the operation on it instead of hanging.
   */
  keepAliveMs?: number | undefined;
}

/** What one upgrade attempt needs, resolved from a SessionConnection's options. */

export interface DialOptions {
  url: string;
  headers: Record<string, string>;
  handshakeTimeoutMs: number;
  maxServerFrameBytes: number;
  tls: GatewayTlsOptions | undefined;
}

export function dialOptions(opts: SessionConnectionOptions): DialOptions {
  return {
    url: sessionSocketUrl(opts.endpointUrl),
    headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {},
    handshakeTimeoutMs: opts.handshakeTimeoutMs ?? 10_000,
    maxServerFrameBytes: opts.maxServerFrameBytes ?? DEFAULT_MAX_SERVER_FRAME_BYTES,
    tls: opts.tls,
  };
}

export interface DialHandlers {
  /** The upgrade succeeded: the socket is open. */
  open(ws: WebSocket): void;
  /** The upgrade was answered with an HTTP error (its body, capped). */
  refused(status: number, body: string): void;
  /** The gateway could not be reached, or the upgrade broke off (nothing was sent). */
  unreachable(err: Error): void;
  /** A server frame, parsed. */
  frame(ws: WebSocket, frame: ServerFrame): void;
  /** A frame that is binary, not JSON or not a Session frame (the socket should be dropped). */
  invalidFrame(ws: WebSocket, message: string): void;
  pong(): void;
  /** The socket closed after it had opened. */
  closed(ws: WebSocket, code: number, reason: string, lastError: Error | undefined): void;
}

/** Starts one upgrade attempt; exactly one of `open`, `refused` or `unreachable` follows. */
export function dialSessionSocket(options: DialOptions, on: DialHandlers): WebSocket {
  const ws = new WebSocket(options.url, {
    headers: options.headers,
    handshakeTimeout: options.handshakeTimeoutMs,
    perMessageDeflate: false,
    maxPayload: options.maxServerFrameBytes,
    ...options.tls,
  });
  let settled = false; // the attempt has been accounted for (opened, refused or failed)
  ws.on('unexpected-response', (_req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_UPGRADE_BODY_BYTES) chunks.push(c);
    });
    res.on('end', () => {
      if (settled) return;
      settled = true;
      ws.terminate();
      on.refused(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
    });
    res.on('error', () => {
      if (settled) return;
      settled = true;
      ws.terminate();
      on.unreachable(new Error(`the upgrade answer (HTTP ${res.statusCode ?? 0}) broke off`));
    });
  });
  let lastError: Error | undefined;
  ws.on('error', (err) => (lastError = err));
  ws.on('open', () => {
    settled = true;
    on.open(ws);
  });
  ws.on('pong', () => on.pong());
  ws.on('message', (data, isBinary) => {
    let frame: ServerFrame;
    try {
      if (isBinary) throw new Error('a binary frame');
      frame = ServerFrameSchema.parse(JSON.parse(frameText(data)));
    } catch (err) {
      return on.invalidFrame(ws, `the gateway sent an invalid Session frame (${(err as Error).message.slice(0, 200)})`);
    }
    on.frame(ws, frame);
  });
  ws.on('close', (code, reason) => {
    if (!settled) {
      settled = true;
      on.unreachable(lastError ?? new Error(`closed with ${code} during the upgrade`));
      return;
    }
    on.closed(ws, code, reason.toString('utf8'), lastError);
  });
  return ws;
}

/** The GatewayError a refused upgrade stands for: the JSON `error` of its body, else its text, else the status. */
export function upgradeRefusal(status: number, body: string): GatewayError {
  let message = body.trim() || `HTTP ${status}`;
  try {
    const parsed = ErrorBodySchema.safeParse(JSON.parse(body));
    if (parsed.success) message = parsed.data.error;
  } catch {
    // not JSON: keep the text
  }
  return new GatewayError(status, message);
}

function frameText(data: RawData): string {
  const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
  return bytes.toString('utf8');
}
