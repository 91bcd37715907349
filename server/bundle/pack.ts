// pack: a state root, a workspace root and an opaque identity descriptor → one Session Bundle v1 file
// (spec §1–8), deterministic to the byte, streamed with bounded memory, every quota enforced, published
// without replacing anything, and refused when the source changes between scan and emit.
// Two passes over the sources, because the manifest (first in the stream) carries the tree digest over every
// file's SHA-256: (1) scan + hash, the hashing on worker threads for big trees and started while the scan goes on;
// (2) write: re-read and re-hash each file into the tar batches, compress, hash and write the archive (see
// tarStream.ts and archiveWriter.ts). docs/bundle.md has the design and the figures. A file hydrated by this process
// and unchanged since (`knownDigests`) is not read in the first pass; the second pass checks it as any other.
import { createHash } from 'node:crypto';
import {
  SESSION_BUNDLE_CODEC_V1,
  isWellFormedUnicode,
  type SessionBundleArtifact,
  type SessionBundleLimits,
  type SessionBundleManifestV1,
} from '../../protocol/bundle';
import { CanonicalTreeBuilder, STATE_IDENTITY_PATH, STATE_ROOT, WORKSPACE_ROOT } from './canonicalTree';
import { toSessionBundleError } from './errors';
import { ArchiveWriter, IN_THREAD_BATCH_BYTES, TAR_BATCH_BYTES, type ArchiveSink } from './archiveWriter';
import { assertSessionBundleLimits, checkQuota } from './limits';
import { encodeManifest, MANIFEST_PATH } from './manifest';
import { pathDepth, utf8Length } from './pathLanguage';
import { assertDestinationFree, createPackTemp, discardPackTemp, publishPackTemp, recordWrittenArchive, type PackTemp, type WrittenIdentity } from './publish';
import type { BundleProgress } from './reader';
import { SourceHasher } from './sourceHasher';
import { assertDirectoriesUnchanged, type ScanFilter, scanRoot, sortEntries, type ScanState, type SourceEntry } from './sourceTree';
import { tarLength, writeTar, type PackEntry } from './tarStream';
import { bundleTuning } from './tuning';
import { WorkerArchiveWriter } from './workerArchiveWriter';

export interface PackOptions {
  stateRoot: string;
  workspaceRoot: string;
  stateIdentity: { mediaType: string; bytes: Uint8Array };
  envelope: { sessionId: string; lastCommittedActivationId?: string };
  destination: string;
  limits: SessionBundleLimits;
  onProgress?: (p: BundleProgress) => void;
  /**
   * Which workspace entries are packed (see ScanFilter); all when absent. Leaving entries out changes nothing about
   * how the others are written: packWorkspace passes the snapshot policy here when it packs a quiet tree in place.
   */
  workspaceFilter?: ScanFilter;
  /**
   * Digests this process computed over the bytes it wrote into the source files (hydrate's `onFileWritten`), by
   * archive path, with each file's identity as it was left: a file the scan finds still exactly that inode (device,
   * inode, size, mtime, ctime) is not read in the first pass. The write pass re-reads and re-hashes every file all the
   * same and refuses one whose bytes differ (`source_changed`), so the output is the same bytes either way.
   */
  knownDigests?: ReadonlyMap<string, KnownDigest>;
  /**
   * Hears, once the bundle is published, what was packed from the source roots: every directory and file as the scan
   * found it (its archive path, normalized mode, fingerprint and, for a file, the digest the bundle holds) and what
   * `workspaceFilter` left out. For a caller that keeps the packed tree itself (activation/keptSessionTrees.ts).
   */
  onPacked?: (tree: PackedSourceTree) => void;
}

/** What pack read from its source roots (`onPacked`): the entries in archive order and the archive paths left out. */
export interface PackedSourceTree {
  entries: readonly Readonly<SourceEntry>[];
  skipped: readonly string[];
}

export interface KnownDigest {
  identity: WrittenIdentity;
  digest: Buffer;
}

function knownDigestOf(entry: SourceEntry, known: ReadonlyMap<string, KnownDigest> | undefined): Buffer | undefined {
  const k = entry.kind === 'file' ? known?.get(entry.archivePath) : undefined;
  if (k === undefined) return undefined;
  const f = entry.fingerprint;
  const id = k.identity;
  const same = f.dev === id.dev && f.ino === id.ino && f.size === id.size && f.mtimeNs === id.mtimeNs && f.ctimeNs === id.ctimeNs;
  return same && k.digest.length === 32 ? Buffer.from(k.digest) : undefined;
}

function requireUnicode(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '' || !isWellFormedUnicode(value)) throw new TypeError(`${what} must be a non-empty, well-formed Unicode string`);
  return value;
}

function requirePath(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${what} must be a non-empty path`);
  return value;
}

interface CheckedPackOptions {
  limits: SessionBundleLimits;
  stateRoot: string;
  workspaceRoot: string;
  destination: string;
  mediaType: string;
  identityBytes: Buffer;
  sessionId: string;
  activation: string | undefined;
}

/** Step 1: every option checked and copied (the caller's identity buffer may change later). */
function checkPackOptions(options: PackOptions): CheckedPackOptions {
  const limits = assertSessionBundleLimits(options.limits);
  const stateRoot = requirePath(options.stateRoot, 'stateRoot');
  const workspaceRoot = requirePath(options.workspaceRoot, 'workspaceRoot');
  const destination = requirePath(options.destination, 'destination');
  const mediaType = requireUnicode(options.stateIdentity?.mediaType, 'stateIdentity.mediaType');
  if (!(options.stateIdentity.bytes instanceof Uint8Array)) throw new TypeError('stateIdentity.bytes must be a Uint8Array');
  const identityBytes = Buffer.from(options.stateIdentity.bytes);
  const sessionId = requireUnicode(options.envelope?.sessionId, 'envelope.sessionId');
  const activation = options.envelope.lastCommittedActivationId;
  if (activation !== undefined) requireUnicode(activation, 'envelope.lastCommittedActivationId');
  return { limits, stateRoot, workspaceRoot, destination, mediaType, identityBytes, sessionId, activation };
}

/** Step 2: the quotas the fixed entries (manifest, state identity) must meet before anything is scanned. */
function checkFixedEntries(limits: SessionBundleLimits, identityBytes: Buffer): void {
  checkQuota(limits, 'maxStateIdentityBytes', identityBytes.length, 'pack');
  checkQuota(limits, 'maxFileBytes', identityBytes.length, 'pack');
  for (const fixed of [MANIFEST_PATH, STATE_IDENTITY_PATH]) {
    checkQuota(limits, 'maxPathBytes', utf8Length(fixed), 'pack');
    checkQuota(limits, 'maxPathDepth', pathDepth(fixed), 'pack', { pathDepth: 1 });
  }
}

/** Step 3 (pass 1): scan both roots into `scan`, hashing every file while the scan goes on. */
async function scanAndHash(
  checked: CheckedPackOptions,
  scan: ScanState,
  hasher: SourceHasher,
  workspaceFilter: ScanFilter | undefined,
  known: ReadonlyMap<string, KnownDigest> | undefined,
): Promise<void> {
  checkQuota(checked.limits, 'maxPayloadBytes', scan.payloadBytes, 'pack');
  scan.entryCount = 1;
  checkQuota(checked.limits, 'maxEntryCount', scan.entryCount, 'pack');
  const onEntry = (entry: SourceEntry): void => {
    const digest = knownDigestOf(entry, known);
    if (digest !== undefined) entry.digest = digest;
    else hasher.add(entry);
  };
  await scanRoot(checked.stateRoot, STATE_ROOT, checked.limits, scan, onEntry);
  await scanRoot(checked.workspaceRoot, WORKSPACE_ROOT, checked.limits, scan, onEntry, workspaceFilter);
  sortEntries(scan.entries);
  await hasher.finish();
  await hasher.close();
}

interface PackPlan {
  entries: PackEntry[];
  summary: ReturnType<CanonicalTreeBuilder['finish']>;
  manifestBytes: Buffer;
  decompressedTarBytes: number;
}

/** Step 4: the canonical tree over the hashed entries, the manifest that carries its digest, and the tar's length. */
function planArchive(checked: CheckedPackOptions, scanned: SourceEntry[]): PackPlan {
  const { identityBytes, activation, sessionId, limits } = checked;
  const identity: PackEntry = {
    kind: 'identity',
    archivePath: STATE_IDENTITY_PATH,
    bytes: identityBytes,
    size: identityBytes.length,
    digest: createHash('sha256').update(identityBytes).digest(),
  };
  const entries: PackEntry[] = [identity, ...scanned];
  const tree = new CanonicalTreeBuilder(entries.length);
  for (const e of entries) {
    tree.add(e.kind === 'directory'
      ? { kind: 'directory', path: e.archivePath, mode: 0o755, size: 0 }
      : { kind: 'file', path: e.archivePath, mode: e.kind === 'identity' ? 0o644 : e.mode, size: e.size, digest: e.digest });
  }
  const summary = tree.finish();
  const manifest: SessionBundleManifestV1 = {
    schemaVersion: 1,
    codec: { ...SESSION_BUNDLE_CODEC_V1 },
    envelope: activation === undefined ? { sessionId } : { sessionId, lastCommittedActivationId: activation },
    stateIdentity: { path: STATE_IDENTITY_PATH, mediaType: checked.mediaType },
    payload: { statePath: STATE_ROOT, workspacePath: WORKSPACE_ROOT, treeDigest: summary.treeDigest, payloadBytes: summary.payloadBytes, entryCount: summary.entryCount },
  };
  const manifestBytes = encodeManifest(manifest);
  checkQuota(limits, 'maxManifestBytes', manifestBytes.length, 'pack');
  const decompressedTarBytes = tarLength(manifestBytes.length, entries);
  checkQuota(limits, 'maxDecompressedTarBytes', decompressedTarBytes, 'pack');
  return { entries, summary, manifestBytes, decompressedTarBytes };
}

/** The archive sink for a tar of this size: compression on a worker thread for big ones. */
function createArchiveSink(temp: PackTemp, limits: SessionBundleLimits, decompressedTarBytes: number, onProgress: PackOptions['onProgress']): ArchiveSink {
  const sinkOptions = {
    fd: temp.handle.fd,
    limits,
    onTarBytes: (bytes: number) => onProgress?.({ phase: 'write', bytes, totalBytes: decompressedTarBytes }),
  };
  return decompressedTarBytes >= bundleTuning.workerWriterMinTarBytes
    ? new WorkerArchiveWriter({ ...sinkOptions, batchBytes: TAR_BATCH_BYTES })
    : new ArchiveWriter({ ...sinkOptions, batchBytes: IN_THREAD_BATCH_BYTES });
}

export async function packSessionBundle(options: PackOptions): Promise<SessionBundleArtifact> {
  const checked = checkPackOptions(options);
  const { limits, destination } = checked;
  const onProgress = options.onProgress;

  let temp: PackTemp | undefined;
  let writer: ArchiveSink | undefined;
  let published = false;
  let hashed = 0;
  const hasher = new SourceHasher({
    workers: bundleTuning.hashWorkers,
    parallelMinBytes: bundleTuning.parallelHashMinBytes,
    onBytes: (n) => {
      hashed += n;
      onProgress?.({ phase: 'hash', bytes: hashed, totalBytes: scan.payloadBytes });
    },
  });
  const scan: ScanState = { entries: [], payloadBytes: checked.identityBytes.length, entryCount: 0 };
  let artifact: SessionBundleArtifact;
  try {
    checkFixedEntries(limits, checked.identityBytes);
    await assertDestinationFree(destination);
    await scanAndHash(checked, scan, hasher, options.workspaceFilter, options.knownDigests);
    const plan = planArchive(checked, scan.entries);

    // Pass 2: write, then make sure no directory changed since the scan before publishing.
    temp = await createPackTemp(destination);
    writer = createArchiveSink(temp, limits, plan.decompressedTarBytes, onProgress);
    await writeTar(plan.manifestBytes, plan.entries, plan.decompressedTarBytes, writer);
    const archiveDigest = await writer.finish();
    await assertDirectoriesUnchanged(scan.entries, scan.skipped);
    onProgress?.({ phase: 'verify', bytes: writer.bytes, totalBytes: writer.bytes });
    const identity = await publishPackTemp(temp, destination, writer.bytes, () => (published = true));
    artifact = {
      path: destination,
      archiveDigest,
      compressedBytes: writer.bytes,
      decompressedTarBytes: plan.decompressedTarBytes,
      payloadBytes: plan.summary.payloadBytes,
      entryCount: plan.summary.entryCount,
    };
    if (identity !== undefined) recordWrittenArchive(artifact, { digest: archiveDigest, identity });
  } catch (err) {
    await writer?.destroy();
    await hasher.close();
    if (temp !== undefined) await discardPackTemp(temp, destination, published);
    throw toSessionBundleError(err, 'pack');
  }
  options.onPacked?.({ entries: scan.entries, skipped: scan.skipped ?? [] });
  return artifact;
}
