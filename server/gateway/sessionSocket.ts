// `GET P/operations:ws` as era D serves it (spec §10.4–§10.7; the era-C §2.12 socket closed
// with 1011 after any error, and no era-C client uses the socket, §10.10): the persistent
// Session connection. Before the upgrade: the handshake checks kruntimes makes (426 without a
// WebSocket upgrade, the version, a same-origin `Origin` when one is sent, the key), answered as
// plain HTTP errors with the JSON error body. After it: client JSON text frames `send` /
// `cancel` / `heartbeat`, one operation at a time, server frames that are the §10.5 event
// objects, and the session lease renewed on open and by every heartbeat. Errors are
// `{"type":"error","error":…}` frames that leave the socket open; only protocol violations close
// it (1008); the library closes with 1009 for an oversized client frame.
import { randomBytes } from 'node:crypto';
import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import {
  GatewayMessages,
  JSON_CONTENT_TYPE,
  checkIdempotencyKey,
  operationKind,
  type SessionOperation,
} from '../../protocol/kruntimes/gateway';
import { isValidOperationId } from '../local/execRecord';
import type { LocalSession } from '../local/localSession';
import { SessionError } from '../local/sessionError';
import { goJsonBytes } from './httpBodies';
import { decodeOperation } from './operationDecode';
import { produceOperationEvents, type OperationEvent } from './operationEvents';

export const SocketMessages = {
  upgradeRequired: 'WebSocket upgrade is required',
  upgradeOnlyOnWs: 'WebSocket upgrade is served only on operations:ws',
  connectionLimit: 'gateway Session connection limit reached',
  unsupportedVersion: "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header",
  originNotAllowed: 'websocket: request origin not allowed by Upgrader.CheckOrigin',
  badKey: "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header must be Base64 encoded value of 16-byte in length",
  invalidFrame: 'valid Session frame is required',
  onlyActiveCancel: 'only cancellation of the active operation is allowed',
  eventTooLarge: 'gateway stream event exceeds configured limit',
  contextCanceled: 'context canceled',
  noActiveOperation: 'no active Session operation to cancel',
} as const;

/** WebSocket close codes used here (RFC 6455 §7.4.1). */
export const CloseCode = { policyViolation: 1008 } as const;

// ---- before the upgrade ---------------------------------------------------------------------

function headerTokens(value: string | string[] | undefined): string[] {
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return text.split(',').map((t) => t.trim().toLowerCase());
}

/** Connection: upgrade and Upgrade: websocket (tokens, case-insensitive), as Go's IsWebSocketUpgrade. */
export function isWebSocketUpgrade(headers: IncomingHttpHeaders): boolean {
  return headerTokens(headers.connection).includes('upgrade') && headerTokens(headers.upgrade).includes('websocket');
}

/** An `Origin`, when present, must be an http(s) origin naming the request's own Host. */
export function sameOrigin(headers: IncomingHttpHeaders): boolean {
  const origin = headers.origin;
  if (origin === undefined || origin === '') return true;
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return false;
  }
  return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.host.toLowerCase() === (headers.host ?? '').toLowerCase();
}

export interface UpgradeProblem {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** Why a (route-checked, authorized) request cannot become a Session connection, if it cannot. */
export function upgradeProblem(headers: IncomingHttpHeaders): UpgradeProblem | undefined {
  if (!isWebSocketUpgrade(headers)) return { status: 426, message: SocketMessages.upgradeRequired, headers: { Upgrade: 'websocket' } };
  if (!headerTokens(headers['sec-websocket-version']).includes('13')) {
    return { status: 400, message: SocketMessages.unsupportedVersion, headers: { 'Sec-WebSocket-Version': '13' } };
  }
  if (!sameOrigin(headers)) return { status: 403, message: SocketMessages.originNotAllowed };
  const key = headers['sec-websocket-key']?.trim() ?? '';
  if (!/^[A-Za-z0-9+/]{22}==$/.test(key)) return { status: 400, message: SocketMessages.badKey };
  return undefined;
}

/** Answers an upgrade request on its raw socket with an HTTP error and the JSON error body. */
export function rejectUpgrade(socket: Duplex, status: number, message: string, headers: Record<string, string> = {}): void {
  if (socket.destroyed) return;
  const body = goJsonBytes({ error: message });
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    `Content-Type: ${JSON_CONTENT_TYPE}`,
    `Content-Length: ${body.length}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), body]));
}

// ---- after the upgrade ----------------------------------------------------------------------

/**
 * A client frame as Go decodes it into `sessionConnectionMessage` (unknown keys refused; a null
 * string field is the empty string; `operation` is raw JSON, so any value, even null, is
 * "present"), then the per-type rules of spec §10.4.
 */
const RawClientFrameSchema = z.lazy(() =>
  z.strictObject({
    type: z.string().nullish(),
    idempotencyKey: z.string().nullish(),
    operation: z.unknown().optional(),
    operationID: z.string().nullish(),
  }),
);
type ClientFrame =
  | { type: 'send'; idempotencyKey: string; operation: unknown }
  | { type: 'cancel'; operationID: string }
  | { type: 'heartbeat' };

export interface SessionSocketOptions {
  session: LocalSession;
  /** The response limit: an event frame above it ends the operation with an `error` frame. */
  maxFrameBytes: number;
}

/** A close reason fits in 123 bytes (RFC 6455 §5.5). */
function closeReason(message: string): string {
  let reason = message;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1);
  return reason;
}

function newOperationId(): string {
  return randomBytes(16).toString('hex');
}

export class SessionSocket {
  private active: { id: string; controller: AbortController } | undefined;
  private closing = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly opts: SessionSocketOptions,
  ) {}

  /** Renews the lease (opening counts as a heartbeat) and starts reading frames. */
  start(): void {
    // Errors of the connection itself: ws closes it (1009 for an oversized frame, 1002 for a
    // protocol error) and emits 'close'; terminating here would cut off that close frame.
    this.ws.on('error', () => undefined);
    this.ws.on('close', () => {
      this.closing = true;
      // The client went away: its operation is cancelled, as an aborted NDJSON stream is.
      this.endActive();
    });
    this.ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    this.heartbeat();
  }

  /**
   * Renews the lease. A failure is an `error` frame; it also ends a running operation (the
   * socket stays open), and while idle the connection drops without a close frame (1006).
   */
  private heartbeat(): void {
    try {
      this.opts.session.renewLease();
    } catch (err) {
      if (this.active) return this.errorFrame((err as Error).message);
      this.errorFrame((err as Error).message, { thenDrop: true });
    }
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closing) return;
    const frame = isBinary ? undefined : parseFrame(data);
    if (this.active) {
      if (frame?.type === 'heartbeat') return this.heartbeat();
      if (frame?.type !== 'cancel' || frame.operationID !== this.active.id) return this.violation(SocketMessages.onlyActiveCancel);
      // Not acknowledged by an event: the stream fails as a cancelled gRPC stream does.
      return this.errorFrame(SocketMessages.contextCanceled);
    }
    if (frame === undefined) return this.violation(SocketMessages.invalidFrame);
    switch (frame.type) {
      case 'heartbeat':
        return this.heartbeat();
      case 'cancel':
        return this.errorFrame(SocketMessages.noActiveOperation);
      case 'send':
        return this.send(frame);
    }
  }

  private send(frame: Extract<ClientFrame, { type: 'send' }>): void {
    let operationId: string;
    let op: SessionOperation;
    try {
      op = decodeOperation(Buffer.from(JSON.stringify(frame.operation), 'utf8'));
      if (operationKind(op) === undefined) throw new SessionError('InvalidArgument', GatewayMessages.exactlyOneOperation);
      operationId = frame.idempotencyKey || newOperationId();
      const problem = checkIdempotencyKey(operationId) ?? (isValidOperationId(operationId) ? undefined : GatewayMessages.idempotencyKeyCharacters);
      if (problem) throw new SessionError('InvalidArgument', problem);
    } catch (err) {
      return this.violation((err as Error).message);
    }
    const controller = new AbortController();
    const current = { id: operationId, controller };
    this.active = current;
    const emit = (event: OperationEvent): void => {
      if (this.active !== current || this.closing) return;
      const encoded = goJsonBytes(event);
      const frameBytes = encoded.subarray(0, encoded.length - 1); // one JSON value per frame, no newline
      if (frameBytes.length > this.opts.maxFrameBytes) return this.errorFrame(SocketMessages.eventTooLarge);
      if (event.type === 'completed' || event.type === 'failed') this.active = undefined; // the next send may follow
      this.ws.send(frameBytes, { binary: false });
    };
    produceOperationEvents(this.opts.session, op, { operationId, signal: controller.signal }, emit).catch((err: unknown) => {
      // Refused before `accepted` (queue full, finalizing, key in use…): an error frame.
      if (this.active === current) this.errorFrame((err as Error).message);
    });
  }

  /** Cancels the running operation, if any (its later events are dropped). */
  private endActive(): void {
    const active = this.active;
    this.active = undefined;
    active?.controller.abort();
  }

  /** A protocol violation: close 1008 with the reason (an active operation is cancelled). */
  private violation(message: string): void {
    if (this.closing) return;
    this.closing = true;
    this.endActive();
    this.ws.close(CloseCode.policyViolation, closeReason(message));
  }

  /**
   * An error after the upgrade (era D, spec §10.5): an `error` frame that ends the running
   * operation, if any; the socket stays open and accepts the next `send` — unless `thenDrop`,
   * when the connection ends without a close frame (the client sees 1006) once the frame is out.
   */
  private errorFrame(message: string, opts: { thenDrop?: boolean } = {}): void {
    if (this.closing) return;
    this.endActive();
    if (opts.thenDrop) this.closing = true;
    this.ws.send(goJsonBytes({ type: 'error', error: message }), { binary: false }, () => {
      if (opts.thenDrop) this.ws.terminate();
    });
  }
}

function parseFrame(data: RawData): ClientFrame | undefined {
  const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = RawClientFrameSchema.safeParse(value);
  if (!parsed.success) return undefined;
  const { type, operation } = parsed.data;
  const key = parsed.data.idempotencyKey ?? '';
  const id = parsed.data.operationID ?? '';
  const hasOperation = operation !== undefined;
  switch (type) {
    case 'heartbeat':
      return id === '' && key === '' && !hasOperation ? { type } : undefined;
    case 'send':
      return hasOperation && id === '' ? { type, idempotencyKey: key, operation } : undefined;
    case 'cancel':
      return id !== '' && key === '' && !hasOperation ? { type, operationID: id } : undefined;
    default:
      return undefined;
  }
}
