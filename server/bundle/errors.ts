// Typed failures of the Session Bundle codec and of the workspace snapshot step. Every failure carries one
// stable code (spec §7 / §13) and frozen, bounded details — never a raw path, never a parser's message —
// so callers can branch on `code` and show the message to people safely.
import type {
  SessionBundleErrorCode,
  SessionBundleErrorDetails,
  SessionBundleOperation,
  SessionSnapshotErrorCode,
} from '../../protocol/bundle';
import { SandboxSessionsError } from '../../protocol/errors';

export class SessionBundleError extends SandboxSessionsError<SessionBundleErrorCode> {
  override readonly name = 'SessionBundleError';
  readonly service = 'bundle';
  declare readonly details: Readonly<SessionBundleErrorDetails> | undefined;

  constructor(code: SessionBundleErrorCode, message: string, details?: SessionBundleErrorDetails) {
    super(code, message, { details: details === undefined ? undefined : Object.freeze(boundedDetails(details)) });
  }
}

/** Keep only the known keys with the right types, so nothing unbounded can ride along. */
function boundedDetails(details: SessionBundleErrorDetails): SessionBundleErrorDetails {
  const out: SessionBundleErrorDetails = {};
  if (details.operation !== undefined) out.operation = details.operation;
  if (details.quota !== undefined) out.quota = details.quota;
  for (const key of ['limit', 'observed', 'entryIndex', 'pathDepth'] as const) {
    const value = details[key];
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) out[key] = value;
  }
  return out;
}

export function isSessionBundleError(err: unknown, code?: SessionBundleErrorCode): err is SessionBundleError {
  return err instanceof SessionBundleError && (code === undefined || err.code === code);
}

/**
 * `identity_mismatch` in words (hydrate, and a repository commit): which session the bundle is packed for and which
 * one was expected. Session ids are identifiers, not paths; quoted, so a control character in one shows as an escape.
 */
export function identityMismatchMessage(found: string, expected: string): string {
  return (
    `the bundle belongs to session ${JSON.stringify(found)}, not to the expected session ${JSON.stringify(expected)}; ` +
    `use it as ${JSON.stringify(found)}, or pack it again with session id ${JSON.stringify(expected)}`
  );
}

function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') {
    return /^E[A-Z0-9]+$/.test(err.code) ? err.code : undefined;
  }
  return undefined;
}

/**
 * Map anything thrown inside an operation to a SessionBundleError (spec §7): an errno-bearing failure is
 * `io_failure` naming the errno only; on the read path anything else is a broken compressed stream
 * (`integrity_mismatch`, the decoder's text is not exposed); elsewhere it is `io_failure`.
 * Input validation runs before an operation starts and throws TypeError/RangeError, which never get here.
 */
export function toSessionBundleError(err: unknown, operation: SessionBundleOperation, readPath = false): SessionBundleError {
  if (err instanceof SessionBundleError) {
    if (err.details?.operation !== undefined) return err;
    const withOperation = new SessionBundleError(err.code, err.message, { ...err.details, operation });
    withOperation.stack = err.stack;
    return withOperation;
  }
  const errno = errnoCode(err);
  if (errno === undefined && readPath) {
    return new SessionBundleError('integrity_mismatch', 'compressed stream is invalid or truncated', { operation });
  }
  return new SessionBundleError('io_failure', `${operation} failed: file system error ${errno ?? '(no errno)'}`, { operation });
}

/** Failures of the snapshot step (§13). `path` is workspace-relative and shown to people on purpose. */
export class SessionSnapshotError extends SandboxSessionsError<SessionSnapshotErrorCode> {
  override readonly name = 'SessionSnapshotError';
  readonly service = 'snapshot';
  readonly path: string | undefined;

  constructor(code: SessionSnapshotErrorCode, message: string, path?: string) {
    super(code, message);
    this.path = path;
  }
}
