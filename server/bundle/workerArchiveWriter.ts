// Pack's write pass for big trees, output side on a worker thread. The calling thread fills tar batches that live
// in a SharedArrayBuffer (file content is read straight into them) and hands each one over by number; the worker
// feeds them to Node's zstd (same parameters, same batch boundaries, so the same frame as ArchiveWriter), strips
// Node's trailing empty frame, meters maxCompressedBytes, hashes and writes the output to the temp file, and gives
// the batch back once the compressor is done with it.
// Why a thread: the compressor's output arrives in freshly allocated buffers (~120 MB for the bench tree), and in
// the calling thread's large heap every few MB of them cost a full garbage collection; a worker's heap is tiny,
// so there the same collections are nearly free. Hashing and writing the output also leave the calling thread,
// which keeps reading and re-hashing sources. Worker code is plain JavaScript (see threadPool.ts for why), run on a warm
// codec thread (codecThreads.ts), reused once the job has reported done and ended otherwise.
import type { SessionBundleLimits } from '../../protocol/bundle';
import { checkQuota } from './limits';
import { type CodecThread, startCodecWorker } from './codecThreads';
import type { ArchiveSink } from './archiveWriter';
import { bundleZstdParams, NODE_TRAILING_EMPTY_FRAME, TRAILER_HOLD_SOURCE } from './zstdFrame';

const SLOTS = 4;
const SYNC_EVERY = 32 * 1024 * 1024;

const WORKER_SOURCE = `
'use strict';
const { createZstdCompress } = require('node:zlib');
const { createHash } = require('node:crypto');
const { fdatasync, writeSync } = require('node:fs');
${TRAILER_HOLD_SOURCE}
const { ring, slotBytes, fd, maxCompressedBytes, params, trailer, syncEvery } = workerData;
const hold = new TrailerHold(trailer);
const compressor = createZstdCompress({ chunkSize: slotBytes, params });
const hash = createHash('sha256');
const output = [];
let bytes = 0;
let unsynced = 0;
let syncing = 0;
let ended = false;
let failed = false;
let draining = false;

function fail(error) {
  if (failed) return;
  failed = true;
  compressor.destroy();
  parentPort.postMessage({ error });
}
function errnoOf(err) {
  return { code: typeof err.code === 'string' ? err.code : undefined, syscall: typeof err.syscall === 'string' ? err.syscall : undefined };
}
function emit(piece) {
  if (piece.length === 0) return;
  bytes += piece.length;
  if (bytes > maxCompressedBytes) throw { quota: bytes };
  hash.update(piece);
  let offset = 0;
  while (offset < piece.length) offset += writeSync(fd, piece, offset, piece.length - offset);
  unsynced += piece.length;
  if (unsynced >= syncEvery && syncing === 0) {
    unsynced = 0;
    syncing += 1;
    fdatasync(fd, (err) => {
      syncing -= 1;
      if (err) fail(errnoOf(err));
      else maybeDone();
    });
  }
}
// Output is handled after the compressor's callback returns, so that its next job starts first.
function drain() {
  draining = false;
  if (failed) return;
  try {
    while (output.length > 0) hold.push(output.shift(), emit);
    maybeDone();
  } catch (err) {
    fail(err && err.quota !== undefined ? err : errnoOf(err));
  }
}
let held = true;
// After the last output: the held-back bytes, then (once no fdatasync is running on the descriptor) the result.
function maybeDone() {
  if (!ended || output.length > 0 || failed) return;
  if (held) {
    held = false;
    try {
      hold.end(emit);
    } catch (err) {
      fail(err && err.quota !== undefined ? err : errnoOf(err));
      return;
    }
  }
  if (syncing > 0) return;
  ended = false;
  parentPort.postMessage({ done: true, digest: hash.digest('hex'), bytes });
}
compressor.on('data', (chunk) => {
  output.push(chunk);
  if (!draining) {
    draining = true;
    setImmediate(drain);
  }
});
compressor.on('error', () => fail({ zstd: true }));
compressor.on('end', () => {
  ended = true;
  if (!draining) {
    draining = true;
    setImmediate(drain);
  }
});
parentPort.on('message', (message) => {
  if (failed) return;
  if (message.end) {
    compressor.end();
    return;
  }
  const chunk = message.copy !== undefined ? Buffer.from(message.copy) : Buffer.from(ring, message.slot * slotBytes, message.length);
  compressor.write(chunk, () => {
    if (message.slot !== undefined) parentPort.postMessage({ free: message.slot });
  });
});
`;

type Reply = { free: number } | { done: true; digest: string; bytes: number } | { error: { code?: string; syscall?: string; quota?: number; zstd?: boolean } };

export interface WorkerArchiveWriterOptions {
  fd: number;
  limits: SessionBundleLimits;
  onTarBytes?: (total: number) => void;
  batchBytes: number;
}

export class WorkerArchiveWriter implements ArchiveSink {
  private readonly worker: CodecThread;
  private readonly slots: Buffer[] = [];
  private readonly free: number[] = [];
  private readonly waiters: (() => void)[] = [];
  private failure: { error: unknown } | undefined;
  private result: { digest: string; bytes: number } | undefined;
  private tarBytes = 0;
  private stopped = false;
  bytes = 0;

  constructor(private readonly options: WorkerArchiveWriterOptions) {
    const ring = new SharedArrayBuffer(SLOTS * options.batchBytes);
    for (let i = 0; i < SLOTS; i++) {
      this.slots.push(Buffer.from(ring, i * options.batchBytes, options.batchBytes));
      this.free.push(SLOTS - 1 - i);
    }
    this.worker = startCodecWorker(
      WORKER_SOURCE,
      {
        ring,
        slotBytes: options.batchBytes,
        fd: options.fd,
        maxCompressedBytes: options.limits.maxCompressedBytes,
        params: bundleZstdParams(),
        trailer: new Uint8Array(NODE_TRAILING_EMPTY_FRAME),
        syncEvery: SYNC_EVERY,
      },
      { youngMb: 4, oldMb: 32 },
    );
    this.worker.on('message', (reply: Reply) => this.onReply(reply));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', () => {
      if (!this.stopped && this.result === undefined) this.fail(new Error('the compressing worker exited unexpectedly'));
    });
  }

  take(): Buffer {
    const slot = this.free.pop();
    if (slot === undefined) throw new Error('no free tar batch (put must be awaited)');
    return this.slots[slot] as Buffer;
  }

  async put(buffer: Buffer, length: number): Promise<void> {
    this.check();
    this.tarBytes += length;
    this.options.onTarBytes?.(this.tarBytes);
    const slot = this.slots.indexOf(buffer);
    if (slot === -1) this.worker.postMessage({ copy: buffer.subarray(0, length) });
    else this.worker.postMessage({ slot, length });
    while (this.free.length === 0) await this.sleep();
  }

  pause(): void {
    this.check();
  }

  async finish(): Promise<string> {
    this.check();
    this.worker.postMessage({ end: true });
    while (this.result === undefined) await this.sleep();
    this.bytes = this.result.bytes;
    const digest = `sha256:${this.result.digest}`;
    await this.stop();
    return digest;
  }

  async destroy(): Promise<void> {
    await this.stop();
  }

  /** After `done` (everything written and synced: the job runs no more) the thread is reused; otherwise it ends. */
  private async stop(): Promise<void> {
    this.stopped = true;
    if (this.result !== undefined) this.worker.release();
    else await this.worker.terminate().catch(() => undefined);
  }

  private onReply(reply: Reply): void {
    if ('free' in reply) this.free.push(reply.free);
    else if ('done' in reply) this.result = { digest: reply.digest, bytes: reply.bytes };
    else {
      const { error } = reply;
      try {
        if (error.quota !== undefined) checkQuota(this.options.limits, 'maxCompressedBytes', error.quota, 'pack');
        const err = new Error(error.zstd === true ? 'the compressor failed' : `writing the archive failed (${error.code ?? 'unknown error'})`) as Error & { code?: string; syscall?: string };
        if (error.code !== undefined) err.code = error.code;
        if (error.syscall !== undefined) err.syscall = error.syscall;
        this.fail(err);
      } catch (quotaError) {
        this.fail(quotaError);
      }
    }
    this.notify();
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.notify();
  }

  private check(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  private async sleep(): Promise<void> {
    await new Promise<void>((resolve) => this.waiters.push(resolve));
    this.check();
  }

  private notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
