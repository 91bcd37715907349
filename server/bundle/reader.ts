// The one streaming reader/validator behind inspect and hydrate (spec §1–7): reads every byte of the file,
// checks the frame, decompresses with a capped window, validates every header, path, quota and padding, hashes
// the tree and the archive, and only then declares the bundle good. Hydrate plugs in handlers that write
// entries into staging once their header has passed every check; nothing trusts an earlier inspection.
// The compressed side (read, meter, hash, frame check, decompress) runs in this thread for small bundles and on a
// worker thread (readerWorker.ts) from bundleTuning.workerReaderMinBytes; the tar is validated here either way.
import { createHash } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { SessionBundleInspection, SessionBundleLimits, SessionBundleManifestV1, SessionBundleOperation } from '../../protocol/bundle';
import { ArchiveMeter } from './archiveMeter';
import { ByteSource } from './byteSource';
import { ArchiveReaderWorker } from './readerWorker';
import { bundleTuning } from './tuning';
import { CanonicalTreeBuilder, STATE_IDENTITY_PATH } from './canonicalTree';
import { SessionBundleError, toSessionBundleError } from './errors';
import { fingerprintOf, handleReader, sameFingerprint } from './fsx';
import { checkQuota } from './limits';
import { decodeManifest, MANIFEST_PATH } from './manifest';
import { pathDepth, utf8Length } from './pathLanguage';
import { BLOCK, decodeUstarHeader, isZeroBlock, paddingLength, type UstarEntry } from './ustar';
import { CanonicalFrameValidator, createBundleZstdDecompressor } from './zstdFrame';

export interface BundleSource {
  path: string;
  expectedArchiveDigest?: string;
}

export interface BundleProgress {
  /** pack: hash (first pass over the sources), write (tar bytes), verify (publication checks); inspect/hydrate: read. */
  phase: 'hash' | 'write' | 'verify' | 'read';
  bytes: number;
  totalBytes?: number;
}

export interface ReadHandlers {
  /**
   * Called first when the compressed side runs on a worker thread: chunks are then views into `reader.ring`, valid
   * until the next chunk is requested unless the handler takes over releasing slots (`reader.holdSlot`).
   */
  onArchiveReader?(reader: ArchiveReaderWorker): void;
  /** After the manifest passed; before any payload entry. */
  onManifest?(manifest: SessionBundleManifestV1): void | Promise<void>;
  onDirectory?(entry: UstarEntry, index: number): void | Promise<void>;
  onFileStart?(entry: UstarEntry, index: number): void | Promise<void>;
  onFileChunk?(chunk: Buffer): void | Promise<void>;
  /** `digest`: the SHA-256 of exactly the content bytes handed to onFileChunk. */
  onFileEnd?(digest: Buffer): void | Promise<void>;
}

function integrity(reason: string, entryIndex?: number): SessionBundleError {
  return new SessionBundleError('integrity_mismatch', `integrity mismatch: ${reason}`, entryIndex === undefined ? undefined : { entryIndex });
}

async function verifyZero(source: ByteSource, n: number): Promise<void> {
  if (n === 0) return;
  const pad = await source.readExact(n);
  if (!isZeroBlock(pad)) throw integrity('non-zero padding after file content');
}

async function readManifestEntry(source: ByteSource, limits: SessionBundleLimits, operation: SessionBundleOperation): Promise<{ manifest: SessionBundleManifestV1; tarBytes: number }> {
  const block = await source.readExact(BLOCK);
  if (isZeroBlock(block)) throw new SessionBundleError('invalid_manifest', 'invalid manifest: the archive has no manifest.json (first block is zero)');
  let header: UstarEntry;
  try {
    header = decodeUstarHeader(block);
  } catch (err) {
    if (err instanceof SessionBundleError && err.code === 'integrity_mismatch') throw err;
    throw new SessionBundleError('invalid_manifest', 'invalid manifest: the first entry is not a canonical manifest.json header');
  }
  checkQuota(limits, 'maxPathBytes', utf8Length(header.path), operation);
  checkQuota(limits, 'maxPathDepth', pathDepth(header.path), operation);
  if (header.path !== MANIFEST_PATH || header.kind !== 'file' || header.mode !== 0o644) {
    throw new SessionBundleError('invalid_manifest', 'invalid manifest: the first entry must be manifest.json, a 0644 file');
  }
  checkQuota(limits, 'maxManifestBytes', header.size, operation);
  const bytes = await source.readExact(header.size);
  const manifest = decodeManifest(bytes);
  await verifyZero(source, paddingLength(header.size));
  return { manifest, tarBytes: BLOCK + header.size + paddingLength(header.size) };
}

async function readEntries(
  source: ByteSource,
  manifest: SessionBundleManifestV1,
  limits: SessionBundleLimits,
  operation: SessionBundleOperation,
  handlers: ReadHandlers,
): Promise<void> {
  const declared = manifest.payload.entryCount;
  const tree = new CanonicalTreeBuilder(declared);
  let payload = 0;
  for (let index = 0; ; index++) {
    const block = await source.readExact(BLOCK);
    if (isZeroBlock(block)) {
      if (index < declared) throw integrity(`archive ends after ${index} of ${declared} declared entries`, index);
      if (!isZeroBlock(await source.readExact(BLOCK))) throw integrity('terminator is not two zero blocks');
      if (!(await source.atEnd())) throw integrity('bytes after the two terminator blocks');
      break;
    }
    if (index >= declared) throw integrity(`more entries than the ${declared} declared`, index);
    const header = decodeUstarHeader(block);
    const depth = pathDepth(header.path);
    checkQuota(limits, 'maxPathBytes', utf8Length(header.path), operation, { entryIndex: index });
    checkQuota(limits, 'maxPathDepth', depth, operation, { entryIndex: index, pathDepth: depth });
    if (header.kind === 'file') {
      if (header.path === STATE_IDENTITY_PATH) checkQuota(limits, 'maxStateIdentityBytes', header.size, operation, { entryIndex: index });
      checkQuota(limits, 'maxFileBytes', header.size, operation, { entryIndex: index });
      payload += header.size;
      checkQuota(limits, 'maxPayloadBytes', payload, operation, { entryIndex: index });
      if (payload > manifest.payload.payloadBytes) throw integrity('payload is larger than the manifest declares', index);
    }
    tree.begin(header);
    if (header.kind === 'directory') {
      await handlers.onDirectory?.(header, index);
      tree.complete();
      continue;
    }
    await handlers.onFileStart?.(header, index);
    const hash = createHash('sha256');
    for await (const slice of source.readSlices(header.size)) {
      hash.update(slice);
      await handlers.onFileChunk?.(slice);
    }
    await verifyZero(source, paddingLength(header.size));
    const digest = hash.digest();
    await handlers.onFileEnd?.(digest);
    tree.complete(digest);
  }
  const summary = tree.finish();
  if (summary.treeDigest !== manifest.payload.treeDigest) throw integrity('tree digest differs from the manifest');
  if (summary.payloadBytes !== manifest.payload.payloadBytes) throw integrity('payload bytes differ from the manifest');
  if (summary.entryCount !== manifest.payload.entryCount) throw integrity('entry count differs from the manifest');
}

/**
 * Only the manifest, from the start of the stream — decompressing no further: what a committer reads to check whose
 * session a bundle is (its envelope) before publishing it. It proves nothing about the rest of the bundle; every
 * later read (inspect, hydrate, checkout) validates all of it again.
 */
export async function readBundleManifest(path: string, limits: SessionBundleLimits, operation: SessionBundleOperation): Promise<SessionBundleManifestV1> {
  let handle: fsp.FileHandle | undefined;
  const stop = new AbortController();
  let manifest: SessionBundleManifestV1 | undefined;
  try {
    handle = await fsp.open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const st = await handle.stat();
    if (!st.isFile()) throw new SessionBundleError('io_failure', 'the bundle is not a regular file');
    checkQuota(limits, 'maxCompressedBytes', st.size, operation);
    const consume = async (chunks: AsyncIterable<Buffer>): Promise<void> => {
      const source = new ByteSource(chunks[Symbol.asyncIterator](), (_n, total) => checkQuota(limits, 'maxDecompressedTarBytes', total, operation));
      manifest = (await readManifestEntry(source, limits, operation)).manifest;
      stop.abort(); // the rest of the stream is not read
    };
    await pipeline(handleReader(handle), new CanonicalFrameValidator(), createBundleZstdDecompressor(), consume, { signal: stop.signal }).catch((err: unknown) => {
      if (manifest === undefined || !stop.signal.aborted) throw err;
    });
    if (manifest === undefined) throw integrity('no manifest was read');
    return manifest;
  } catch (err) {
    throw toSessionBundleError(err, operation, handle !== undefined);
  } finally {
    await handle?.close();
  }
}

/** Read and validate a whole bundle; handlers see entries only after their checks passed. */
export async function readBundle(
  bundle: BundleSource,
  limits: SessionBundleLimits,
  operation: SessionBundleOperation,
  handlers: ReadHandlers = {},
  onProgress?: (p: BundleProgress) => void,
): Promise<SessionBundleInspection> {
  let handle: fsp.FileHandle | undefined;
  let worker: ArchiveReaderWorker | undefined;
  try {
    // O_NONBLOCK: a FIFO at the path must not hang us; it is refused as not a regular file just below.
    handle = await fsp.open(bundle.path, constants.O_RDONLY | constants.O_NONBLOCK);
    const before = await handle.stat({ bigint: true });
    if (!before.isFile()) throw new SessionBundleError('io_failure', 'the bundle is not a regular file');
    checkQuota(limits, 'maxCompressedBytes', Number(before.size), operation);
    const totalBytes = Number(before.size);
    let manifest: SessionBundleManifestV1 | undefined;
    let tarBytes = 0;
    const consume = async (chunks: AsyncIterable<Buffer>): Promise<void> => {
      const source = new ByteSource(chunks[Symbol.asyncIterator](), (_n, total) => checkQuota(limits, 'maxDecompressedTarBytes', total, operation));
      const head = await readManifestEntry(source, limits, operation);
      manifest = head.manifest;
      checkQuota(limits, 'maxEntryCount', manifest.payload.entryCount, operation);
      checkQuota(limits, 'maxPayloadBytes', manifest.payload.payloadBytes, operation);
      await handlers.onManifest?.(manifest);
      await readEntries(source, manifest, limits, operation, handlers);
      tarBytes = source.total;
    };
    let archive: { bytes: number; digest: string };
    if (totalBytes >= bundleTuning.workerReaderMinBytes) {
      worker = new ArchiveReaderWorker(handle.fd, limits, operation, (bytes) => onProgress?.({ phase: 'read', bytes, totalBytes }));
      handlers.onArchiveReader?.(worker);
      await consume(worker.chunks());
      if (worker.result === undefined) throw integrity('the reading worker did not finish');
      archive = worker.result;
    } else {
      const meter = new ArchiveMeter(limits, operation, (bytes) => onProgress?.({ phase: 'read', bytes, totalBytes }));
      await pipeline(handleReader(handle), meter, new CanonicalFrameValidator(), createBundleZstdDecompressor(), consume);
      archive = { bytes: meter.bytes, digest: meter.digest.slice('sha256:'.length) };
    }
    const after = await handle.stat({ bigint: true });
    if (!sameFingerprint(fingerprintOf(before), fingerprintOf(after)) || BigInt(archive.bytes) !== after.size) {
      throw new SessionBundleError('source_changed', 'the bundle file changed while it was being read');
    }
    const archiveDigest = `sha256:${archive.digest}`;
    if (bundle.expectedArchiveDigest !== undefined && archiveDigest !== bundle.expectedArchiveDigest) {
      throw integrity('archive digest differs from the expected digest');
    }
    if (manifest === undefined) throw integrity('no manifest was read');
    return {
      manifest,
      archiveDigest,
      compressedBytes: archive.bytes,
      decompressedTarBytes: tarBytes,
      payloadBytes: manifest.payload.payloadBytes,
      entryCount: manifest.payload.entryCount,
    };
  } catch (err) {
    throw toSessionBundleError(err, operation, handle !== undefined);
  } finally {
    await worker?.close(); // before the descriptor it reads is closed
    await handle?.close();
  }
}
