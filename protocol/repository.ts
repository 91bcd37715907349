// The session repository's wire vocabulary (spec §9, §11): object refs, checkpoints, revision refs,
// committed revisions, fork records, listings and the stable error codes. The server's repository
// adapters and the companion JSON-RPC both speak these shapes; everything read back from disk or a
// database is parsed with these schemas before it is trusted.
import { z } from 'zod';
import { isWellFormedUnicode } from './bundle';
import { Sha256DigestSchema } from './digest';

export const SESSION_BUNDLE_MEDIA_TYPE = 'application/vnd.maka.session-bundle+tar;version=1;compression=zstd';
export const SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE = 'application/vnd.maka.session-checkpoint-manifest+json;version=1';

/** Stable error codes of `SessionRepositoryError` (spec §9.2). */
export const SessionRepositoryErrorCodeSchema = z.enum([
  'session_not_found',
  'source_revision_not_available',
  'revision_not_available',
  'revision_conflict',
  'session_already_exists',
  'idempotency_conflict',
  'invalid_fork_target',
  'fork_agent_mismatch',
  'object_not_found',
  'integrity_mismatch',
  'quota_exceeded',
  'io_failure',
  // This project's own: a bundle committed to a session it was not packed for (Maka's repository stores bytes and
  // does not look), and a repository location given explicitly that does not exist (read without creating it).
  'identity_mismatch',
  'repository_not_found',
]);
export type SessionRepositoryErrorCode = z.infer<typeof SessionRepositoryErrorCodeSchema>;

/** True for a string without lone UTF-16 surrogates (one implementation, in the bundle contract). */
export { isWellFormedUnicode } from './bundle';

/** Session, agent, fork, commit and activation ids: non-empty valid Unicode, ≤ 512 UTF-16 code units. */
export const IdentifierSchema = z
  .string()
  .min(1)
  .max(512)
  .refine(isWellFormedUnicode, { message: 'must be valid Unicode (no lone surrogates)' });

export { Sha256DigestSchema } from './digest';

/** Revisions are `r1`, `r2`, … per Session; opaque to callers. */
export const RevisionSchema = z.string().regex(/^r[1-9][0-9]*$/, 'must be a revision such as r1, r2, …');
export type Revision = z.infer<typeof RevisionSchema>;

export const SessionRevisionRefSchema = z.strictObject({
  sessionId: IdentifierSchema,
  revision: RevisionSchema,
});
export type SessionRevisionRef = z.infer<typeof SessionRevisionRefSchema>;

export const ImmutableObjectRefSchema = z.strictObject({
  objectRef: z.string().min(1).max(2048),
  digest: Sha256DigestSchema,
  bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  mediaType: z.string().min(1).refine(isWellFormedUnicode, { message: 'must be valid Unicode' }),
});
export type ImmutableObjectRef = z.infer<typeof ImmutableObjectRefSchema>;

export const SessionCheckpointManifestV1Schema = z.strictObject({
  schemaVersion: z.literal(1),
  compatibilityBundle: ImmutableObjectRefSchema,
});
export type SessionCheckpointManifestV1 = z.infer<typeof SessionCheckpointManifestV1Schema>;

/** A published checkpoint: the manifest object's ref and its decoded value. */
export const StoredSessionCheckpointSchema = z.strictObject({
  manifest: ImmutableObjectRefSchema,
  value: SessionCheckpointManifestV1Schema,
});
export type StoredSessionCheckpoint = z.infer<typeof StoredSessionCheckpointSchema>;

export const CommittedSessionRevisionSchema = z.strictObject({
  ref: SessionRevisionRefSchema,
  agentId: IdentifierSchema,
  checkpoint: StoredSessionCheckpointSchema,
  lastCommittedActivationId: IdentifierSchema.optional(),
  forkedFrom: SessionRevisionRefSchema.optional(),
});
export type CommittedSessionRevision = z.infer<typeof CommittedSessionRevisionSchema>;

const ForkFields = {
  forkId: IdentifierSchema,
  source: SessionRevisionRefSchema,
  sourceAgentId: IdentifierSchema,
  sourceCheckpoint: StoredSessionCheckpointSchema,
  targetSessionId: IdentifierSchema,
};

export const PendingForkOperationSchema = z.strictObject({ state: z.literal('pending'), ...ForkFields });
export const CompletedForkOperationSchema = z.strictObject({
  state: z.literal('completed'),
  ...ForkFields,
  target: SessionRevisionRefSchema,
});
/** A fork idempotency record (spec §11); retained indefinitely. */
export const ForkOperationSchema = z.discriminatedUnion('state', [PendingForkOperationSchema, CompletedForkOperationSchema]);
export type ForkOperation = z.infer<typeof ForkOperationSchema>;
export type CompletedForkOperation = z.infer<typeof CompletedForkOperationSchema>;

const IsoTimestampSchema = z.iso.datetime({ offset: true });

/** One Session in a listing. */
export const SessionSummarySchema = z.strictObject({
  sessionId: IdentifierSchema,
  agentId: IdentifierSchema,
  head: SessionRevisionRefSchema,
  /** The oldest revision still retained (checkoutExact and fork work from here to head). */
  oldestRetained: RevisionSchema,
  forkedFrom: SessionRevisionRefSchema.optional(),
  createdByForkId: IdentifierSchema.optional(),
  createdAt: IsoTimestampSchema,
  updatedAt: IsoTimestampSchema,
});
export type SessionSummary = z.infer<typeof SessionSummarySchema>;

/** One retained revision in a listing (newest first). */
export const RevisionSummarySchema = z.strictObject({
  ref: SessionRevisionRefSchema,
  checkpoint: StoredSessionCheckpointSchema,
  lastCommittedActivationId: IdentifierSchema.optional(),
  commitId: IdentifierSchema.optional(),
  committedAt: IsoTimestampSchema,
  isHead: z.boolean(),
});
export type RevisionSummary = z.infer<typeof RevisionSummarySchema>;

export const DeletedSessionSchema = z.strictObject({
  sessionId: IdentifierSchema,
  deletedRevisions: z.number().int().min(0),
});
export type DeletedSession = z.infer<typeof DeletedSessionSchema>;

/** How an error crosses a process boundary (CLI `--json`, JSON-RPC `error.data`). */
export const SessionRepositoryErrorPayloadSchema = z.strictObject({
  name: z.literal('SessionRepositoryError'),
  code: SessionRepositoryErrorCodeSchema,
  message: z.string(),
});
export type SessionRepositoryErrorPayload = z.infer<typeof SessionRepositoryErrorPayloadSchema>;

export function formatRevision(n: number): Revision {
  return `r${n}`;
}

/** The number of a well-formed revision; undefined for anything else. */
export function revisionNumber(revision: string): number | undefined {
  if (!/^r[1-9][0-9]*$/.test(revision)) return undefined;
  const n = Number(revision.slice(1));
  return Number.isSafeInteger(n) ? n : undefined;
}
