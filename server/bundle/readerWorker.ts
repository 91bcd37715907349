// Inspect/hydrate for big bundles, compressed side on a worker thread: it reads the bundle file, meters
// maxCompressedBytes, hashes the archive, checks the frame structure (the same FRAME_SCANNER_SOURCE as the
// in-thread path), decompresses with the capped window, and copies the tar bytes into slots of a
// SharedArrayBuffer. The calling thread validates the tar straight from the slots (ByteSource) and hands each slot
// back when it moves on to the next, so nothing is copied on the calling thread and memory stays at SLOTS slots.
// Why a thread: decompressed output arrives in freshly allocated buffers (~210 MB for the bench tree), which in the
// calling thread's large heap cost a full garbage collection every few MB; in the worker's tiny heap they are
// nearly free. Reading, hashing and frame checks also leave the calling thread, which validates and writes files.
// Worker code is plain JavaScript (see threadPool.ts for why), run on a warm codec thread (codecThreads.ts), which is
// reused once the job has sent its end and ended otherwise.
import type { SessionBundleLimits, SessionBundleOperation } from '../../protocol/bundle';
import { SessionBundleError } from './errors';
import { checkQuota } from './limits';
import { type CodecThread, startCodecWorker } from './codecThreads';
import { bundleZstdDecoderParams, FRAME_HEADER, FRAME_SCANNER_SOURCE } from './zstdFrame';

const SLOTS = 4;
const SLOT_BYTES = 1024 * 1024;
const READ_BYTES = 256 * 1024;
const INPUT_BUFFERS = 4;

const WORKER_SOURCE = `
'use strict';
const { createZstdDecompress } = require('node:zlib');
const { createHash } = require('node:crypto');
const { readSync } = require('node:fs');
${FRAME_SCANNER_SOURCE}
const { fd, ring, slots, slotBytes, readBytes, inputBuffers, maxCompressedBytes, params, header } = workerData;
const scanner = new FrameScanner(new Uint8Array(header), 128 * 1024);
const decoder = createZstdDecompress({ chunkSize: slotBytes, params });
const hash = createHash('sha256');
const free = [];
for (let i = slots - 1; i >= 0; i--) free.push(i);
const inputs = [];
for (let i = 0; i < inputBuffers; i++) inputs.push(Buffer.allocUnsafe(readBytes));
const pending = [];
let pendingOffset = 0;
let slot;
let filled = 0;
let read = 0;
let ended = false;
let failed = false;
let wakeReader;

function fail(error) {
  if (failed) return;
  failed = true;
  decoder.destroy();
  parentPort.postMessage({ error });
}
function errorOf(err) {
  if (err && typeof err.frameReason === 'string') return { frame: err.frameReason };
  if (err && err.quota !== undefined) return { quota: err.quota };
  return { code: err && typeof err.code === 'string' && /^E[A-Z0-9]+$/.test(err.code) ? err.code : undefined, syscall: err && typeof err.syscall === 'string' ? err.syscall : undefined };
}
// Copy decoded bytes into slots; a full slot goes to the calling thread. Without a free slot, pause the decoder.
function pump() {
  while (pending.length > 0) {
    if (slot === undefined) {
      slot = free.pop();
      if (slot === undefined) {
        decoder.pause();
        return;
      }
      filled = 0;
    }
    const chunk = pending[0];
    const take = Math.min(slotBytes - filled, chunk.length - pendingOffset);
    chunk.copy(new Uint8Array(ring, slot * slotBytes + filled, take), 0, pendingOffset, pendingOffset + take);
    filled += take;
    pendingOffset += take;
    if (pendingOffset === chunk.length) {
      pending.shift();
      pendingOffset = 0;
    }
    if (filled === slotBytes) {
      parentPort.postMessage({ slot, length: filled, read });
      slot = undefined;
    }
  }
  if (ended) {
    if (slot !== undefined && filled > 0) {
      parentPort.postMessage({ slot, length: filled, read });
      slot = undefined;
    }
    ended = false;
    parentPort.postMessage({ end: true, bytes: read, digest: hash.digest('hex') });
  }
}
decoder.on('data', (chunk) => {
  pending.push(chunk);
  pump();
});
decoder.on('end', () => {
  ended = true;
  pump();
});
decoder.on('error', () => fail({ decoder: true }));
parentPort.on('message', (message) => {
  free.push(message.free);
  if (failed) return;
  decoder.resume();
  pump();
});
async function readAll() {
  while (true) {
    if (failed) return;
    if (inputs.length === 0) {
      await new Promise((resolve) => (wakeReader = resolve));
      continue;
    }
    const input = inputs.pop();
    const n = readSync(fd, input, 0, readBytes, read);
    if (n === 0) break;
    read += n;
    if (read > maxCompressedBytes) throw { quota: read };
    const piece = input.subarray(0, n);
    hash.update(piece);
    scanner.scan(piece);
    decoder.write(piece, () => {
      inputs.push(input);
      const wake = wakeReader;
      wakeReader = undefined;
      if (wake) wake();
    });
  }
  scanner.finish();
  decoder.end();
}
readAll().catch((err) => fail(errorOf(err)));
`;

type Reply =
  | { slot: number; length: number; read: number }
  | { end: true; bytes: number; digest: string }
  | { error: { frame?: string; quota?: number; decoder?: true; code?: string; syscall?: string } };

/** The compressed side of readBundle on a worker thread; `chunks` yields the tar bytes, `result` the archive facts. */
export class ArchiveReaderWorker {
  private readonly worker: CodecThread;
  readonly ring = new SharedArrayBuffer(SLOTS * SLOT_BYTES);
  private readonly replies: Reply[] = [];
  private readonly waiters: (() => void)[] = [];
  private failure: { error: unknown } | undefined;
  private closed = false;
  /** Set by a consumer that still needs a slot after moving on (hydrate's writer thread); it calls `release`. */
  holdSlot: ((slot: number) => void) | undefined;
  result: { bytes: number; digest: string } | undefined;

  constructor(
    fd: number,
    private readonly limits: SessionBundleLimits,
    private readonly operation: SessionBundleOperation,
    private readonly onRead?: (bytes: number) => void,
  ) {
    this.worker = startCodecWorker(
      WORKER_SOURCE,
      {
        fd,
        ring: this.ring,
        slots: SLOTS,
        slotBytes: SLOT_BYTES,
        readBytes: READ_BYTES,
        inputBuffers: INPUT_BUFFERS,
        maxCompressedBytes: limits.maxCompressedBytes,
        params: bundleZstdDecoderParams(),
        header: new Uint8Array(FRAME_HEADER),
      },
      { youngMb: 4, oldMb: 32 },
    );
    this.worker.on('message', (reply: Reply) => {
      this.replies.push(reply);
      this.notify();
    });
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', () => {
      if (!this.closed) this.fail(new Error('the reading worker exited unexpectedly'));
    });
  }

  /**
   * The tar stream as slot views. A view is valid until the consumer asks for the next one (ByteSource never keeps
   * one longer); then its slot goes back to the worker and the compressed bytes read so far are reported.
   */
  async *chunks(): AsyncGenerator<Buffer> {
    while (true) {
      const reply = await this.next();
      if ('end' in reply) {
        this.result = { bytes: reply.bytes, digest: reply.digest };
        return;
      }
      if (!('slot' in reply)) continue;
      yield Buffer.from(this.ring, reply.slot * SLOT_BYTES, reply.length);
      if (this.holdSlot !== undefined) this.holdSlot(reply.slot);
      else this.release(reply.slot);
      this.onRead?.(reply.read);
    }
  }

  /** Give a slot back to the worker for refilling. */
  release(slot: number): void {
    if (!this.closed) this.worker.postMessage({ free: slot });
  }

  /** Slot number of a view handed out by `chunks`, or undefined for any other buffer. */
  slotOf(view: Uint8Array): number | undefined {
    return view.buffer === this.ring ? Math.floor(view.byteOffset / SLOT_BYTES) : undefined;
  }

  /**
   * Stop the worker (idempotent); resolves once it no longer reads the descriptor. After its end (the whole archive
   * read and decompressed: it reads nothing more) its thread is reused; otherwise it is terminated.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.result !== undefined) this.worker.release();
    else await this.worker.terminate().catch(() => undefined);
  }

  private async next(): Promise<Reply> {
    while (true) {
      if (this.failure !== undefined) throw this.failure.error;
      const reply = this.replies.shift();
      if (reply !== undefined) {
        if ('error' in reply) this.fail(this.mapError(reply.error));
        else return reply;
        continue;
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private mapError(error: { frame?: string; quota?: number; decoder?: true; code?: string; syscall?: string }): unknown {
    if (error.frame !== undefined) return new SessionBundleError('integrity_mismatch', `integrity mismatch: ${error.frame}`);
    if (error.quota !== undefined) {
      try {
        checkQuota(this.limits, 'maxCompressedBytes', error.quota, this.operation);
      } catch (quotaError) {
        return quotaError;
      }
    }
    if (error.code !== undefined) return Object.assign(new Error(`reading the bundle failed (${error.code})`), { code: error.code, syscall: error.syscall });
    // A decoder failure, like any error without an errno on the read path, is a broken compressed stream.
    return new Error('the compressed stream is invalid');
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.notify();
  }

  private notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
