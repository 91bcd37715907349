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
