// What an activation attempt returns, and the identifiers it derives: the committed result (stored outcome, also
// for a deduplicated retry), the not-committed result with a stable code, the mapping of whatever failed to that
// code, and the deterministic digests and commitIds (a retry of a pending commit reuses its commitId).
import { createHash } from 'node:crypto';
import { ActivationOutcomeEventSchema, type ActivationResult, type ActivationRunRequest } from '../../protocol/activation';
import { SessionBundleError, SessionSnapshotError } from '../bundle';
import { SessionRepositoryError } from '../repository/errors';
import type { ActivationRecord } from '../repository/records';
import { ActivationError, isActivationError } from './errors';

export function sha256(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

/** The deterministic commitId of one attempt (a retry of a pending commit reuses it). */
export function commitIdFor(sessionId: string, activationId: string, attempt: number): string {
  return `activation-${createHash('sha256').update(`${sessionId}\u0000${activationId}\u0000${attempt}`).digest('hex').slice(0, 40)}`;
}

export function notCommitted(request: ActivationRunRequest, code: ActivationError['code'], message: string, attempt?: number): ActivationResult {
  return {
    sessionId: request.sessionId,
    activationId: request.activationId,
    commit: 'not_committed',
    error: { code, message },
    deduplicated: false,
    ...(attempt !== undefined ? { attempt } : {}),
  };
}

export function committedResult(record: ActivationRecord, deduplicated: boolean): ActivationResult {
  const outcome = ActivationOutcomeEventSchema.parse(record.outcome);
  return {
    sessionId: record.sessionId,
    activationId: record.activationId,
    commit: 'committed',
    ...(record.revision !== undefined ? { revision: record.revision } : {}),
    outcome,
    deduplicated,
    attempt: record.attempt,
  };
}

/** Maps whatever failed during a run to a stable code (not committed). */
export function classify(err: unknown): ActivationError {
  if (isActivationError(err)) return err;
  if (err instanceof SessionSnapshotError) {
    return new ActivationError(err.code === 'policy_rejected' ? 'policy_rejected' : 'bundle_failed', `the session could not be snapshotted: ${err.message}`, { cause: err });
  }
  if (err instanceof SessionBundleError) return new ActivationError('bundle_failed', `the session bundle failed: ${err.message}`, { cause: err });
  if (err instanceof SessionRepositoryError) return new ActivationError('repository_failed', `the session repository failed: ${err.message}`, { cause: err });
  return new ActivationError('sandbox_failed', `the activation failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}
