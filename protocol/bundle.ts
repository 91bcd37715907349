// Session Bundle v1 wire contract (Apache Maka compatible, specs/maka-portable-sessions.md §1–8, §13):
// the manifest, the nine limits, the error codes and details, and the pack/inspect/hydrate/cleanup
// results. The companion JSON-RPC exposes these shapes; the codec in server/bundle produces them.
import { z } from 'zod';
import { Sha256DigestSchema } from './digest';

/** `sha256:` + 64 lowercase hex; upper case is not a digest (§5). */
export { SHA256_DIGEST_PATTERN, Sha256DigestSchema, type Sha256Digest } from './digest';

/** True when the string has no lone UTF-16 surrogate (it encodes to UTF-8 and back unchanged). */
export function isWellFormedUnicode(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return false;
    }
  }
  return true;
}

/** A non-empty, well-formed Unicode string (manifest rule for ids and media types). */
export const UnicodeStringSchema = z
  .string()
  .min(1)
  .refine(isWellFormedUnicode, 'must be well-formed Unicode (no lone surrogates)');

const safeNonNegative = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const SESSION_BUNDLE_CODEC_V1 = Object.freeze({
  name: 'maka-session-bundle',
  version: 1,
  canonicalizationVersion: 1,
  archive: 'ustar',
  compression: 'zstd',
  compressionLevel: 3,
} as const);

export const SessionBundleCodecSchema = z.strictObject({
  name: z.literal('maka-session-bundle'),
  version: z.literal(1),
  canonicalizationVersion: z.literal(1),
  archive: z.literal('ustar'),
  compression: z.literal('zstd'),
  compressionLevel: z.literal(3),
});

export const SessionBundleEnvelopeSchema = z.strictObject({
  sessionId: UnicodeStringSchema,
  lastCommittedActivationId: UnicodeStringSchema.optional(),
});
export type SessionBundleEnvelope = z.infer<typeof SessionBundleEnvelopeSchema>;

export const SessionBundleManifestV1Schema = z.strictObject({
  schemaVersion: z.literal(1),
  codec: SessionBundleCodecSchema,
  envelope: SessionBundleEnvelopeSchema,
  stateIdentity: z.strictObject({
    path: z.literal('state-identity.json'),
    mediaType: UnicodeStringSchema,
  }),
  payload: z.strictObject({
    statePath: z.literal('state/'),
    workspacePath: z.literal('workspace/'),
    treeDigest: Sha256DigestSchema,
    payloadBytes: safeNonNegative,
    entryCount: safeNonNegative.min(3),
  }),
});
export type SessionBundleManifestV1 = z.infer<typeof SessionBundleManifestV1Schema>;

/** The nine quotas (§6). All required, each a non-negative safe integer, inclusive; 0 is a valid fail-closed budget. */
export const SESSION_BUNDLE_LIMIT_KEYS = [
  'maxCompressedBytes',
  'maxDecompressedTarBytes',
  'maxPayloadBytes',
  'maxFileBytes',
  'maxEntryCount',
  'maxManifestBytes',
  'maxStateIdentityBytes',
  'maxPathBytes',
  'maxPathDepth',
] as const;
export const SessionBundleQuotaSchema = z.enum(SESSION_BUNDLE_LIMIT_KEYS);
export type SessionBundleQuota = z.infer<typeof SessionBundleQuotaSchema>;

export const SessionBundleLimitsSchema = z.strictObject({
  maxCompressedBytes: safeNonNegative,
  maxDecompressedTarBytes: safeNonNegative,
  maxPayloadBytes: safeNonNegative,
  maxFileBytes: safeNonNegative,
  maxEntryCount: safeNonNegative,
  maxManifestBytes: safeNonNegative,
  maxStateIdentityBytes: safeNonNegative,
  maxPathBytes: safeNonNegative,
  maxPathDepth: safeNonNegative,
});
export type SessionBundleLimits = z.infer<typeof SessionBundleLimitsSchema>;

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/**
 * Limits for people driving the CLI or the editor: Maka's session-export limits (§6, `SESSION_EXPORT_BUNDLE_LIMITS`):
 * archive ≤ 2 GiB, tar ≤ 8 GiB, payload ≤ 8 GiB, any file ≤ 2 GiB, ≤ 1,000,000 entries, manifest and identity ≤ 4 MiB,
 * paths ≤ 4096 bytes (USTAR caps them at 256 anyway) and ≤ 32 segments deep.
 */
export const DEFAULT_PEOPLE_LIMITS: SessionBundleLimits = Object.freeze({
  maxCompressedBytes: 2 * GiB,
  maxDecompressedTarBytes: 8 * GiB,
  maxPayloadBytes: 8 * GiB,
  maxFileBytes: 2 * GiB,
  maxEntryCount: 1_000_000,
  maxManifestBytes: 4 * MiB,
  maxStateIdentityBytes: 4 * MiB,
  maxPathBytes: 4096,
  maxPathDepth: 32,
});

/** The limits Maka's own codec tests use (§6): small, so a test that forgets a limit fails fast. */
export const CODEC_TEST_LIMITS: SessionBundleLimits = Object.freeze({
  maxCompressedBytes: 4 * MiB,
  maxDecompressedTarBytes: 8 * MiB,
  maxPayloadBytes: 4 * MiB,
  maxFileBytes: 2 * MiB,
  maxEntryCount: 100,
  maxManifestBytes: 256 * KiB,
  maxStateIdentityBytes: 64 * KiB,
  maxPathBytes: 255,
  maxPathDepth: 16,
});

/** The eleven stable error codes (§7). */
export const SESSION_BUNDLE_ERROR_CODES = [
  'invalid_manifest',
  'unsupported_schema',
  'unsupported_codec',
  'identity_mismatch',
  'integrity_mismatch',
  'quota_exceeded',
  'unsafe_path',
  'unsupported_entry',
  'destination_exists',
  'source_changed',
  'io_failure',
] as const;
export const SessionBundleErrorCodeSchema = z.enum(SESSION_BUNDLE_ERROR_CODES);
export type SessionBundleErrorCode = z.infer<typeof SessionBundleErrorCodeSchema>;

export const SessionBundleOperationSchema = z.enum(['pack', 'inspect', 'hydrate', 'cleanup']);
export type SessionBundleOperation = z.infer<typeof SessionBundleOperationSchema>;

/** Bounded error details: numbers and enum values only, never a raw path. */
export const SessionBundleErrorDetailsSchema = z.strictObject({
  operation: SessionBundleOperationSchema.optional(),
  quota: SessionBundleQuotaSchema.optional(),
  limit: safeNonNegative.optional(),
  observed: safeNonNegative.optional(),
  entryIndex: safeNonNegative.optional(),
  pathDepth: safeNonNegative.optional(),
});
export type SessionBundleErrorDetails = z.infer<typeof SessionBundleErrorDetailsSchema>;

/** The error as it crosses a process boundary (JSON-RPC `error.data`). */
export const SessionBundleErrorDataSchema = z.strictObject({
  code: SessionBundleErrorCodeSchema,
  message: z.string(),
  details: SessionBundleErrorDetailsSchema.optional(),
});
export type SessionBundleErrorData = z.infer<typeof SessionBundleErrorDataSchema>;

export const SessionBundleArtifactSchema = z.strictObject({
  path: z.string(),
  archiveDigest: Sha256DigestSchema,
  compressedBytes: safeNonNegative,
  decompressedTarBytes: safeNonNegative,
  payloadBytes: safeNonNegative,
  entryCount: safeNonNegative,
});
export type SessionBundleArtifact = z.infer<typeof SessionBundleArtifactSchema>;

export const SessionBundleInspectionSchema = z.strictObject({
  manifest: SessionBundleManifestV1Schema,
  archiveDigest: Sha256DigestSchema,
  compressedBytes: safeNonNegative,
  decompressedTarBytes: safeNonNegative,
  payloadBytes: safeNonNegative,
  entryCount: safeNonNegative,
});
export type SessionBundleInspection = z.infer<typeof SessionBundleInspectionSchema>;

export const SessionBundleHydrationSchema = SessionBundleInspectionSchema.extend({
  destinationRoot: z.string(),
  stateRoot: z.string(),
  workspaceRoot: z.string(),
});
export type SessionBundleHydration = z.infer<typeof SessionBundleHydrationSchema>;

export const HydrationStagingCleanupSchema = z.strictObject({
  destinationRoot: z.string(),
  removedStagingDirectories: safeNonNegative,
  removedOwnershipRecords: safeNonNegative,
});
export type HydrationStagingCleanup = z.infer<typeof HydrationStagingCleanupSchema>;

/** Workspace snapshot policy V1 (§13): why an entry was left out of a snapshot. */
export const SnapshotExclusionCategorySchema = z.enum(['source_control', 'dependency_tree', 'cache', 'log', 'runtime_scratch']);
export type SnapshotExclusionCategory = z.infer<typeof SnapshotExclusionCategorySchema>;

/** Snapshot error codes (§13 `SessionSnapshotError`). */
export const SessionSnapshotErrorCodeSchema = z.enum([
  'invalid_input',
  'snapshot_busy',
  'snapshot_cancelled',
  'session_not_quiescent',
  'source_changed',
  'unsafe_source',
  'policy_rejected',
  'quota_exceeded',
  'cleanup_failed',
  'io_failure',
]);
export type SessionSnapshotErrorCode = z.infer<typeof SessionSnapshotErrorCodeSchema>;

export const WorkspaceSnapshotReportSchema = z.strictObject({
  policyVersion: z.literal(1),
  includedEntries: safeNonNegative,
  excludedEntries: z.array(z.strictObject({ path: z.string(), category: SnapshotExclusionCategorySchema })),
  excludedEntriesByCategory: z.record(SnapshotExclusionCategorySchema, safeNonNegative),
  payloadBytes: safeNonNegative,
});
export type WorkspaceSnapshotReport = z.infer<typeof WorkspaceSnapshotReportSchema>;
