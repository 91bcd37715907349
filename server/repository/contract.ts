// The SessionRepository contract (spec §9.2 and §11) plus the listings and deletion this project
// adds. Every adapter (file, postgres) implements exactly this and passes the same contract suite.
import type {
  CommittedSessionRevision,
  CompletedForkOperation,
  DeletedSession,
  ForkOperation,
  RevisionSummary,
  SessionRevisionRef,
  SessionSummary,
  StoredSessionCheckpoint,
} from '../../protocol/repository';
import type { ActivationStore } from './activationStore';
import type { ImmutableObjectStore } from './objectStore';

/**
 * The activation a create or commit finishes (server/activation): its record is marked committed, with the agent's
 * outcome, and the Session's lease given back, in the same write as the revision (ActivationStore.commitIn). Its
 * `activationId` must be the commit's `lastCommittedActivationId`.
 */
export interface ActivationCommitMark {
  activationId: string;
  /** The attempt's owner token: when the record is no longer this owner's, nothing is written (`idempotency_conflict`). */
  token: string;
  outcome: Record<string, unknown>;
}

export interface CreateSessionInput {
  sessionId: string;
  agentId: string;
  checkpoint: StoredSessionCheckpoint;
  lastCommittedActivationId?: string;
  activation?: ActivationCommitMark;
  /** Fork-created targets only; always together with `createdByForkId`. */
  forkedFrom?: SessionRevisionRef;
  createdByForkId?: string;
}

export interface CommitInput {
  sessionId: string;
  /** The head the writer started from; anything else is `revision_conflict`. */
  expectedRevision: string;
  checkpoint: StoredSessionCheckpoint;
  lastCommittedActivationId?: string;
  /** Idempotency key: a retry with the same input returns the original revision. */
  commitId?: string;
  activation?: ActivationCommitMark;
}

export interface ClaimForkInput {
  forkId: string;
  /** An explicit, retained revision of the source Session (never "latest"). */
  source: SessionRevisionRef;
  targetSessionId: string;
}

export interface GarbageCollection {
  deletedObjects: number;
}

export interface SessionRepository {
  readonly kind: 'file' | 'postgres';
  /** Completed and pending fork records are never expired. */
  readonly forkIdempotencyRetention: 'indefinite';
  /** How many revisions per Session are kept (the head and the N-1 before it). */
  readonly keepRevisions: number;
  /** Where checkpoints are published before a create/commit, and materialized from after a checkout. */
  readonly objects: ImmutableObjectStore;
  /** The activation dedupe table and per-Session leases (server/activation uses them). */
  readonly activations: ActivationStore;

  checkoutCurrent(sessionId: string): Promise<CommittedSessionRevision>;
  checkoutExact(ref: SessionRevisionRef): Promise<CommittedSessionRevision>;
  createSession(input: CreateSessionInput): Promise<CommittedSessionRevision>;
  commit(input: CommitInput): Promise<CommittedSessionRevision>;
  claimFork(input: ClaimForkInput): Promise<ForkOperation>;
  completeFork(input: { forkId: string }): Promise<CompletedForkOperation>;

  listSessions(): Promise<SessionSummary[]>;
  /** Retained revisions, newest first. */
  listRevisions(sessionId: string): Promise<RevisionSummary[]>;
  /** Removes the Session and its revisions; its id is never reused (a later create is `session_already_exists`). */
  deleteSession(sessionId: string): Promise<DeletedSession>;
  /** Deletes objects no retained revision or fork record references (and that are older than the grace period). */
  collectGarbage(): Promise<GarbageCollection>;
  close(): Promise<void>;
}
