// Session checkpoints (spec §9.1): the JCS-encoded SessionCheckpointManifestV1 that points at the
// immutable bundle object, its publication order (bundle → verify → manifest → verify, all before
// any head moves), its admission check, and materializing a checkpoint's bundle for hydration.
import fsp from 'node:fs/promises';
import {
  SESSION_BUNDLE_MEDIA_TYPE,
  SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE,
  type SessionCheckpointManifestV1,
  SessionCheckpointManifestV1Schema,
  type StoredSessionCheckpoint,
  StoredSessionCheckpointSchema,
} from '../../protocol/repository';
import { assertBundleIsForSession } from './bundleIdentity';
import { sha256Hex } from './digestMeter';
import { SessionRepositoryError } from './errors';
import { encodeJcs } from './jcs';
import type { ImmutableObjectStore, WrittenFile } from './objectStore';

/** What the codec's pack returns about an archive (the fields the repository needs). */
export interface SessionBundleArtifactRef {
  path: string;
  archiveDigest: string;
  compressedBytes: number;
}

export function encodeSessionCheckpointManifestV1(value: SessionCheckpointManifestV1): Buffer {
  return Buffer.from(encodeJcs(SessionCheckpointManifestV1Schema.parse(value)), 'utf8');
}

/**
 * Admits a checkpoint: well-formed, the manifest ref has the manifest media type, the bundle ref
 * has the bundle media type, and the manifest ref's digest and size are those of the re-encoded
 * value. `integrity_mismatch` otherwise.
 */
export function admitStoredCheckpoint(checkpoint: unknown): StoredSessionCheckpoint {
  const parsed = StoredSessionCheckpointSchema.safeParse(checkpoint);
  if (!parsed.success) throw new SessionRepositoryError('integrity_mismatch', `checkpoint is malformed: ${parsed.error.message}`);
  const { manifest, value } = parsed.data;
  if (manifest.mediaType !== SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE) {
    throw new SessionRepositoryError('integrity_mismatch', `checkpoint manifest has media type ${manifest.mediaType}, expected ${SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE}`);
  }
  if (value.compatibilityBundle.mediaType !== SESSION_BUNDLE_MEDIA_TYPE) {
    throw new SessionRepositoryError('integrity_mismatch', `checkpoint bundle has media type ${value.compatibilityBundle.mediaType}, expected ${SESSION_BUNDLE_MEDIA_TYPE}`);
  }
  const encoded = encodeSessionCheckpointManifestV1(value);
  const digest = `sha256:${sha256Hex(encoded)}`;
  if (manifest.digest !== digest || manifest.bytes !== encoded.length) {
    throw new SessionRepositoryError('integrity_mismatch', 'checkpoint manifest ref does not match its value (digest or size differs from the re-encoded manifest)');
  }
  return parsed.data;
}

/** Admits the checkpoint and re-verifies both objects in the store (every checkout, commit, create, fork). */
export async function verifyStoredCheckpoint(objectStore: ImmutableObjectStore, checkpoint: StoredSessionCheckpoint): Promise<void> {
  admitStoredCheckpoint(checkpoint);
  await objectStore.assertReadable(checkpoint.manifest);
  await objectStore.assertReadable(checkpoint.value.compatibilityBundle);
}

/**
 * Publishes bundle then manifest, verifying each, before the caller may create or commit. `handOverBundle`: the
 * bundle file is the caller's to give up (see ObjectSource), so a file store may move it in rather than copy it.
 * `sessionId`: the session the checkpoint is for, given by every committer of a bundle made elsewhere (`session
 * commit`, `sessions/import`): one packed for another session is refused (`identity_mismatch`) before anything is
 * published (bundleIdentity.ts). A save, an activation and a fork pack the bundle for that session in the same call,
 * so they leave it out: a second read of the manifest would cost an activation 5–7 ms a turn (issue 25) and could
 * not fail.
 */
export async function publishSessionCheckpointV1(input: {
  objectStore: ImmutableObjectStore;
  compatibilityBundle: SessionBundleArtifactRef;
  sessionId?: string;
  handOverBundle?: boolean;
  /** With `handOverBundle`: what the codec's pack vouches it wrote (bundle `writtenArchiveOf`; see WrittenFile). */
  writtenBundle?: WrittenFile | undefined;
}): Promise<StoredSessionCheckpoint> {
  const { objectStore, compatibilityBundle } = input;
  if (input.sessionId !== undefined) await assertBundleIsForSession(compatibilityBundle.path, input.sessionId);
  const handOver = input.handOverBundle === true ? { handOver: true, ...(input.writtenBundle !== undefined ? { written: input.writtenBundle } : {}) } : {};
  const bundle = await objectStore.publish({
    digest: compatibilityBundle.archiveDigest,
    bytes: compatibilityBundle.compressedBytes,
    mediaType: SESSION_BUNDLE_MEDIA_TYPE,
    source: { kind: 'file', path: compatibilityBundle.path, ...handOver },
  });
  await objectStore.assertReadable(bundle);
  const value: SessionCheckpointManifestV1 = { schemaVersion: 1, compatibilityBundle: bundle };
  const encoded = encodeSessionCheckpointManifestV1(value);
  const manifest = await objectStore.publish({
    digest: `sha256:${sha256Hex(encoded)}`,
    bytes: encoded.length,
    mediaType: SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE,
    source: { kind: 'bytes', value: encoded },
  });
  await objectStore.assertReadable(manifest);
  return { manifest, value };
}

/**
 * Writes the checkpoint's bundle to `destination` (which must not exist) and returns the digest
 * the codec must expect. The manifest is re-verified first; the bundle is verified while it is
 * copied, and the destination appears only if it verified.
 */
export async function materializeSessionCheckpointV1(input: {
  objectStore: ImmutableObjectStore;
  checkpoint: StoredSessionCheckpoint;
  destination: string;
  maxBytes: number;
}): Promise<{ path: string; expectedArchiveDigest: string; bytes: number }> {
  const checkpoint = admitStoredCheckpoint(input.checkpoint);
  await input.objectStore.assertReadable(checkpoint.manifest);
  const bundle = checkpoint.value.compatibilityBundle;
  const out = await input.objectStore.materialize({ ref: bundle, destination: input.destination, maxBytes: input.maxBytes });
  return { path: out.path, expectedArchiveDigest: bundle.digest, bytes: out.bytes };
}

/**
 * The checkpoint's bundle as a file for the codec to read and verify (`expectedArchiveDigest`): the stored object
 * itself when the store keeps objects as files, else a verified copy at `copyTo`; `release` removes the copy (and
 * leaves a stored object alone). The manifest is re-verified first, as for materialize.
 */
export async function openSessionCheckpointBundleV1(input: {
  objectStore: ImmutableObjectStore;
  checkpoint: StoredSessionCheckpoint;
  copyTo: string;
  maxBytes: number;
}): Promise<{ path: string; expectedArchiveDigest: string; release(): Promise<void> }> {
  const checkpoint = admitStoredCheckpoint(input.checkpoint);
  const bundle = checkpoint.value.compatibilityBundle;
  const stored = await input.objectStore.storedFile?.(bundle, input.maxBytes);
  if (stored !== undefined) {
    await input.objectStore.assertReadable(checkpoint.manifest);
    return { path: stored, expectedArchiveDigest: bundle.digest, release: async () => undefined };
  }
  const copy = await materializeSessionCheckpointV1({ objectStore: input.objectStore, checkpoint: input.checkpoint, destination: input.copyTo, maxBytes: input.maxBytes });
  return { path: copy.path, expectedArchiveDigest: copy.expectedArchiveDigest, release: () => fsp.rm(copy.path, { force: true }) };
}
