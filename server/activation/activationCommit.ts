// The last two steps of an activation against the repository, shared by a fresh run and by the completion of a
// predecessor's pending commit: the CAS commit of a published checkpoint (a Session's first revision is a create,
// and a retry of our own create recognises its r1), and marking the activation record committed with its outcome —
// in the commit's own write for a fresh run, after it for a pending commit that an older version recorded.
import { type ActivationOutcomeEvent, ActivationOutcomeEventSchema } from '../../protocol/activation';
import type { CommittedSessionRevision } from '../../protocol/repository';
import type { ActivationCommitMark, SessionRepository } from '../repository/contract';
import { isSessionRepositoryError } from '../repository/errors';
import { encodeJcs } from '../repository/jcs';
import type { ActivationRecord, PendingActivationCommit } from '../repository/records';

/** `activation`: the record is marked committed in the same write (a fresh run); without it, `markCommitted` after. */
export async function commitCheckpoint(
  repo: SessionRepository,
  sessionId: string,
  activationId: string,
  pending: PendingActivationCommit,
  activation?: ActivationCommitMark,
): Promise<CommittedSessionRevision> {
  const mark = activation !== undefined ? { activation } : {};
  if (pending.expectedRevision === null) {
    try {
      return await repo.createSession({ sessionId, agentId: pending.agentId, checkpoint: pending.checkpoint, lastCommittedActivationId: activationId, ...mark });
    } catch (err) {
      // A retry of our own create: the Session's r1 is exactly what we published.
      if (isSessionRepositoryError(err, 'session_already_exists')) {
        const r1 = await repo.checkoutExact({ sessionId, revision: 'r1' }).catch(() => undefined);
        if (r1 && r1.lastCommittedActivationId === activationId && encodeJcs(r1.checkpoint) === encodeJcs(pending.checkpoint)) return r1;
      }
      throw err;
    }
  }
  return repo.commit({
    sessionId,
    expectedRevision: pending.expectedRevision,
    checkpoint: pending.checkpoint,
    lastCommittedActivationId: activationId,
    commitId: pending.commitId,
    ...mark,
  });
}

/**
 * The record, committed at `committed` with its outcome; undefined when another server owns the activation now. For a
 * predecessor's pending commit (a fresh run marks its record in the commit's own write: `CommitInput.activation`).
 */
export function markCommitted(
  repo: SessionRepository,
  record: ActivationRecord,
  token: string,
  committed: CommittedSessionRevision,
  outcome: Record<string, unknown>,
): Promise<ActivationRecord | undefined> {
  const parsed: ActivationOutcomeEvent = ActivationOutcomeEventSchema.parse(outcome);
  return repo.activations.update(record.sessionId, record.activationId, token, (r) => {
    const next: ActivationRecord = { ...r, state: 'committed', revision: committed.ref.revision, outcome: parsed };
    delete next.owner;
    delete next.pending;
    delete next.sandbox;
    delete next.error;
    return next;
  });
}
