// The one error type every repository operation throws, with the spec's stable codes (§9.2), so
// callers (CLI, JSON-RPC, activation) can branch on `code` and show `message` to a person.
import type { SessionRepositoryErrorCode, SessionRepositoryErrorPayload } from '../../protocol/repository';
import { SandboxSessionsError } from '../../protocol/errors';

export class SessionRepositoryError extends SandboxSessionsError<SessionRepositoryErrorCode> {
  override readonly name = 'SessionRepositoryError';
  readonly service = 'repository';
  constructor(code: SessionRepositoryErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }

  toPayload(): SessionRepositoryErrorPayload {
    return { name: 'SessionRepositoryError', code: this.code, message: this.message };
  }
}

export function isSessionRepositoryError(err: unknown, code?: SessionRepositoryErrorCode): err is SessionRepositoryError {
  return err instanceof SessionRepositoryError && (code === undefined || err.code === code);
}

/**
 * Anything that is not already a SessionRepositoryError (or a programmer error: TypeError /
 * RangeError) becomes `io_failure`, keeping the original as `cause` and its text in the message.
 */
export function toRepositoryError(err: unknown, doing: string): Error {
  if (err instanceof SessionRepositoryError || err instanceof TypeError || err instanceof RangeError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new SessionRepositoryError('io_failure', `${doing} failed: ${detail}`, { cause: err });
}
