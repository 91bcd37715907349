// Durability for hydration of small bundles (spec §8 step 5: every file is fsynced before publication) without
// starving the decompressor (big bundles fsync on their file-writer threads, see stagingWriter.ts). An fsync is mostly waiting for the disk (~1 ms each here), so thousands of them need several in
// flight at once; on the libuv thread pool (4 threads, process-wide) they would queue ahead of the zstd work and
// stall decompression. So once a hydrate has written bundleTuning.syncWorkersAfterFiles files, a few worker threads take over: each
// reopens the files it is given (closed, in private staging) with O_NOFOLLOW and fsyncs them — fsync flushes the
// inode, whichever descriptor names it. Until then, and when no workers are wanted, the thread pool does it with
// the descriptor still open. `drain` waits for everything and throws the first failure.
import { closeSync, fsync } from 'node:fs';
import { ThreadPool } from './threadPool';

const BATCH = 8;
/** Batches in flight per worker. */
const DEPTH = 2;
/** Paths accepted but not yet synced before `add` asks the caller to wait. */
const MAX_PENDING = 2048;
/** fsyncs in flight on the thread pool (before the workers start, or without them). */
const MAX_POOL_SYNCS = 64;

const WORKER_SOURCE = `
const { closeSync, constants, fsyncSync, openSync } = require('node:fs');
parentPort.on('message', (paths) => {
  let error;
  let done = 0;
  for (const path of paths) {
    if (stopped()) break;
    try {
      const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      done += 1;
    } catch (err) {
      error = { code: typeof err.code === 'string' ? err.code : undefined, syscall: typeof err.syscall === 'string' ? err.syscall : undefined };
      break;
    }
  }
  parentPort.postMessage({ results: done, error });
});
`;

function syncFailure(error: { code?: string; syscall?: string }): Error {
  const err = new Error(`fsync failed (${error.code ?? 'unknown error'})`) as Error & { code?: string; syscall?: string };
  if (error.code !== undefined) err.code = error.code;
  if (error.syscall !== undefined) err.syscall = error.syscall;
  return err;
}

export class FileSyncer {
  private pool: ThreadPool | undefined;
  private readonly queue: string[] = [];
  private head = 0;
  private files = 0;
  private pending = 0;
  private poolSyncs = 0;
  private failure: { error: unknown } | undefined;
  private readonly waiters: (() => void)[] = [];

  /** `workers`: threads to start once more than `workersAfter` files were added (0: the thread pool does every fsync). */
  constructor(
    private readonly workers: number,
    private readonly workersAfter: number,
  ) {}

  get workerCount(): number {
    return this.pool?.size ?? 0;
  }

  /**
   * Make a file written through `fd` durable and close `fd` (always, also on failure). `path` names the file in
   * private staging. Resolves at once unless too much is pending.
   */
  async add(fd: number, path: string): Promise<void> {
    if (this.failure !== undefined) {
      closeSync(fd);
      throw this.failure.error;
    }
    this.files += 1;
    this.pending += 1;
    if (this.pool === undefined && this.workers > 0 && this.files > this.workersAfter) this.start();
    if (this.pool === undefined) {
      this.syncOnThreadPool(fd);
      while (this.poolSyncs >= MAX_POOL_SYNCS && this.failure === undefined) await this.sleep();
    } else {
      closeSync(fd);
      this.queue.push(path);
      this.dispatch(false);
      while (this.pending >= MAX_PENDING && this.failure === undefined) await this.sleep();
    }
    this.check();
  }

  /** Wait until every file added is durable; throws the first failure. */
  async drain(): Promise<void> {
    this.dispatch(true);
    while (this.pending > 0 && this.failure === undefined) {
      this.dispatch(true);
      await this.sleep();
    }
    this.check();
  }

  /** Stop the workers (idempotent). Waits for fsyncs already running; nothing is left open. */
  async close(): Promise<void> {
    while (this.poolSyncs > 0) await this.sleep();
    await this.pool?.close();
  }

  private check(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  private sleep(): Promise<void> {
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    void this.pool?.close();
    this.notify();
  }

  private syncOnThreadPool(fd: number): void {
    this.poolSyncs += 1;
    fsync(fd, (err) => {
      let failure: unknown = err ?? undefined;
      try {
        closeSync(fd);
      } catch (closeErr) {
        failure ??= closeErr;
      }
      this.poolSyncs -= 1;
      this.pending -= 1;
      if (failure !== undefined) this.fail(failure);
      this.notify();
    });
  }

  private start(): void {
    this.pool = new ThreadPool(WORKER_SOURCE, Math.max(1, this.workers), {
      onReply: (_slot, reply) => {
        const { results, error } = reply as { results: number; error?: { code?: string; syscall?: string } };
        this.pending -= results;
        if (error !== undefined) this.fail(syncFailure(error));
        else this.dispatch(false);
        this.notify();
      },
      onError: (err) => this.fail(err),
    });
  }

  /** Hand queued paths to workers with room; partial batches only when `flush` (or a worker is idle). */
  private dispatch(flush: boolean): void {
    const pool = this.pool;
    if (pool === undefined || this.failure !== undefined) return;
    for (let slot = 0; slot < pool.size && this.head < this.queue.length; slot++) {
      while (pool.owedBy(slot) < DEPTH && this.head < this.queue.length) {
        if (!flush && pool.owedBy(slot) > 0 && this.queue.length - this.head < BATCH) break;
        const batch = this.queue.slice(this.head, this.head + BATCH);
        this.head += batch.length;
        pool.post(slot, batch);
      }
    }
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
  }
}
