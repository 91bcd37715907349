// The persisted records both adapters store (file: one JSON document; postgres: rows holding the
// same records as jsonb). Parsed with zod on every read, so damaged storage fails closed.
import { z } from 'zod';
import {
  CommittedSessionRevisionSchema,
  ForkOperationSchema,
  IdentifierSchema,
  RevisionSchema,
  SessionRevisionRefSchema,
  StoredSessionCheckpointSchema,
} from '../../protocol/repository';
import { byCodeUnits } from '../platform/codeUnitOrder';

const Timestamp = z.iso.datetime({ offset: true });
const PositiveInt = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const SessionRecordSchema = z.strictObject({
  sessionId: IdentifierSchema,
  agentId: IdentifierSchema,
  head: PositiveInt,
  nextRevisionNumber: PositiveInt,
  /** The oldest revision still stored; revisions below it were dropped by retention. */
  oldestRetained: PositiveInt,
  /** The r1 result, kept so an exact fork-create retry returns it even after r1 is dropped. */
  created: CommittedSessionRevisionSchema,
  forkedFrom: SessionRevisionRefSchema.optional(),
  createdByForkId: IdentifierSchema.optional(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type SessionRecord = z.infer<typeof SessionRecordSchema>;

export const RevisionRecordSchema = z.strictObject({
  sessionId: IdentifierSchema,
  revision: PositiveInt,
  checkpoint: StoredSessionCheckpointSchema,
  lastCommittedActivationId: IdentifierSchema.optional(),
  commitId: IdentifierSchema.optional(),
  committedAt: Timestamp,
});
export type RevisionRecord = z.infer<typeof RevisionRecordSchema>;

export const CommitInputRecordSchema = z.strictObject({
  expectedRevision: RevisionSchema,
  checkpoint: StoredSessionCheckpointSchema,
  lastCommittedActivationId: IdentifierSchema.optional(),
});
export type CommitInputRecord = z.infer<typeof CommitInputRecordSchema>;

/** A `commitId` receipt; kept while its revision is retained. */
export const CommitReceiptSchema = z.strictObject({
  sessionId: IdentifierSchema,
  commitId: IdentifierSchema,
  input: CommitInputRecordSchema,
  result: CommittedSessionRevisionSchema,
});
export type CommitReceipt = z.infer<typeof CommitReceiptSchema>;

export const ForkRecordSchema = ForkOperationSchema;
export type ForkRecord = z.infer<typeof ForkRecordSchema>;

/** A deleted Session: its id is never reused, so no stale writer can commit onto a new Session. */
export const TombstoneSchema = z.strictObject({
  sessionId: IdentifierSchema,
  deletedAt: Timestamp,
  lastRevision: PositiveInt,
});
export type Tombstone = z.infer<typeof TombstoneSchema>;

/** Who holds a lease or runs an activation: a random token plus the process (so a dead holder is detected). */
export const LeaseOwnerSchema = z.strictObject({
  token: z.string().min(16).max(128),
  process: z.strictObject({ host: z.string(), bootId: z.string(), pid: z.number().int(), startTime: z.string() }),
  /** Renewed by the holder's heartbeat; past it (or once the process is provably dead) anyone may take over. */
  expiresAt: Timestamp,
});
export type LeaseOwner = z.infer<typeof LeaseOwnerSchema>;

/** The per-Session activation lease: at most one activation of a Session runs at a time. */
export const SessionLeaseSchema = z.strictObject({
  sessionId: IdentifierSchema,
  activationId: IdentifierSchema,
  owner: LeaseOwnerSchema,
  acquiredAt: Timestamp,
});
export type SessionLease = z.infer<typeof SessionLeaseSchema>;

const SandboxRefRecordSchema = z.strictObject({
  provider: z.enum(['local', 'kruntimes']),
  context: z.string().min(1),
  namespace: z.string().min(1),
  name: z.string().min(1),
});

/**
 * A publish-then-commit that was about to happen; lets a retry finish it (same commitId) instead of re-running. Only
 * versions before December 2026 wrote it (state `committing`): a run now commits and marks its record in one write
 * (contract.ts ActivationCommitMark), and such a record an older version left is still finished.
 */
export const PendingActivationCommitSchema = z.strictObject({
  commitId: IdentifierSchema,
  /** null: the Session did not exist yet (the commit is its createSession). */
  expectedRevision: RevisionSchema.nullable(),
  agentId: IdentifierSchema,
  checkpoint: StoredSessionCheckpointSchema,
});
export type PendingActivationCommit = z.infer<typeof PendingActivationCommitSchema>;

/**
 * The control plane's activation store (dedupe table): `(sessionId, activationId)` → state and, once
 * committed, the terminal outcome. `running`/`committing` are owned (expiring); `committed` is final;
 * `aborted` means nothing was committed (a retry runs again).
 */
export const ActivationRecordSchema = z.strictObject({
  sessionId: IdentifierSchema,
  activationId: IdentifierSchema,
  /** sha256 of the request's stimulus (JCS); the same id with another stimulus is an idempotency conflict. */
  requestDigest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  state: z.enum(['running', 'committing', 'committed', 'aborted']),
  attempt: PositiveInt,
  owner: LeaseOwnerSchema.optional(),
  sandbox: SandboxRefRecordSchema.optional(),
  pending: PendingActivationCommitSchema.optional(),
  /** The agent's outcome line (committing/committed only). */
  outcome: z.record(z.string(), z.unknown()).optional(),
  revision: RevisionSchema.optional(),
  error: z.strictObject({ code: z.string(), message: z.string() }).optional(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type ActivationRecord = z.infer<typeof ActivationRecordSchema>;

/** The states after which the record only answers retries (retention: DEFAULT_FINISHED_ACTIVATIONS_KEPT). */
export const FINISHED_ACTIVATION_STATES = ['committed', 'aborted'] as const;

/**
 * A record that may be forgotten once newer finished ones replace it. An aborted one may still name its sandbox, which
 * its run destroyed, or, if that failed, whose runtime ends it (every activation sandbox has a bounded life, runner.ts).
 */
export function forgettableActivation(record: ActivationRecord): boolean {
  return (FINISHED_ACTIVATION_STATES as readonly string[]).includes(record.state);
}

/** Newest first: by updatedAt, then by id (the order in which both adapters forget). */
export function newestActivationFirst(a: ActivationRecord, b: ActivationRecord): number {
  if (a.updatedAt !== b.updatedAt) return a.updatedAt > b.updatedAt ? -1 : 1;
  return byCodeUnits(b.activationId, a.activationId);
}
