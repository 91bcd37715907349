// The activation store's side of one activation (runner.ts runs the steps): claiming the activation id (a committed
// id answers with its stored outcome), waiting for the Session's lease, recording an attempt that ended without a
// commit, and completing — or forgetting — what a predecessor published but may not have committed.
import type { ActivationResult, ActivationRunRequest } from '../../protocol/activation';
import type { Logger } from '../log';
import type { SessionRepository } from '../repository/contract';
import { isSessionRepositoryError } from '../repository/errors';
import { encodeJcs } from '../repository/jcs';
import type { ActivationRecord, PendingActivationCommit } from '../repository/records';
import { commitCheckpoint, markCommitted } from './activationCommit';
import { ActivationError } from './errors';
import { classify, committedResult, sha256 } from './outcomes';
import { type LeasePolicy, SessionAdmission } from './sessionLease';

export class ActivationRecords {
  private readonly admission: SessionAdmission;

  constructor(
    private readonly repo: SessionRepository,
    private readonly policy: LeasePolicy,
    private readonly log: Logger,
  ) {
    this.admission = new SessionAdmission(repo.activations, policy);
  }

  /**
   * Claims the activation id: this attempt's record (and what a predecessor left), or a committed id's stored result.
   * The Session's lease is taken in the same write when it is free (`leased`); else `admit` waits for it.
   */
  async claim(
    request: ActivationRunRequest,
    token: string,
  ): Promise<{ kind: 'committed'; result: ActivationResult } | { kind: 'claimed'; record: ActivationRecord; previous: ActivationRecord | undefined; leased: boolean }> {
    const { sessionId, activationId } = request;
    const requestDigest = sha256(encodeJcs(request.stimulus ?? null));
    const claim = await this.repo.activations.claim({ sessionId, activationId, requestDigest, token, ttlMs: this.policy.ttlMs, lease: true });
    if (claim.kind === 'committed') return { kind: 'committed', result: committedResult(claim.record, true) };
    if (claim.kind === 'in_progress') {
      throw new ActivationError('activation_in_progress', `activation ${activationId} of session ${sessionId} is running right now (attempt ${claim.record.attempt}); wait for it and retry to get its outcome`);
    }
    if (claim.kind === 'conflict') {
      throw new ActivationError('idempotency_conflict', `activation id ${activationId} was already used for session ${sessionId} with a different stimulus; use a new activation id`);
    }
    return { kind: 'claimed', record: claim.record, previous: claim.previous, leased: claim.lease !== undefined };
  }

  /** Waits for the Session's lease unless the claim took it (`leased`); a failure is recorded as this attempt's end. */
  async admit(request: ActivationRunRequest, token: string, leased: boolean, signal: AbortSignal, progress: (phase: string, message?: string) => void): Promise<void> {
    const { sessionId, activationId } = request;
    if (leased) return progress('admission', `session ${sessionId} is free: its lease was taken with the claim`);
    progress('admission', `waiting for session ${sessionId}`);
    try {
      await this.admission.acquire(sessionId, activationId, token, signal, (holder) => progress('queued', `session ${sessionId} is busy with ${holder}; waiting`));
    } catch (err) {
      const e = classify(err);
      await this.recordAborted(request, token, e);
      throw e;
    }
  }

  async recordAborted(request: ActivationRunRequest, token: string, error: ActivationError): Promise<void> {
    const { sessionId, activationId } = request;
    await this.repo.activations
      .update(sessionId, activationId, token, (r) => {
        const next: ActivationRecord = { ...r, state: 'aborted', error: { code: error.code, message: error.message } };
        delete next.owner;
        delete next.pending;
        delete next.outcome;
        return next;
      })
      .catch((err: unknown) => this.log.warn('could not record an aborted activation', { activationId, error: (err as Error).message }));
  }

  /** Completes a predecessor's published-but-maybe-uncommitted checkpoint; undefined when it lost and must run again. */
  async finishPending(record: ActivationRecord, pending: PendingActivationCommit, outcome: Record<string, unknown>, token: string): Promise<ActivationResult | undefined> {
    try {
      const committed = await commitCheckpoint(this.repo, record.sessionId, record.activationId, pending);
      const done = await markCommitted(this.repo, record, token, committed, outcome);
      return done ? committedResult(done, true) : undefined;
    } catch (err) {
      if (isSessionRepositoryError(err) && ['revision_conflict', 'session_already_exists', 'object_not_found', 'integrity_mismatch'].includes(err.code)) {
        this.log.info('a pending commit of an earlier attempt lost; running the activation again', { activationId: record.activationId, code: err.code });
        // Forget the lost attempt's checkpoint and outcome: this attempt starts over.
        const reset = await this.repo.activations.update(record.sessionId, record.activationId, token, (r) => {
          const next: ActivationRecord = { ...r, state: 'running' };
          delete next.pending;
          delete next.outcome;
          return next;
        });
        if (!reset) throw new ActivationError('ownership_lost', `activation ${record.activationId} was taken over by another server`);
        return undefined;
      }
      throw err;
    }
  }
}
