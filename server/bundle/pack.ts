// pack: a state root, a workspace root and an opaque identity descriptor → one Session Bundle v1 file
// (spec §1–8), deterministic to the byte, streamed with bounded memory, every quota enforced, published
// without replacing anything, and refused when the source changes between scan and emit.
import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  SESSION_BUNDLE_CODEC_V1,
  isWellFormedUnicode,
  type SessionBundleArtifact,
  type SessionBundleLimits,
  type SessionBundleManifestV1,
} from '../../protocol/bundle';
import { CanonicalTreeBuilder, STATE_IDENTITY_PATH, STATE_ROOT, WORKSPACE_ROOT } from './canonicalTree';
import { toSessionBundleError } from './errors';
import { ArchiveMeter } from './archiveMeter';
import { handleWriter } from './fsx';
import { assertSessionBundleLimits, checkQuota } from './limits';
import { encodeManifest, MANIFEST_PATH } from './manifest';
import { pathDepth, utf8Length } from './pathLanguage';
import { assertDestinationFree, createPackTemp, discardPackTemp, publishPackTemp, type PackTemp } from './publish';
import type { BundleProgress } from './reader';
import { assertDirectoriesUnchanged, scanRoot, sortEntries, type ScanState } from './sourceTree';
import { coalesce, hashSourceFiles, tarBody, tarLength, TERMINATOR, type PackEntry } from './tarStream';
import { createBundleZstdCompressor, StripTrailingEmptyFrame } from './zstdFrame';

export interface PackOptions {
  stateRoot: string;
  workspaceRoot: string;
  stateIdentity: { mediaType: string; bytes: Uint8Array };
  envelope: { sessionId: string; lastCommittedActivationId?: string };
  destination: string;
  limits: SessionBundleLimits;
  onProgress?: (p: BundleProgress) => void;
}

function requireUnicode(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '' || !isWellFormedUnicode(value)) throw new TypeError(`${what} must be a non-empty, well-formed Unicode string`);
  return value;
}

function requirePath(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${what} must be a non-empty path`);
  return value;
}

export async function packSessionBundle(options: PackOptions): Promise<SessionBundleArtifact> {
  const limits = assertSessionBundleLimits(options.limits);
  const stateRoot = requirePath(options.stateRoot, 'stateRoot');
  const workspaceRoot = requirePath(options.workspaceRoot, 'workspaceRoot');
  const destination = requirePath(options.destination, 'destination');
  const mediaType = requireUnicode(options.stateIdentity?.mediaType, 'stateIdentity.mediaType');
  if (!(options.stateIdentity.bytes instanceof Uint8Array)) throw new TypeError('stateIdentity.bytes must be a Uint8Array');
  const identityBytes = Buffer.from(options.stateIdentity.bytes); // a copy: the caller's buffer may change later
  const sessionId = requireUnicode(options.envelope?.sessionId, 'envelope.sessionId');
  const activation = options.envelope.lastCommittedActivationId;
  if (activation !== undefined) requireUnicode(activation, 'envelope.lastCommittedActivationId');
  const onProgress = options.onProgress;

  let temp: PackTemp | undefined;
  let published = false;
  try {
    checkQuota(limits, 'maxStateIdentityBytes', identityBytes.length, 'pack');
    checkQuota(limits, 'maxFileBytes', identityBytes.length, 'pack');
    for (const fixed of [MANIFEST_PATH, STATE_IDENTITY_PATH]) {
      checkQuota(limits, 'maxPathBytes', utf8Length(fixed), 'pack');
      checkQuota(limits, 'maxPathDepth', pathDepth(fixed), 'pack', { pathDepth: 1 });
    }
    await assertDestinationFree(destination);

    const scan: ScanState = { entries: [], payloadBytes: identityBytes.length, entryCount: 0 };
    checkQuota(limits, 'maxPayloadBytes', scan.payloadBytes, 'pack');
    scan.entryCount = 1;
    checkQuota(limits, 'maxEntryCount', scan.entryCount, 'pack');
    await scanRoot(stateRoot, STATE_ROOT, limits, scan);
    await scanRoot(workspaceRoot, WORKSPACE_ROOT, limits, scan);
    sortEntries(scan.entries);
    let hashed = 0;
    await hashSourceFiles(scan.entries, (n) => {
      hashed += n;
      onProgress?.({ phase: 'hash', bytes: hashed, totalBytes: scan.payloadBytes });
    });

    const identity: PackEntry = {
      kind: 'identity',
      archivePath: STATE_IDENTITY_PATH,
      bytes: identityBytes,
      size: identityBytes.length,
      digest: createHash('sha256').update(identityBytes).digest(),
    };
    const entries: PackEntry[] = [identity, ...scan.entries];
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
      stateIdentity: { path: STATE_IDENTITY_PATH, mediaType },
      payload: { statePath: STATE_ROOT, workspacePath: WORKSPACE_ROOT, treeDigest: summary.treeDigest, payloadBytes: summary.payloadBytes, entryCount: summary.entryCount },
    };
    const manifestBytes = encodeManifest(manifest);
    checkQuota(limits, 'maxManifestBytes', manifestBytes.length, 'pack');
    const decompressedTarBytes = tarLength(manifestBytes.length, entries);
    checkQuota(limits, 'maxDecompressedTarBytes', decompressedTarBytes, 'pack');

    temp = await createPackTemp(destination);
    const meter = new ArchiveMeter(limits, 'pack');
    let written = 0;
    const progress = new Transform({
      transform(chunk: Buffer, _enc, done) {
        written += chunk.length;
        onProgress?.({ phase: 'write', bytes: written, totalBytes: decompressedTarBytes });
        done(null, chunk);
      },
    });
    await pipeline(
      Readable.from(coalesce(tarBody(manifestBytes, entries, decompressedTarBytes), TERMINATOR), { objectMode: false, highWaterMark: 512 * 1024 }),
      progress,
      createBundleZstdCompressor(),
      new StripTrailingEmptyFrame(),
      meter,
      handleWriter(temp.handle),
    );
    await assertDirectoriesUnchanged(scan.entries);
    const archiveDigest = meter.digest;
    onProgress?.({ phase: 'verify', bytes: meter.bytes, totalBytes: meter.bytes });
    await publishPackTemp(temp, destination, archiveDigest, meter.bytes, () => (published = true));
    return {
      path: destination,
      archiveDigest,
      compressedBytes: meter.bytes,
      decompressedTarBytes,
      payloadBytes: summary.payloadBytes,
      entryCount: summary.entryCount,
    };
  } catch (err) {
    if (temp !== undefined) await discardPackTemp(temp, destination, published);
    throw toSessionBundleError(err, 'pack');
  }
}
