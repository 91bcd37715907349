// The SessionRepository semantics (spec §9.2, §11), written once over a RepositoryStorage so the
// file and postgres adapters cannot drift: error precedence (existence and CAS before object
// checks), objects verified before the head moves and re-checked inside the write transaction,
// commitId idempotency, fork claim/create/complete, retention and garbage collection.
import {
  type CommittedSessionRevision,
  type CompletedForkOperation,
  type DeletedSession,
  type ForkOperation,
  formatRevision,
  type RevisionSummary,
  type SessionRevisionRef,
  type SessionSummary,
  type StoredSessionCheckpoint,
} from '../../protocol/repository';
import { ActivationStore } from './activationStore';
import { admitStoredCheckpoint, verifyStoredCheckpoint } from './checkpoint';
import type { ActivationCommitMark, ClaimForkInput, CommitInput, CreateSessionInput, GarbageCollection, SessionRepository } from './contract';
import { SessionRepositoryError, toRepositoryError } from './errors';
import { optionalIdentifier, requireIdentifier, requireRevision } from './identifiers';
import { committedOf, contradiction, sessionSummaryOf, notRetained, refText, requireRef, requireSession, sameJson, sessionNotFound } from './engineRules';
import type { ImmutableObjectStore } from './objectStore';
import type { CommitInputRecord, ForkRecord, RevisionRecord, SessionRecord } from './records';
import { checkpointObjectIds, oldestRetainedAfter, type RetentionPolicy } from './retention';
import type { RepositoryReader, RepositoryStorage, RepositoryWriter } from './storage';

/** What a mutation's precheck found: the answer already given (idempotent retry), or what the write goes on with. */
type Checked<D, C> = { done: D } | { checked: C };

export class RepositoryEngine implements SessionRepository {
  readonly forkIdempotencyRetention = 'indefinite' as const;
  readonly kind: 'file' | 'postgres';
  readonly keepRevisions: number;
  readonly objects: ImmutableObjectStore;
  readonly activations: ActivationStore;

  constructor(
    private readonly storage: RepositoryStorage,
    private readonly policy: RetentionPolicy,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.kind = storage.kind;
    this.keepRevisions = policy.keepRevisions;
    this.objects = storage.objects;
    this.activations = new ActivationStore(storage, clock, policy.finishedActivationsKept);
  }

  checkoutCurrent(sessionId: string): Promise<CommittedSessionRevision> {
    return this.guard('checkout', async () => {
      requireIdentifier('sessionId', sessionId);
      // Head record first, then its objects: a concurrent commit cannot substitute bytes, because
      // the refs read here are content-addressed and re-verified below.
      const found = await this.storage.read(async (r) => {
        const session = await requireSession(r, sessionId);
        const revision = await r.getRevision(sessionId, session.head);
        if (!revision) throw contradiction(`session ${sessionId} has no record of its head r${session.head}`);
        return committedOf(session, revision);
      });
      await verifyStoredCheckpoint(this.objects, found.checkpoint);
      return found;
    });
  }

  checkoutExact(ref: SessionRevisionRef): Promise<CommittedSessionRevision> {
    return this.guard('checkout', async () => {
      const sessionId = requireIdentifier('sessionId', ref?.sessionId);
      const n = requireRevision('revision', ref.revision);
      const found = await this.storage.read(async (r) => {
        const session = await requireSession(r, sessionId);
        const revision = n >= session.oldestRetained && n <= session.head ? await r.getRevision(sessionId, n) : undefined;
        if (!revision) throw notRetained('revision_not_available', session, n, this.keepRevisions);
        return committedOf(session, revision);
      });
      await verifyStoredCheckpoint(this.objects, found.checkpoint);
      return found;
    });
  }

  createSession(input: CreateSessionInput): Promise<CommittedSessionRevision> {
    return this.guard('create', async () => {
      const sessionId = requireIdentifier('sessionId', input.sessionId);
      const agentId = requireIdentifier('agentId', input.agentId);
      const lastCommittedActivationId = optionalIdentifier('lastCommittedActivationId', input.lastCommittedActivationId);
      const createdByForkId = optionalIdentifier('createdByForkId', input.createdByForkId);
      const forkedFrom = input.forkedFrom === undefined ? undefined : requireRef('forkedFrom', input.forkedFrom);
      if ((forkedFrom === undefined) !== (createdByForkId === undefined)) {
        throw new TypeError('forkedFrom and createdByForkId must be given together (a fork-created Session) or not at all');
      }
      if (createdByForkId !== undefined && lastCommittedActivationId !== undefined) {
        throw new TypeError('a fork-created Session must not carry lastCommittedActivationId');
      }
      const checkpoint = admitStoredCheckpoint(input.checkpoint);
      const activation = activationMark(input.activation, lastCommittedActivationId);
      const committed: CommittedSessionRevision = {
        ref: { sessionId, revision: 'r1' },
        agentId,
        checkpoint,
        ...(lastCommittedActivationId !== undefined ? { lastCommittedActivationId } : {}),
        ...(forkedFrom !== undefined ? { forkedFrom } : {}),
      };

      const precheck = async (r: RepositoryReader): Promise<Checked<CommittedSessionRevision, StoredSessionCheckpoint>> => {
        const existing = await r.getSession(sessionId);
        if (existing) {
          if (createdByForkId !== undefined && existing.createdByForkId === createdByForkId && sameJson(existing.created, committed)) {
            return { done: existing.created };
          }
          throw new SessionRepositoryError('session_already_exists', `session ${sessionId} already exists (head r${existing.head}); commit to it with its expected revision, or choose another session id`);
        }
        const tombstone = await r.getTombstone(sessionId);
        if (tombstone) {
          throw new SessionRepositoryError('session_already_exists', `session ${sessionId} was deleted at ${tombstone.deletedAt}; session ids are never reused — choose another id`);
        }
        if (createdByForkId !== undefined && forkedFrom !== undefined) {
          const fork = await r.getFork(createdByForkId);
          if (!fork || fork.targetSessionId !== sessionId || !sameJson(fork.source, forkedFrom)) {
            throw new SessionRepositoryError('idempotency_conflict', `no fork claim ${createdByForkId} from ${refText(forkedFrom)} to session ${sessionId}; claim the fork first (claimFork) with this source and target`);
          }
          if (fork.sourceAgentId !== agentId) {
            throw new SessionRepositoryError('fork_agent_mismatch', `fork ${createdByForkId} belongs to agent ${fork.sourceAgentId}, not ${agentId}`);
          }
        }
        return { checked: checkpoint };
      };

      return this.checkedWrite(precheck, async (w) => {
        await w.requireObjectsPresent([checkpoint.manifest, checkpoint.value.compatibilityBundle]);
        if (activation !== undefined) await this.activations.commitIn(w, sessionId, activation, committed);
        const now = this.clock().toISOString();
        await w.insertSession({
          sessionId,
          agentId,
          head: 1,
          nextRevisionNumber: 2,
          oldestRetained: 1,
          created: committed,
          ...(forkedFrom !== undefined ? { forkedFrom } : {}),
          ...(createdByForkId !== undefined ? { createdByForkId } : {}),
          createdAt: now,
          updatedAt: now,
        });
        await w.insertRevision({
          sessionId,
          revision: 1,
          checkpoint,
          ...(lastCommittedActivationId !== undefined ? { lastCommittedActivationId } : {}),
          committedAt: now,
        });
        return committed;
      }, (c) => c);
    });
  }

  commit(input: CommitInput): Promise<CommittedSessionRevision> {
    return this.guard('commit', async () => {
      const sessionId = requireIdentifier('sessionId', input.sessionId);
      const expected = requireRevision('expectedRevision', input.expectedRevision);
      const lastCommittedActivationId = optionalIdentifier('lastCommittedActivationId', input.lastCommittedActivationId);
      const commitId = optionalIdentifier('commitId', input.commitId);
      const checkpoint = admitStoredCheckpoint(input.checkpoint);
      const activation = activationMark(input.activation, lastCommittedActivationId);
      const inputRecord: CommitInputRecord = {
        expectedRevision: formatRevision(expected),
        checkpoint,
        ...(lastCommittedActivationId !== undefined ? { lastCommittedActivationId } : {}),
      };

      type Checked = { done: CommittedSessionRevision } | { session: SessionRecord };
      const precheck = async (r: RepositoryReader): Promise<Checked> => {
        // Session first (postgres locks its row here), then the receipt, so a concurrent retry
        // of the same commitId waits for the first and then sees its receipt.
        const session = await r.getSession(sessionId);
        if (commitId !== undefined) {
          const receipt = await r.getReceipt(sessionId, commitId);
          if (receipt) {
            if (sameJson(receipt.input, inputRecord)) return { done: receipt.result };
            throw new SessionRepositoryError('idempotency_conflict', `commitId ${commitId} was already used for session ${sessionId} with different input (it produced ${receipt.result.ref.revision}); use a new commitId for a new commit`);
          }
        }
        if (!session) throw await sessionNotFound(r, sessionId);
        if (session.head !== expected) {
          throw new SessionRepositoryError('revision_conflict', `session ${sessionId} is at r${session.head}, not r${expected}: another writer committed first; check out r${session.head}, reapply your change and commit with expected revision r${session.head}`);
        }
        return { session };
      };

      // File: verify before taking the (repository-wide) lock, re-check CAS under it. Postgres:
      // the lock is the Session's row, so CAS is checked first and the objects verified while it
      // is held (on the same connection) — writers that lost the race never read the objects.
      const verifyInside = this.storage.verifiesInsideWrite;
      if (!verifyInside) {
        const early = await this.storage.read(precheck);
        if ('done' in early) return early.done;
        await verifyStoredCheckpoint(this.objects, checkpoint);
      }
      const { committed, dropped } = await this.storage.write(async (w) => {
        const again = await precheck(w);
        if ('done' in again) return { committed: again.done, dropped: [] as RevisionRecord[] };
        const session = again.session;
        if (verifyInside) await w.verifyCheckpoint(checkpoint);
        await w.requireObjectsPresent([checkpoint.manifest, checkpoint.value.compatibilityBundle]);
        const n = session.head + 1;
        const now = this.clock().toISOString();
        const result: CommittedSessionRevision = {
          ref: { sessionId, revision: formatRevision(n) },
          agentId: session.agentId,
          checkpoint,
          ...(lastCommittedActivationId !== undefined ? { lastCommittedActivationId } : {}),
          ...(session.forkedFrom !== undefined ? { forkedFrom: session.forkedFrom } : {}),
        };
        if (activation !== undefined) await this.activations.commitIn(w, sessionId, activation, result);
        await w.insertRevision({
          sessionId,
          revision: n,
          checkpoint,
          ...(lastCommittedActivationId !== undefined ? { lastCommittedActivationId } : {}),
          ...(commitId !== undefined ? { commitId } : {}),
          committedAt: now,
        });
        const oldest = Math.max(session.oldestRetained, oldestRetainedAfter(n, this.keepRevisions));
        const droppedRevisions = oldest > session.oldestRetained ? await w.dropRevisionsBelow(sessionId, oldest) : [];
        await w.updateSession({ ...session, head: n, nextRevisionNumber: n + 1, oldestRetained: oldest, updatedAt: now });
        if (commitId !== undefined) await w.insertReceipt({ sessionId, commitId, input: inputRecord, result });
        return { committed: result, dropped: droppedRevisions };
      });
      await this.collectAfter(dropped);
      return committed;
    });
  }

  claimFork(input: ClaimForkInput): Promise<ForkOperation> {
    return this.guard('fork claim', async () => {
      const forkId = requireIdentifier('forkId', input.forkId);
      const source = requireRef('source', input.source);
      const targetSessionId = requireIdentifier('targetSessionId', input.targetSessionId);
      const n = requireRevision('source.revision', source.revision);

      const precheck = async (r: RepositoryReader): Promise<Checked<ForkRecord, { sourceAgentId: string; checkpoint: StoredSessionCheckpoint }>> => {
        const existing = await r.getFork(forkId);
        if (existing) {
          if (sameJson(existing.source, source) && existing.targetSessionId === targetSessionId) return { done: existing };
          throw new SessionRepositoryError('idempotency_conflict', `fork ${forkId} was already claimed from ${refText(existing.source)} to ${existing.targetSessionId}; use a new forkId for a different fork`);
        }
        if (targetSessionId === source.sessionId) {
          throw new SessionRepositoryError('invalid_fork_target', `a fork's target must be a new session, not its source ${source.sessionId}`);
        }
        const session = await r.getSession(source.sessionId);
        if (!session) {
          throw new SessionRepositoryError('source_revision_not_available', `fork source session ${source.sessionId} does not exist`);
        }
        const revision = n >= session.oldestRetained && n <= session.head ? await r.getRevision(source.sessionId, n) : undefined;
        if (!revision) throw notRetained('source_revision_not_available', session, n, this.keepRevisions);
        return { checked: { sourceAgentId: session.agentId, checkpoint: revision.checkpoint } };
      };

      return this.checkedWrite(precheck, async (w, again, early) => {
        if (!sameJson(again.checkpoint, early.checkpoint)) {
          throw new SessionRepositoryError('source_revision_not_available', `fork source ${refText(source)} changed while it was verified; retry the fork`);
        }
        await w.requireObjectsPresent([again.checkpoint.manifest, again.checkpoint.value.compatibilityBundle]);
        const record: ForkRecord = {
          state: 'pending',
          forkId,
          source,
          sourceAgentId: again.sourceAgentId,
          sourceCheckpoint: again.checkpoint,
          targetSessionId,
        };
        await w.insertFork(record);
        return record;
      }, (c) => c.checkpoint);
    });
  }

  completeFork(input: { forkId: string }): Promise<CompletedForkOperation> {
    return this.guard('fork completion', async () => {
      const forkId = requireIdentifier('forkId', input?.forkId);
      const precheck = async (r: RepositoryReader): Promise<Checked<CompletedForkOperation, { fork: ForkRecord; target: SessionRecord; checkpoint: StoredSessionCheckpoint }>> => {
        const fork = await r.getFork(forkId);
        if (!fork) throw new SessionRepositoryError('idempotency_conflict', `no fork claim with id ${forkId}; claim it first (claimFork)`);
        if (fork.state === 'completed') return { done: fork };
        const target = await r.getSession(fork.targetSessionId);
        if (!target) {
          throw new SessionRepositoryError('session_not_found', `fork ${forkId}'s target session ${fork.targetSessionId} has not been created yet; create it (createSession with createdByForkId) before completing the fork`);
        }
        if (target.agentId !== fork.sourceAgentId) {
          throw new SessionRepositoryError('fork_agent_mismatch', `fork ${forkId}'s target belongs to agent ${target.agentId}, not ${fork.sourceAgentId}`);
        }
        if (target.createdByForkId !== forkId || !sameJson(target.forkedFrom, fork.source)) {
          throw new SessionRepositoryError('idempotency_conflict', `session ${target.sessionId} was not created by fork ${forkId} from ${refText(fork.source)}`);
        }
        let checkpoint = target.created.checkpoint;
        if (target.oldestRetained > 1) {
          const head = await r.getRevision(target.sessionId, target.head);
          if (!head) throw contradiction(`session ${target.sessionId} has no record of its head`);
          checkpoint = head.checkpoint;
        }
        return { checked: { fork, target, checkpoint } };
      };

      return this.checkedWrite(precheck, async (w, again) => {
        const completed: CompletedForkOperation = {
          ...again.fork,
          state: 'completed',
          target: { sessionId: again.target.sessionId, revision: 'r1' },
        };
        await w.updateFork(completed);
        return completed;
      }, (c) => c.checkpoint);
    });
  }

  listSessions(): Promise<SessionSummary[]> {
    return this.guard('listing sessions', async () => {
      const sessions = await this.storage.read((r) => r.listSessions());
      return sessions
        .map(sessionSummaryOf)
        .sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
    });
  }

  listRevisions(sessionId: string): Promise<RevisionSummary[]> {
    return this.guard('listing revisions', async () => {
      requireIdentifier('sessionId', sessionId);
      return this.storage.read(async (r) => {
        const session = await requireSession(r, sessionId);
        const revisions = await r.listRevisions(sessionId);
        return revisions
          .map((rev) => ({
            ref: { sessionId, revision: formatRevision(rev.revision) },
            checkpoint: rev.checkpoint,
            ...(rev.lastCommittedActivationId !== undefined ? { lastCommittedActivationId: rev.lastCommittedActivationId } : {}),
            ...(rev.commitId !== undefined ? { commitId: rev.commitId } : {}),
            committedAt: rev.committedAt,
            isHead: rev.revision === session.head,
          }))
          .reverse();
      });
    });
  }

  deleteSession(sessionId: string): Promise<DeletedSession> {
    return this.guard('deleting a session', async () => {
      requireIdentifier('sessionId', sessionId);
      const dropped = await this.storage.write(async (w) => {
        const session = await requireSession(w, sessionId);
        return w.deleteSession(sessionId, { sessionId, deletedAt: this.clock().toISOString(), lastRevision: session.head });
      });
      await this.collectAfter(dropped);
      return { sessionId, deletedRevisions: dropped.length };
    });
  }

  collectGarbage(): Promise<GarbageCollection> {
    return this.guard('garbage collection', async () => ({
      deletedObjects: await this.storage.collectGarbage('all', this.policy.gcGraceMs),
    }));
  }

  close(): Promise<void> {
    return this.storage.close();
  }

  /**
   * The shape of create, claim and complete: `precheck` on a read (refusals and idempotent answers cost no object
   * reads), the checkpoint it names verified outside the write, then `precheck` again inside the write (another writer
   * may have moved meanwhile) before `apply` — with what the check found in the write and on the read.
   */
  private async checkedWrite<D, C>(
    precheck: (r: RepositoryReader) => Promise<Checked<D, C>>,
    apply: (w: RepositoryWriter, checked: C, early: C) => Promise<D>,
    checkpointOf: (checked: C) => StoredSessionCheckpoint,
  ): Promise<D> {
    const early = await this.storage.read(precheck);
    if ('done' in early) return early.done;
    await verifyStoredCheckpoint(this.objects, checkpointOf(early.checked));
    return this.storage.write(async (w) => {
      const again = await precheck(w);
      if ('done' in again) return again.done;
      return apply(w, again.checked, early.checked);
    });
  }

  /** GC of objects released by dropped revisions; the commit already succeeded, so failures here are not reported. */
  private async collectAfter(dropped: RevisionRecord[]): Promise<void> {
    if (dropped.length === 0) return;
    const ids = new Set<string>();
    for (const rev of dropped) for (const id of checkpointObjectIds(this.objects, rev.checkpoint)) ids.add(id);
    await this.storage.collectGarbage([...ids], this.policy.gcGraceMs).catch(() => undefined);
  }

  private async guard<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toRepositoryError(err, `session repository ${doing}`);
    }
  }
}

/** The activation a create or commit finishes, checked against the revision's `lastCommittedActivationId`. */
function activationMark(mark: ActivationCommitMark | undefined, lastCommittedActivationId: string | undefined): ActivationCommitMark | undefined {
  if (mark === undefined) return undefined;
  if (mark.activationId !== lastCommittedActivationId) throw new TypeError('activation.activationId must be the lastCommittedActivationId of the revision it finishes');
  return mark;
}
