// Pack's first pass (spec §3 needs every file's SHA-256 before the manifest, which comes first in the stream):
// hash every scanned source file. Small trees are hashed on the calling thread; once the queued bytes pass
// PARALLEL_HASH_MIN_BYTES a small pool of worker threads takes over, so hashing runs on every core and overlaps
// the rest of the scan. Workers only open, read, hash and fstat; every verdict (exact size, unchanged inode
// fingerprint) is taken here with the same checks as the write pass, so both paths refuse the same changes.
// Failure handling: the first failure (a changed source, an errno, a crashed worker, or a progress callback that
// throws, which is how pack is cancelled) terminates every worker and is what `finish` rejects with.
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Fingerprint } from './fsx';
import { checkSourceRead, READ_PIECE, SourceFileReader } from './sourceFile';
import type { SourceEntry } from './sourceTree';

/** Below this many queued bytes, starting threads (~40 ms) costs more than it saves. */
export const PARALLEL_HASH_MIN_BYTES = 16 * 1024 * 1024;
const BATCH_BYTES = 1024 * 1024;
const BATCH_FILES = 256;
/** Batches in flight per worker, so that a worker never waits for the (possibly busy) main thread. */
const DEPTH = 2;
const PROGRESS_BYTES = 8 * 1024 * 1024;

/** Worker threads for hashing by default: one per core, at most 4, none on a single core. */
export function defaultHashWorkers(): number {
  const cores = availableParallelism();
  return cores <= 1 ? 0 : Math.min(cores, 4);
}

// Plain JavaScript, run with `eval` so that it works unchanged from sources (tsx) and from the esbuild bundle.
const WORKER_SOURCE = `
'use strict';
const { parentPort } = require('node:worker_threads');
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
      reported: job.size - unreported,
    };
  } finally {
    closeSync(fd);
  }
}
parentPort.on('message', (jobs) => {
  const results = [];
  for (const job of jobs) {
    try {
      results.push(hashOne(job));
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
  | { position: number; digest: Uint8Array; fingerprint: Fingerprint; reported: number }
  | { error: { code?: string; syscall?: string } };
type Message = { progress: number } | { results: Result[] };

interface Slot {
  worker: Worker;
  inFlight: SourceEntry[][];
}

function workerFailure(result: { error: { code?: string; syscall?: string } }): Error {
  const err = new Error(`hashing a source file failed (${result.error.code ?? 'unknown error'})`) as Error & { code?: string; syscall?: string };
  if (result.error.code !== undefined) err.code = result.error.code;
  if (result.error.syscall !== undefined) err.syscall = result.error.syscall;
  return err;
}

export interface SourceHasherOptions {
  /** Worker threads to use once the tree is big enough; 0 hashes on the calling thread. */
  workers: number;
  /** Threshold for starting the workers (tests lower it). */
  parallelMinBytes?: number;
  /** Progress in bytes; throwing from it cancels hashing. */
  onBytes?: (n: number) => void;
}

/** Hashes the files `add`ed to it, setting `entry.digest`; `finish` waits for all of them. Always `close` it. */
export class SourceHasher {
  private readonly queue: SourceEntry[] = [];
  private queuedBytes = 0;
  private slots: Slot[] | undefined;
  private failure: { error: unknown } | undefined;
  private outstanding = 0;
  private finishing = false;
  private settle: { resolve: () => void; reject: (err: unknown) => void } | undefined;
  private closed = false;
  private terminations: Promise<unknown>[] = [];

  constructor(private readonly options: SourceHasherOptions) {}

  /** True once the work is running on worker threads. */
  get parallel(): boolean {
    return this.slots !== undefined;
  }

  /** The first failure so far, if any: callers may stop producing work early. */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  add(entry: SourceEntry): void {
    if (entry.kind !== 'file' || this.failure !== undefined) return;
    this.queue.push(entry);
    this.queuedBytes += entry.size;
    if (this.slots === undefined && this.options.workers > 0 && this.queuedBytes >= (this.options.parallelMinBytes ?? PARALLEL_HASH_MIN_BYTES)) this.start();
    if (this.slots !== undefined) this.dispatch();
  }

  /** No more files will be added: hash what is left and wait for every digest. */
  async finish(): Promise<void> {
    this.finishing = true;
    if (this.failure !== undefined) throw this.failure.error;
    if (this.slots === undefined) {
      await this.hashInline();
      return;
    }
    this.dispatch();
    if (this.outstanding === 0 && this.queue.length === 0) return;
    await new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
  }

  /** Stop every worker (idempotent); resolves when they are gone. */
  async close(): Promise<void> {
    this.stopWorkers();
    await Promise.all(this.terminations);
  }

  private async hashInline(): Promise<void> {
    const scratch = Buffer.allocUnsafe(READ_PIECE);
    let sinceYield = 0;
    for (const entry of this.queue) {
      const reader = new SourceFileReader(entry);
      try {
        const hash = createHash('sha256');
        while (reader.remaining > 0) {
          const n = reader.read(scratch, 0, scratch.length);
          hash.update(scratch.subarray(0, n));
          sinceYield += n;
          if (sinceYield >= READ_PIECE) {
            sinceYield = 0;
            await new Promise<void>((resolve) => setImmediate(resolve));
          }
        }
        reader.finish();
        entry.digest = hash.digest();
      } finally {
        reader.close();
      }
      this.options.onBytes?.(entry.size);
    }
    this.queue.length = 0;
  }

  private start(): void {
    this.slots = [];
    for (let i = 0; i < this.options.workers; i++) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], stdout: false, stderr: false });
      const slot: Slot = { worker, inFlight: [] };
      worker.on('message', (message: Message) => this.onMessage(slot, message));
      worker.on('error', (err) => this.fail(err));
      worker.on('exit', () => {
        if (!this.closed) this.fail(new Error('a hashing worker exited unexpectedly'));
      });
      this.slots.push(slot);
    }
  }

  private dispatch(): void {
    if (this.slots === undefined || this.failure !== undefined) return;
    for (const slot of this.slots) {
      while (slot.inFlight.length < DEPTH && this.queue.length > 0) {
        const batch: SourceEntry[] = [];
        let bytes = 0;
        while (this.queue.length > 0 && bytes < BATCH_BYTES && batch.length < BATCH_FILES) {
          // Hold back a short batch while the scan may still add files: fuller batches mean fewer messages.
          const entry = this.queue[0] as SourceEntry;
          batch.push(entry);
          bytes += entry.size;
          this.queue.shift();
        }
        slot.inFlight.push(batch);
        this.outstanding += batch.length;
        slot.worker.postMessage(batch.map((e): Job => ({ path: e.sourcePath, size: e.size })));
      }
    }
  }

  private onMessage(slot: Slot, message: Message): void {
    if (this.failure !== undefined) return;
    try {
      if ('progress' in message) {
        this.options.onBytes?.(message.progress);
        return;
      }
      const batch = slot.inFlight.shift() ?? [];
      message.results.forEach((result, i) => {
        const entry = batch[i] as SourceEntry;
        if ('error' in result) throw workerFailure(result);
        checkSourceRead(entry, result.position, result.fingerprint);
        entry.digest = Buffer.from(result.digest);
        this.outstanding -= 1;
        this.options.onBytes?.(result.reported);
      });
      if (message.results.length < batch.length) throw new Error('a hashing worker skipped files');
    } catch (err) {
      this.fail(err);
      return;
    }
    this.dispatch();
    if (this.finishing && this.outstanding === 0 && this.queue.length === 0) this.settle?.resolve();
  }

  private fail(error: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = { error };
    this.stopWorkers();
    this.settle?.reject(error);
  }

  private stopWorkers(): void {
    if (this.closed) return;
    this.closed = true;
    for (const slot of this.slots ?? []) this.terminations.push(slot.worker.terminate().catch(() => undefined));
  }
}
