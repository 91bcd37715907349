// Pack's first pass (spec §3 needs every file's SHA-256 before the manifest, which comes first in the stream):
// hash every scanned source file. Small trees are hashed on the calling thread; once the queued bytes pass
// bundleTuning.parallelHashMinBytes, worker threads (one per extra core) start hashing while the scan goes on, and when the
// scan is done the calling thread joins them. Workers only open, read, hash and fstat; every verdict (exact size,
// unchanged inode fingerprint) is taken here with the same checks as the write pass, so both refuse the same
// changes. The first failure (a changed source, an errno, a dead worker, or a progress callback that throws, which
// is how pack is cancelled) stops the workers and is what `finish` (or the next `add`) throws.
import { createHash } from 'node:crypto';
import type { Fingerprint } from './fsx';
import { checkSourceRead, READ_PIECE, SourceFileReader } from './sourceFile';
import type { SourceEntry } from './sourceTree';
import { ThreadPool } from './threadPool';

const BATCH_BYTES = 1024 * 1024;
const BATCH_FILES = 256;
/** Batches in flight per worker, so that a worker never waits for the (possibly busy) main thread. */
const DEPTH = 2;
const PROGRESS_BYTES = 8 * 1024 * 1024;
/** Bytes the calling thread hashes between two yields to the event loop (worker results, cancellation). */
const YIELD_BYTES = 256 * 1024;

// Runs on ThreadPool threads (plain JavaScript; see threadPool.ts). Reads with the same +1-byte probe as
// SourceFileReader; the verdicts (size, fingerprint) are taken on the calling thread.
const WORKER_SOURCE = `
const { closeSync, constants, fstatSync, openSync, readSync } = require('node:fs');
const { createHash } = require('node:crypto');
const PIECE = ${READ_PIECE};
const PROGRESS = ${PROGRESS_BYTES};
const buffer = Buffer.allocUnsafe(PIECE);
function hashOne(job) {
  const fd = openSync(job.path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    let position = 0;
    let unreported = 0;
    while (position < job.size) {
      if (stopped()) return undefined;
      const n = readSync(fd, buffer, 0, Math.min(PIECE, job.size - position + 1), position);
      if (n === 0) break;
      position += n;
      if (position > job.size) break;
      hash.update(buffer.subarray(0, n));
      unreported += n;
      if (unreported >= PROGRESS) {
        parentPort.postMessage({ progress: unreported });
        unreported = 0;
      }
    }
    const st = fstatSync(fd, { bigint: true });
    return {
      position,
      digest: new Uint8Array(hash.digest()),
      fingerprint: { dev: st.dev, ino: st.ino, nlink: st.nlink, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs },
      rest: unreported,
    };
  } finally {
    closeSync(fd);
  }
}
parentPort.on('message', (jobs) => {
  const results = [];
  for (const job of jobs) {
    if (stopped()) break;
    try {
      const result = hashOne(job);
      if (result === undefined) break;
      results.push(result);
    } catch (err) {
      results.push({ error: { code: typeof err.code === 'string' ? err.code : undefined, syscall: typeof err.syscall === 'string' ? err.syscall : undefined } });
      break;
    }
  }
  parentPort.postMessage({ results });
});
`;

interface Job {
  path: string;
  size: number;
}
type Result =
  | { position: number; digest: Uint8Array; fingerprint: Fingerprint; rest: number }
  | { error: { code?: string; syscall?: string } };
type Message = { progress: number } | { results: Result[] };

function workerFailure(result: { error: { code?: string; syscall?: string } }): Error {
  const err = new Error(`hashing a source file failed (${result.error.code ?? 'unknown error'})`) as Error & { code?: string; syscall?: string };
  if (result.error.code !== undefined) err.code = result.error.code;
  if (result.error.syscall !== undefined) err.syscall = result.error.syscall;
  return err;
}

export interface SourceHasherOptions {
  /** Worker threads to start once `parallelMinBytes` are queued; 0 hashes on the calling thread only. */
  workers: number;
  parallelMinBytes: number;
  /** Progress in bytes; throwing from it cancels hashing. */
  onBytes?: (n: number) => void;
}

/**
 * Hashes the files `add`ed to it, setting `entry.digest`. While files are being added (the scan), only workers
 * hash; `finish` makes the calling thread hash too, one file at a time from the same queue, until every digest
 * is in. Always `close` it (also after a failure) so no worker outlives the pack.
 */
export class SourceHasher {
  private readonly queue: SourceEntry[] = [];
  private head = 0;
  private pendingBytes = 0;
  private totalBytes = 0;
  private pool: ThreadPool | undefined;
  /** Per worker: the batches sent and not answered yet, oldest first. */
  private inFlight: SourceEntry[][][] = [];
  private failure: { error: unknown } | undefined;
  /** Files handed to workers whose results have not come back yet. */
  private outstanding = 0;
  private finishing = false;
  /** `finish` returned: every batch sent was answered, so the workers are between messages, holding nothing. */
  private finished = false;
  private wake: (() => void) | undefined;
  private sinceYield = 0;

  constructor(private readonly options: SourceHasherOptions) {}

  /** Worker threads started (0 while the tree is small). */
  get workerCount(): number {
    return this.pool?.size ?? 0;
  }

  /** Queue a file (other entries are ignored); throws the first failure so far, which stops the scan early. */
  add(entry: SourceEntry): void {
    this.check();
    if (entry.kind !== 'file') return;
    this.queue.push(entry);
    this.pendingBytes += entry.size;
    this.totalBytes += entry.size;
    if (this.pool === undefined && this.options.workers > 0 && this.totalBytes >= this.options.parallelMinBytes) this.start();
    this.dispatch();
  }

  /** No more files will be added: hash the rest here and alongside the workers; resolves once every digest is set. */
  async finish(): Promise<void> {
    this.finishing = true;
    const scratch = Buffer.allocUnsafe(READ_PIECE);
    while (true) {
      this.check();
      this.dispatch();
      if (this.head < this.queue.length) {
        const entry = this.queue[this.head++] as SourceEntry;
        this.pendingBytes -= entry.size;
        await this.hashHere(entry, scratch);
        continue;
      }
      if (this.outstanding === 0) break;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    this.check();
    this.queue.length = 0;
    this.head = 0;
    this.finished = true;
  }

  /**
   * Stop every worker (idempotent); resolves when they are gone, none holding a descriptor. After a `finish` that
   * succeeded their threads go back to the warm codec threads (codecThreads.ts); otherwise they end.
   */
  async close(): Promise<void> {
    await this.pool?.close(this.finished && this.failure === undefined ? { finish: true } : {});
  }

  private check(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  /** Hash one file on this thread, yielding to the event loop (worker results, cancellation) every YIELD_BYTES. */
  private async hashHere(entry: SourceEntry, scratch: Buffer): Promise<void> {
    const reader = new SourceFileReader(entry);
    try {
      const hash = createHash('sha256');
      while (reader.remaining > 0) {
        const n = reader.read(scratch, 0, scratch.length);
        hash.update(scratch.subarray(0, n));
        this.options.onBytes?.(n);
        this.sinceYield += n;
        if (this.sinceYield >= YIELD_BYTES) {
          this.sinceYield = 0;
          await new Promise<void>((resolve) => setImmediate(resolve));
          this.check();
        }
      }
      reader.finish();
      entry.digest = hash.digest();
    } finally {
      reader.close();
    }
  }

  private start(): void {
    this.inFlight = Array.from({ length: this.options.workers }, () => []);
    this.pool = new ThreadPool(WORKER_SOURCE, this.options.workers, {
      onReply: (slot, reply, final) => this.onReply(slot, reply as Message, final),
      onError: (err) => this.fail(err),
    });
  }

  private dispatch(): void {
    const pool = this.pool;
    if (pool === undefined || this.failure !== undefined) return;
    for (let slot = 0; slot < pool.size; slot++) {
      const inFlight = this.inFlight[slot] as SourceEntry[][];
      while (inFlight.length < DEPTH && this.head < this.queue.length) {
        // While the scan may still add files, send only full batches to a worker that has work: fewer messages.
        if (!this.finishing && inFlight.length > 0 && this.pendingBytes < BATCH_BYTES && this.queue.length - this.head < BATCH_FILES) break;
        const batch: SourceEntry[] = [];
        let bytes = 0;
        while (this.head < this.queue.length && bytes < BATCH_BYTES && batch.length < BATCH_FILES) {
          const entry = this.queue[this.head++] as SourceEntry;
          batch.push(entry);
          bytes += entry.size;
        }
        this.pendingBytes -= bytes;
        inFlight.push(batch);
        this.outstanding += batch.length;
        pool.post(slot, batch.map((e): Job => ({ path: e.sourcePath, size: e.size })));
      }
    }
  }

  private onReply(slot: number, message: Message, final: boolean): void {
    if (this.failure !== undefined) return;
    try {
      if (!final) {
        if ('progress' in message) this.options.onBytes?.(message.progress);
        return;
      }
      if (!('results' in message)) return;
      const batch = this.inFlight[slot]?.shift() ?? [];
      message.results.forEach((result, i) => {
        const entry = batch[i] as SourceEntry;
        if ('error' in result) throw workerFailure(result);
        checkSourceRead(entry, result.position, result.fingerprint);
        entry.digest = Buffer.from(result.digest);
        this.outstanding -= 1;
        this.options.onBytes?.(result.rest);
      });
      if (message.results.length < batch.length) throw new Error('a hashing worker skipped files');
    } catch (err) {
      this.fail(err);
      return;
    }
    this.dispatch();
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private fail(error: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = { error };
    void this.pool?.close();
    this.notify();
  }
}
