// Browsing a committed revision without hydrating it: the revision's bundle is checked out
// (verified against its committed digest), decompressed once into a cached tar file, and its
// USTAR headers indexed; listings and reads are then served from the index and that file.
// Revisions are immutable, so an index is valid forever; the cache keeps the most recent few.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DEFAULT_PEOPLE_LIMITS } from '../../protocol/bundle';
import { createBundleZstdDecompressor } from '../bundle/zstdFrame';
import { openSessionCheckpointBundleV1 } from '../repository/checkpoint';
import type { KnownFileCopy, KnownWorkspace } from '../sandboxes/remoteWorkspace';
import { forEachConcurrently } from '../sandboxes/transfer';
import type { SessionRepository } from '../repository/contract';
import { SandboxSessionsError } from '../../protocol/errors';

export interface RevisionEntry {
  name: string;
  directory: boolean;
  size: number;
}

export interface IndexedFile {
  offset: number;
  size: number;
  /** Mode 0755 in the bundle (the only other mode a file may have is 0644). */
  executable: boolean;
}

export interface RevisionIndex {
  digest: string;
  tarPath: string;
  files: Map<string, IndexedFile>;
  /** Directory path ('' = root) → its children, in archive (byte) order. */
  children: Map<string, RevisionEntry[]>;
  /** SHA-256 (hex) of files asked for by `fileDigest`, kept as long as the index: a revision never changes. */
  digests: Map<string, string>;
}

export class RevisionBrowseError extends SandboxSessionsError<'object_not_found' | 'integrity_mismatch'> {
  override readonly name = 'RevisionBrowseError';
  readonly service = 'sessions';
}

const BLOCK = 512;

/** A bundle file to index, the archive digest it must have, and what to do once it was read. */
interface IndexedBundle {
  path: string;
  expectedArchiveDigest: string;
  release(): Promise<void>;
}

function field(header: Buffer, start: number, length: number): string {
  const raw = header.subarray(start, start + length);
  const nul = raw.indexOf(0);
  return raw.subarray(0, nul === -1 ? length : nul).toString('utf8');
}

export class RevisionIndexCache {
  private readonly indexes = new Map<string, Promise<RevisionIndex>>();
  /** How many bundles were decompressed and indexed (a diagnostic; tests assert on it). */
  builds = 0;

  constructor(
    private readonly repository: () => Promise<SessionRepository>,
    private readonly cacheDir = path.join(os.tmpdir(), `sandbox-sessions-revisions-${process.pid}`),
    private readonly maxIndexes = 8,
  ) {}

  async index(sessionId: string, revision: string): Promise<RevisionIndex> {
    const repository = await this.repository();
    const committed = await repository.checkoutExact({ sessionId, revision });
    const digest = committed.checkpoint.value.compatibilityBundle.digest;
    const id = digest.slice('sha256:'.length);
    // The stored object itself when the repository keeps files (else a copy), decompressed as it is read and
    // verified against the committed digest on the way: one pass over the bundle instead of a verified copy first.
    return this.cached(digest, () =>
      openSessionCheckpointBundleV1({
        objectStore: repository.objects,
        checkpoint: committed.checkpoint,
        copyTo: path.join(this.cacheDir, `${id}.${process.hrtime.bigint()}.tar.zst`),
        maxBytes: DEFAULT_PEOPLE_LIMITS.maxCompressedBytes,
      }),
    );
  }

  /**
   * A bundle file this server keeps itself (a sandbox's opening snapshot, sessions/openingSnapshots.ts), indexed as a
   * revision is and checked against `digest`, the archive digest it was written with.
   */
  async indexFile(bundlePath: string, digest: string): Promise<RevisionIndex> {
    return this.cached(digest, async () => ({ path: bundlePath, expectedArchiveDigest: digest, release: async () => undefined }));
  }

  private cached(digest: string, open: () => Promise<IndexedBundle>): Promise<RevisionIndex> {
    let pending = this.indexes.get(digest);
    if (!pending) {
      pending = this.build(open, digest);
      this.indexes.set(digest, pending);
      pending.catch(() => this.indexes.delete(digest));
      while (this.indexes.size > this.maxIndexes) {
        const [oldest, old] = this.indexes.entries().next().value as [string, Promise<RevisionIndex>];
        this.indexes.delete(oldest);
        void old.then((i) => fsp.rm(i.tarPath, { force: true })).catch(() => undefined);
      }
    }
    return pending;
  }

  /** The revision's index if this cache holds it (or is building it), else undefined: nothing is built for it. */
  async held(sessionId: string, revision: string): Promise<RevisionIndex | undefined> {
    const repository = await this.repository();
    const committed = await repository.checkoutExact({ sessionId, revision });
    return this.indexes.get(committed.checkpoint.value.compatibilityBundle.digest);
  }

  private async build(open: () => Promise<IndexedBundle>, digest: string): Promise<RevisionIndex> {
    this.builds += 1;
    await fsp.mkdir(this.cacheDir, { recursive: true, mode: 0o700 });
    const tarPath = path.join(this.cacheDir, `${digest.slice('sha256:'.length)}.tar`);
    const limits = DEFAULT_PEOPLE_LIMITS;
    const bundle = await open();
    try {
      const hash = createHash('sha256');
      await pipeline(
        createReadStream(bundle.path, { highWaterMark: 1024 * 1024 }),
        bounded('compressed', limits.maxCompressedBytes, (chunk) => hash.update(chunk)),
        createBundleZstdDecompressor(),
        bounded('decompressed', limits.maxDecompressedTarBytes),
        createWriteStream(tarPath, { mode: 0o600, highWaterMark: 1024 * 1024 }),
      );
      if (`sha256:${hash.digest('hex')}` !== bundle.expectedArchiveDigest) {
        throw new RevisionBrowseError('integrity_mismatch', `the stored bundle of this revision does not match its committed digest ${bundle.expectedArchiveDigest}`);
      }
    } catch (err) {
      await fsp.rm(tarPath, { force: true });
      throw err;
    } finally {
      await bundle.release();
    }
    return { digest, tarPath, ...(await scanTar(tarPath)), digests: new Map() };
  }

  async list(sessionId: string, revision: string, dir: string): Promise<RevisionEntry[]> {
    return listIndexed(await this.index(sessionId, revision), dir, `${sessionId}@${revision}`);
  }

  async read(sessionId: string, revision: string, file: string, range: { offset: number; length: number }): Promise<{ contents: Buffer; size: number }> {
    return readIndexed(await this.index(sessionId, revision), file, range, `${sessionId}@${revision}`);
  }

  async dispose(): Promise<void> {
    this.indexes.clear();
    await fsp.rm(this.cacheDir, { recursive: true, force: true });
  }
}

/** One folder of an indexed bundle (`what`: how errors name the bundle). */
export function listIndexed(index: RevisionIndex, dir: string, what: string): RevisionEntry[] {
  const entries = index.children.get(trim(dir));
  if (!entries) throw new RevisionBrowseError('object_not_found', `${what} has no folder ${JSON.stringify(dir)}`);
  return entries;
}

/** Bytes of one file of an indexed bundle, `range` clamped to the file. */
export async function readIndexed(index: RevisionIndex, file: string, range: { offset: number; length: number }, what: string): Promise<{ contents: Buffer; size: number }> {
  const entry = index.files.get(trim(file));
  if (!entry) throw new RevisionBrowseError('object_not_found', `${what} has no file ${JSON.stringify(file)}`);
  const start = Math.min(range.offset, entry.size);
  const length = Math.max(0, Math.min(range.length, entry.size - start));
  const handle = await fsp.open(index.tarPath, 'r');
  try {
    const contents = Buffer.alloc(length);
    if (length > 0) await handle.read(contents, 0, length, entry.offset + start);
    return { contents, size: entry.size };
  } finally {
    await handle.close();
  }
}

/** The SHA-256 (lowercase hex) of the revision's file `archivePath` (a key of `index.files`), read once from its tar. */
export async function fileDigest(index: RevisionIndex, archivePath: string): Promise<string> {
  const known = index.digests.get(archivePath);
  if (known !== undefined) return known;
  const entry = index.files.get(archivePath);
  if (!entry) throw new RevisionBrowseError('object_not_found', `the revision has no file ${JSON.stringify(archivePath)}`);
  const hash = createHash('sha256');
  if (entry.size > 0) {
    for await (const chunk of createReadStream(index.tarPath, { start: entry.offset, end: entry.offset + entry.size - 1, highWaterMark: 256 * 1024 })) hash.update(chunk as Buffer);
  }
  const digest = hash.digest('hex');
  index.digests.set(archivePath, digest);
  return digest;
}

/** Files written per copy at once: each is a read of the tar and a write of a new file, mostly waiting on the disk. */
const COPY_CONCURRENCY = 8;
const COPY_CHUNK = 1024 * 1024;

/**
 * Writes revision files to new files (`target` must not exist; mode 0644, or 0755 when `executable`), from one open
 * handle on the revision's tar. Answers the archive paths it could not write (and removed what it began of them).
 */
export async function copyFilesOut(index: RevisionIndex, files: readonly KnownFileCopy[], signal?: AbortSignal): Promise<Set<string>> {
  const failed = new Set<string>();
  let tar: FileHandle;
  try {
    tar = await fsp.open(index.tarPath, 'r');
  } catch {
    return new Set(files.map((f) => f.archivePath)); // trimmed from the cache meanwhile
  }
  try {
    await forEachConcurrently(
      files,
      COPY_CONCURRENCY,
      async (file) => {
        const entry = index.files.get(file.archivePath);
        try {
          if (!entry) throw new RevisionBrowseError('object_not_found', `the revision has no file ${JSON.stringify(file.archivePath)}`);
          const out = await fsp.open(file.target, 'wx', file.executable ? 0o755 : 0o644);
          try {
            const buffer = Buffer.allocUnsafe(Math.min(COPY_CHUNK, entry.size));
            for (let done = 0; done < entry.size; ) {
              const { bytesRead } = await tar.read(buffer, 0, Math.min(buffer.length, entry.size - done), entry.offset + done);
              if (bytesRead === 0) throw new RevisionBrowseError('integrity_mismatch', `the revision's tar ends inside ${JSON.stringify(file.archivePath)}`);
              await out.write(buffer, 0, bytesRead);
              done += bytesRead;
            }
            if (file.executable) await out.chmod(0o755);
          } finally {
            await out.close();
          }
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw err;
          failed.add(file.archivePath);
          await fsp.rm(file.target, { force: true });
        }
      },
      signal,
    );
  } finally {
    await tar.close();
  }
  return failed;
}

/** The revision's files as a remote workspace is read against them (sandboxes/remoteWorkspace.ts). */
export function knownWorkspaceOf(index: RevisionIndex): KnownWorkspace {
  return { files: index.files, digest: (p) => fileDigest(index, p), copyFilesOut: (files, signal) => copyFilesOut(index, files, signal) };
}

/** Passes bytes on, each chunk to `see`, failing once more than `max` went through (a stored object is not trusted). */
function bounded(what: string, max: number, see?: (chunk: Buffer) => void): Transform {
  let total = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      total += chunk.length;
      if (total > max) done(new RevisionBrowseError('integrity_mismatch', `the stored bundle of this revision is over the ${what} size a bundle may have (${max} bytes)`));
      else {
        see?.(chunk);
        done(null, chunk);
      }
    },
  });
}

function trim(p: string): string {
  return p.replace(/^\/+/, '').replace(/\/+$/, '');
}

/** Indexes the USTAR headers of a canonical bundle tar (manifest first, then the payload tree). */
async function scanTar(tarPath: string): Promise<{ files: Map<string, IndexedFile>; children: Map<string, RevisionEntry[]> }> {
  const files = new Map<string, IndexedFile>();
  const children = new Map<string, RevisionEntry[]>([['', []]]);
  const handle = await fsp.open(tarPath, 'r');
  try {
    const size = (await handle.stat()).size;
    const header = Buffer.alloc(BLOCK);
    let offset = 0;
    while (offset + BLOCK <= size) {
      await handle.read(header, 0, BLOCK, offset);
      if (header.every((b) => b === 0)) break;
      const name = field(header, 0, 100);
      const prefix = field(header, 345, 155);
      const full = prefix ? `${prefix}/${name}` : name;
      const bytes = parseInt(field(header, 124, 12), 8);
      const type = String.fromCharCode(header[156] ?? 0);
      const mode = parseInt(field(header, 100, 8), 8);
      if (!Number.isSafeInteger(bytes) || bytes < 0 || full.split('/').includes('..') || full.startsWith('/')) {
        throw new RevisionBrowseError('integrity_mismatch', `the bundle has an invalid entry ${JSON.stringify(full)}`);
      }
      const dataOffset = offset + BLOCK;
      if (full !== 'manifest.json') {
        const directory = type === '5';
        const rel = full.replace(/\/$/, '');
        const parent = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
        const entry: RevisionEntry = { name: rel.slice(rel.lastIndexOf('/') + 1), directory, size: directory ? 0 : bytes };
        (children.get(parent) ?? children.set(parent, []).get(parent)!).push(entry);
        if (directory) children.set(rel, children.get(rel) ?? []);
        else files.set(rel, { offset: dataOffset, size: bytes, executable: (mode & 0o111) !== 0 });
      }
      offset = dataOffset + Math.ceil(bytes / BLOCK) * BLOCK;
    }
  } finally {
    await handle.close();
  }
  return { files, children };
}
