// The frames of an era-D Session connection (`operations:ws`, spec §10.4–§10.5): what a client
// sends (`send`, `cancel`, `heartbeat` as JSON text frames), what the gateway answers (the
// §2.10 event objects, one per frame, or `{"type":"error","error":…}` which ends the current
// operation but not the socket), and the texts a client has to recognise.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { checkIdempotencyKey, GatewayMessages, type SessionOperation, StreamEventSchema } from './gateway';

export const ErrorFrameSchema = z.looseObject({ type: z.literal('error'), error: z.string() });
export type ErrorFrame = z.infer<typeof ErrorFrameSchema>;

export const ServerFrameSchema = z.union([StreamEventSchema, ErrorFrameSchema]);
export type ServerFrame = z.infer<typeof ServerFrameSchema>;

export type ClientFrame =
  | { type: 'send'; idempotencyKey: string; operation: SessionOperation }
  | { type: 'cancel'; operationID: string }
  | { type: 'heartbeat' };

export const SessionFrameMessages = {
  /** An error frame for a `cancel` that arrived when nothing ran (era D keeps the socket). */
  noActiveOperation: 'no active Session operation to cancel',
  /** 429 on the upgrade when the Console's Session connection cap is reached. */
  connectionLimit: 'gateway Session connection limit reached',
} as const;

/** RFC 6455 close codes the gateway (or its library) sends. */
export const SessionCloseCode = { policyViolation: 1008, messageTooBig: 1009 } as const;

/** 16 random bytes as 32 lowercase hex characters, as the gateway generates when none is sent. */
export function newIdempotencyKey(): string {
  return randomBytes(16).toString('hex');
}

/** Why a key cannot be sent (≤ 128 bytes of `[A-Za-z0-9._-]`, non-empty), or undefined. */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key === '') return 'idempotency key must not be empty';
  return checkIdempotencyKey(key);
}

/** `http(s)://host/…/sessions/{uid}` → `ws(s)://host/…/sessions/{uid}/operations:ws`. */
export function sessionSocketUrl(endpointUrl: string): string {
  const url = new URL(endpointUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/operations:ws`;
  url.search = '';
  url.hash = '';
  return url.toString();
}

const INVALID_ARGUMENT_MESSAGES: ReadonlySet<string> = new Set([
  GatewayMessages.exactlyOneOperation,
  GatewayMessages.exactlyOneArgvOrShell,
  GatewayMessages.pathRequired,
  GatewayMessages.pathRelative,
  GatewayMessages.pathEscape,
  GatewayMessages.pathSymlinkEscape,
  GatewayMessages.pathRoot,
  GatewayMessages.idempotencyKeyTooLong,
  GatewayMessages.idempotencyKeyCharacters,
]);

/**
 * The HTTP status an era-C gateway would have answered for the gRPC error an era-D error frame
 * carries (spec §2.3), so callers that act on `GatewayError.status` (queue full → 429, not
 * Ready / finalizing → 409) behave the same on both eras. Unknown texts map to 500, as
 * writeGatewayError does for everything it does not name.
 */
export function statusForErrorFrame(message: string): number {
  if (INVALID_ARGUMENT_MESSAGES.has(message)) return 400;
  if (message === GatewayMessages.queueFull || message === SessionFrameMessages.connectionLimit) return 429;
  if (message === GatewayMessages.finalizing || /^Session Run is .*, not Ready$/.test(message)) return 409;
  if (message === GatewayMessages.sessionNotFound || message === GatewayMessages.sessionRunNotFound) return 404;
  if (message === GatewayMessages.deadlineExceeded) return 504;
  if (message === GatewayMessages.responseTooLarge || message === 'gateway stream event exceeds configured limit') return 413;
  return 500;
}
