// Writes validated entries into hydration staging (spec §8 step 5): directories 0755, files created O_EXCL with
// 0644/0755 whatever the umask, each file fsynced before publication. Nothing is written before the reader has
// passed the entry's header; `drain` must succeed before publishing. A hydrate into a destination that does not
// outlive a crash (an activation's throw-away sandbox) skips the fsyncs: what they protect is gone with it.
// Two ways, same calls and same results:
// * in this thread (small bundles): synchronous calls straight from the decompressed chunks — microseconds each from
//   the page cache, where an asynchronous call per step cost a thread-pool round trip; a chunk is at most 1 MiB.
//   The fsyncs, which wait for the disk, run in the background (FileSyncer).
// * on file-writer threads, when the reader runs its compressed side on a worker (big bundles): the tar bytes already
//   sit in shared slots, so this thread sends each writer the operations for its directories and files, one batch
//   per slot, naming byte ranges of the slot; a slot is refilled once every writer that got a batch for it has
//   answered. A writer creates, writes, chmods, fsyncs and closes each of its files, so file creation — the
//   costliest part of hydrating many files — runs beside validation, and as many fsyncs as writers are in flight
//   without occupying the libuv thread pool, where they would stall the decompressor. Directories are made by the
//   writers too (a blocking mkdir here, ms each on a busy disk, stalled validation and every writer with it): a
//   directory goes to the writer of the next file (the archive lists a directory before what it holds), and a writer
//   that finds a file's directory missing — made by another writer whose batch runs later — makes it there and then
//   (it was declared and checked already: the reader requires every parent to precede its entries).
// With `onWritten`, each file's identity once it is finished (fstat after its last write and chmod) is reported with the
// digest the reader computed over exactly the bytes written: a later pack of the same, unchanged file may take that
// digest instead of hashing it again (pack.ts `knownDigests`).
import { chmodSync, closeSync, constants, fchmodSync, fstatSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { SessionBundleManifestV1 } from '../../protocol/bundle';
import { identityMismatchMessage, SessionBundleError } from './errors';
import { FileSyncer } from './fileSyncer';
import { writeFullySync } from './fsx';
import { validateArchivePath } from './pathLanguage';
import type { ReadHandlers } from './reader';
import type { ArchiveReaderWorker } from './readerWorker';
import { ThreadPool } from './threadPool';
import { bundleTuning } from './tuning';
import type { WrittenIdentity } from './publish';
import type { UstarEntry } from './ustar';

const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * d: make a directory (0755), o: create a file, w: write a range of the ring, b: write bytes, c: finish the file (chmod,
 * fsync, close), x: abandon it.
 */
type Op =
  | { t: 'd'; path: string }
  | { t: 'o'; path: string; mode: number }
  | { t: 'w'; offset: number; length: number }
  | { t: 'b'; bytes: Uint8Array }
  | { t: 'c' }
  | { t: 'x' };

// Runs on ThreadPool threads (plain JavaScript; see threadPool.ts). Holds at most one open file between messages;
// any message after the pool is stopped closes it. A directory another writer made first (EEXIST on a directory) is
// fine: staging is private and the archive has no duplicates, so only a writer of this hydrate can have made it.
const WRITER_SOURCE = `
const { chmodSync, closeSync, constants, fchmodSync, fstatSync, fsyncSync, lstatSync, mkdirSync, openSync, writeSync } = require('node:fs');
const { dirname } = require('node:path');
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
let current;
function makeDirectory(path) {
  try {
    mkdirSync(path, { mode: 0o755 });
  } catch (err) {
    if (err && err.code === 'EEXIST' && lstatSync(path).isDirectory()) return;
    if (err && err.code === 'ENOENT' && path.length > workerData.root.length && path.startsWith(workerData.root + '/')) {
      makeDirectory(dirname(path));
      return makeDirectory(path);
    }
    throw err;
  }
  chmodSync(path, 0o755);
}
function create(path, mode) {
  try {
    return openSync(path, CREATE, mode);
  } catch (err) {
    if (!(err && err.code === 'ENOENT')) throw err;
  }
  makeDirectory(dirname(path));
  return openSync(path, CREATE, mode);
}
function closeCurrent() {
  if (current === undefined) return;
  const fd = current.fd;
  current = undefined;
  try { closeSync(fd); } catch {}
}
function writeAll(fd, bytes) {
  let offset = 0;
  while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
}
parentPort.on('message', ({ slot, ops }) => {
  let error;
  const written = [];
  try {
    for (const op of ops) {
      if (stopped() || op.t === 'x') {
        closeCurrent();
        if (stopped()) break;
        continue;
      }
      if (op.t === 'd') {
        makeDirectory(op.path);
      } else if (op.t === 'o') {
        current = { fd: create(op.path, op.mode), mode: op.mode };
      } else if (op.t === 'w') {
        writeAll(current.fd, new Uint8Array(workerData.ring, op.offset, op.length));
      } else if (op.t === 'b') {
        writeAll(current.fd, op.bytes);
      } else {
        fchmodSync(current.fd, current.mode);
        if (workerData.durable) fsyncSync(current.fd);
        if (workerData.stat) {
          const st = fstatSync(current.fd, { bigint: true });
          written.push({ dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
        }
        const fd = current.fd;
        current = undefined;
        closeSync(fd);
      }
    }
  } catch (err) {
    closeCurrent();
    error = { code: err && typeof err.code === 'string' ? err.code : undefined, syscall: err && typeof err.syscall === 'string' ? err.syscall : undefined };
  }
  parentPort.postMessage({ results: true, slot, error, written });
});
`;

interface WriterReply {
  slot?: number;
  error?: { code?: string; syscall?: string };
  /** With `onWritten`: the identity of each file this batch finished, in order. */
  written?: WrittenIdentity[];
}

/** Told of each file written, as it is finished: its archive path, identity and the digest of its bytes. */
export type OnFileWritten = (archivePath: string, identity: WrittenIdentity, digest: Buffer) => void;

const identityOf = (st: WrittenIdentity): WrittenIdentity => ({ dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });

interface Remote {
  reader: ArchiveReaderWorker;
  pool: ThreadPool;
  /** Operations gathered for each writer while the current slot is read. */
  ops: Op[][];
  /** Per writer: bytes handed over and not yet answered, to pick the least busy one for the next file. */
  load: number[];
  /** The writer of the file being read. */
  writer: number;
  /** Directories read since the last file, sent (in order) to the writer of the next file or with the slot's batches. */
  directories: Op[];
  /** Per slot: batches not answered yet. */
  holds: Map<number, number>;
  /** Per writer: bytes of each batch in flight, oldest first. */
  inFlight: number[][];
  /** Per writer: archive path and digest of each file sent for finishing and not reported yet, oldest first. */
  finishing: { archivePath: string; digest: Buffer }[][];
  failure?: unknown;
}

export class StagingWriter implements ReadHandlers {
  private current: { fd: number; path: string; mode: number; archivePath: string } | undefined;
  /** The archive path of the file being read (for `onWritten`). */
  private archivePath = '';
  private readonly syncer = new FileSyncer(bundleTuning.syncWorkers, bundleTuning.syncWorkersAfterFiles);
  private remote: Remote | undefined;

  /** `durable` false: files are not fsynced (a destination that does not outlive a crash, e.g. a throw-away sandbox). */
  constructor(
    private readonly stagingRoot: string,
    private readonly expectedSessionId: string,
    private readonly durable = true,
    private readonly onWritten?: OnFileWritten,
  ) {}

  private target(path: string): string {
    return join(this.stagingRoot, ...validateArchivePath(path));
  }

  onArchiveReader(reader: ArchiveReaderWorker): void {
    const writers = Math.max(1, this.durable ? bundleTuning.fileWriters : bundleTuning.fileWritersNotDurable);
    const remote: Remote = {
      reader,
      ops: Array.from({ length: writers }, () => []),
      load: Array.from({ length: writers }, () => 0),
      writer: 0,
      directories: [],
      holds: new Map(),
      inFlight: Array.from({ length: writers }, () => []),
      finishing: Array.from({ length: writers }, () => []),
      pool: new ThreadPool(
        WRITER_SOURCE,
        writers,
        {
          onReply: (writer, reply) => {
            const { slot, error, written } = reply as WriterReply;
            for (const identity of written ?? []) {
              const file = remote.finishing[writer]?.shift();
              if (file !== undefined) this.onWritten?.(file.archivePath, identity, file.digest);
            }
            remote.load[writer] = (remote.load[writer] ?? 0) - (remote.inFlight[writer]?.shift() ?? 0);
            if (slot !== undefined) {
              const left = (remote.holds.get(slot) ?? 1) - 1;
              if (left > 0) remote.holds.set(slot, left);
              else {
                remote.holds.delete(slot);
                reader.release(slot);
              }
            }
            if (error !== undefined) remote.failure ??= Object.assign(new Error(`writing a file failed (${error.code ?? 'unknown error'})`), error);
          },
          onError: (err) => void (remote.failure ??= err),
        },
        { ring: reader.ring, durable: this.durable, stat: this.onWritten !== undefined, root: this.stagingRoot },
      ),
    };
    reader.holdSlot = (slot) => this.send(slot);
    this.remote = remote;
  }

  onManifest(manifest: SessionBundleManifestV1): void {
    if (manifest.envelope.sessionId !== this.expectedSessionId) {
      throw new SessionBundleError('identity_mismatch', identityMismatchMessage(manifest.envelope.sessionId, this.expectedSessionId), { operation: 'hydrate' });
    }
  }

  /** Directories are made here, in order, or (file-writer threads) by the writer of the next file, before that file. */
  onDirectory(entry: UstarEntry): void {
    this.rethrow();
    const path = this.target(entry.path);
    if (this.remote !== undefined) {
      this.remote.directories.push({ t: 'd', path });
      return;
    }
    mkdirSync(path, { mode: 0o755 });
    chmodSync(path, 0o755);
  }

  onFileStart(entry: UstarEntry): void {
    const path = this.target(entry.path);
    this.archivePath = entry.path;
    const remote = this.remote;
    if (remote !== undefined) {
      this.rethrow();
      let writer = 0;
      for (let i = 1; i < remote.load.length; i++) if ((remote.load[i] ?? 0) < (remote.load[writer] ?? 0)) writer = i;
      remote.writer = writer;
      remote.load[writer] = (remote.load[writer] ?? 0) + entry.size + 4096 * (1 + remote.directories.length); // a file costs more than its bytes
      remote.ops[writer]?.push(...remote.directories.splice(0), { t: 'o', path, mode: entry.mode });
      return;
    }
    this.current = { fd: openSync(path, CREATE_FLAGS, entry.mode), path, mode: entry.mode, archivePath: entry.path };
  }

  onFileChunk(chunk: Buffer): void {
    const remote = this.remote;
    if (remote !== undefined) {
      const ops = remote.ops[remote.writer] as Op[];
      if (remote.reader.slotOf(chunk) !== undefined) ops.push({ t: 'w', offset: chunk.byteOffset, length: chunk.length });
      else ops.push({ t: 'b', bytes: new Uint8Array(chunk) });
      return;
    }
    const current = this.current;
    if (current === undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: content outside a file');
    writeFullySync(current.fd, chunk);
  }

  async onFileEnd(digest: Buffer): Promise<void> {
    const remote = this.remote;
    if (remote !== undefined) {
      remote.ops[remote.writer]?.push({ t: 'c' });
      if (this.onWritten !== undefined) remote.finishing[remote.writer]?.push({ archivePath: this.archivePath, digest });
      return;
    }
    const current = this.current;
    this.current = undefined;
    if (current === undefined) return;
    try {
      fchmodSync(current.fd, current.mode);
      if (this.onWritten !== undefined) this.onWritten(current.archivePath, identityOf(fstatSync(current.fd, { bigint: true })), digest);
    } catch (err) {
      closeSync(current.fd);
      throw err;
    }
    if (this.durable) await this.syncer.add(current.fd, current.path);
    else closeSync(current.fd);
  }

  /** Wait until every file is written and durable; throws the first failure. */
  async drain(): Promise<void> {
    const remote = this.remote;
    if (remote !== undefined) {
      this.send(undefined);
      await remote.pool.close({ finish: true });
      this.rethrow();
    }
    await this.syncer.drain();
    await this.syncer.close();
  }

  /** Stop: close an open file and let running work settle (the files are removed with staging). */
  async abort(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current !== undefined) {
      try {
        closeSync(current.fd);
      } catch {
        // already failed; staging is removed anyway
      }
    }
    const remote = this.remote;
    if (remote !== undefined) {
      remote.directories.length = 0;
      for (const ops of remote.ops) ops.push({ t: 'x' });
      this.send(undefined);
      await remote.pool.close();
    }
    await this.syncer.close();
  }

  /** Hand the operations gathered while `slot` was read to the writers; the slot is released once they are done. */
  private send(slot: number | undefined): void {
    const remote = this.remote;
    if (remote === undefined) return;
    // Directories not followed by a file in this slot (yet) are made now, in order, by the least busy writer.
    if (remote.directories.length > 0) {
      let writer = 0;
      for (let i = 1; i < remote.load.length; i++) if ((remote.load[i] ?? 0) < (remote.load[writer] ?? 0)) writer = i;
      remote.load[writer] = (remote.load[writer] ?? 0) + 4096 * remote.directories.length;
      remote.ops[writer]?.push(...remote.directories.splice(0));
    }
    let posted = 0;
    remote.ops.forEach((ops, writer) => {
      if (ops.length === 0) return;
      remote.ops[writer] = [];
      let bytes = 0;
      for (const op of ops) bytes += op.t === 'w' ? op.length : op.t === 'b' ? op.bytes.length : op.t === 'o' || op.t === 'd' ? 4096 : 0;
      remote.inFlight[writer]?.push(bytes);
      remote.pool.post(writer, { slot, ops });
      posted += 1;
    });
    if (slot === undefined) return;
    if (posted === 0) remote.reader.release(slot);
    else remote.holds.set(slot, posted);
  }

  private rethrow(): void {
    if (this.remote?.failure !== undefined) throw this.remote.failure;
  }
}
