// Pack's write pass, output side, in this thread (small archives; big ones use WorkerArchiveWriter, same bytes):
// tar batches go to Node's zstd (which compresses on the libuv thread pool), and the frame that comes out is
// stripped of Node's trailing empty frame, metered against maxCompressedBytes, hashed and written to the temp
// file — the archive digest is the digest of exactly the bytes written to the file, so the published file is not
// read back (see publish.ts). A background fdatasync every SYNC_EVERY bytes leaves little for the final fsync.
// Scheduling: the compressor works through one write at a time and needs this thread between two writes, so
// (a) writes are batched (IN_THREAD_BATCH_BYTES), (b) up to MAX_IN_FLIGHT of them are queued so the next one is ready
// when the current one ends, (c) output is only queued when it arrives and is hashed and written later in slices of
// OUTPUT_SLICE bytes, and (d) the producer pauses to the event loop after every slice of its own work. Memory stays
// bounded: the recycled input batches plus the compressor's output.
import { createHash } from 'node:crypto';
import { fdatasync } from 'node:fs';
import type zlib from 'node:zlib';
import type { SessionBundleLimits } from '../../protocol/bundle';
import { writeFullySync } from './fsx';
import { checkQuota } from './limits';
import type { TarSink } from './tarStream';
import { createBundleZstdCompressor, createTrailerHold } from './zstdFrame';

/** Bytes per compressor write on the worker thread (WorkerArchiveWriter's slots). */
export const TAR_BATCH_BYTES = 2 * 1024 * 1024;
/**
 * Bytes per compressor write here, and the compressor's output chunk. Smaller than the worker's: every pack allocates
 * its batches and output chunk anew, and for the archives written here (under 16 MB of tar) 2 MiB buffers cost more
 * in garbage collection than the extra writes cost (1 MB / 40 files, 60 packs, 2 cores: median 22–25 ms with 2 MiB,
 * 17–19 ms with 256 KiB; 10 MB / 200 files: 87–89 ms and 75–81 ms). The bytes written are the same either way.
 */
export const IN_THREAD_BATCH_BYTES = 256 * 1024;
const MAX_IN_FLIGHT = 3;
const OUTPUT_SLICE = 1024 * 1024;
/** Start a background fdatasync after this many new bytes, so the fsync before publication has little left to do. */
const SYNC_EVERY = 32 * 1024 * 1024;

export interface ArchiveWriterOptions {
  fd: number;
  limits: SessionBundleLimits;
  /** Tar bytes handed to the compressor so far; throwing from it cancels the pack. */
  onTarBytes?: (total: number) => void;
  batchBytes?: number;
}

/** Where pack's write pass sends the tar: ArchiveWriter (this thread) or WorkerArchiveWriter (a worker thread). */
export interface ArchiveSink extends TarSink {
  /** Archive bytes written (final once `finish` resolved). */
  readonly bytes: number;
  /** End the stream, write the rest; resolves to the archive digest (`sha256:<hex>`). */
  finish(): Promise<string>;
  /** Stop after a failure; resolves once nothing writes to the file any more. */
  destroy(): Promise<void>;
}

export class ArchiveWriter implements ArchiveSink {
  private readonly compressor: zlib.ZstdCompress;
  private readonly hash = createHash('sha256');
  private readonly free: Buffer[] = [];
  private readonly output: Buffer[] = [];
  private outputOffset = 0;
  private readonly hold = createTrailerHold();
  private readonly emitter = (bytes: Buffer): void => this.emit(bytes);
  private inFlight = 0;
  private tarBytes = 0;
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;
  private ended = false;
  private readonly batchBytes: number;
  private unsynced = 0;
  private syncing: Promise<void> | undefined;
  /** Archive bytes written to the file. */
  bytes = 0;

  constructor(private readonly options: ArchiveWriterOptions) {
    this.batchBytes = options.batchBytes ?? IN_THREAD_BATCH_BYTES;
    this.compressor = createBundleZstdCompressor(this.batchBytes);
    this.compressor.on('data', (chunk: Buffer) => {
      this.output.push(chunk);
      this.notify();
    });
    this.compressor.on('error', (err) => this.fail(err));
    this.compressor.on('end', () => {
      this.ended = true;
      this.notify();
    });
  }

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafe(this.batchBytes);
  }

  async put(buffer: Buffer, length: number): Promise<void> {
    this.check();
    this.tarBytes += length;
    this.options.onTarBytes?.(this.tarBytes);
    this.inFlight += 1;
    this.compressor.write(buffer.subarray(0, length), () => {
      this.inFlight -= 1;
      if (buffer.length === this.batchBytes) this.free.push(buffer);
      this.notify();
    });
    while (this.inFlight >= MAX_IN_FLIGHT) await this.step();
  }

  async pause(): Promise<void> {
    this.check();
    this.drainOutput(OUTPUT_SLICE);
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.check();
  }

  /** End the stream and write the rest; returns the archive digest (`sha256:<hex>`). */
  async finish(): Promise<string> {
    this.check();
    this.compressor.end();
    while (!this.ended || this.output.length > 0) await this.step();
    this.hold.end(this.emitter);
    await this.syncing;
    this.check();
    return `sha256:${this.hash.digest('hex')}`;
  }

  async destroy(): Promise<void> {
    this.compressor.destroy();
    await this.syncing; // no fdatasync may outlive the descriptor
  }

  /** Write one slice of pending output, or wait for something to happen. */
  private async step(): Promise<void> {
    this.check();
    if (this.output.length > 0) {
      this.drainOutput(OUTPUT_SLICE);
      await new Promise<void>((resolve) => setImmediate(resolve));
    } else {
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    this.check();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.notify();
  }

  private check(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  /** Hash and write up to about `budget` bytes of queued output (but Node's possible trailing empty frame). */
  private drainOutput(budget: number): void {
    while (budget > 0 && this.output.length > 0) {
      const chunk = this.output[0] as Buffer;
      const take = Math.min(budget, chunk.length - this.outputOffset);
      this.hold.push(chunk.subarray(this.outputOffset, this.outputOffset + take), this.emitter);
      budget -= take;
      this.outputOffset += take;
      if (this.outputOffset === chunk.length) {
        this.output.shift();
        this.outputOffset = 0;
      }
    }
  }

  private emit(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.bytes += bytes.length;
    checkQuota(this.options.limits, 'maxCompressedBytes', this.bytes, 'pack');
    this.hash.update(bytes);
    writeFullySync(this.options.fd, bytes);
    this.unsynced += bytes.length;
    if (this.unsynced >= SYNC_EVERY && this.syncing === undefined) {
      this.unsynced = 0;
      this.syncing = new Promise<void>((resolve) => {
        fdatasync(this.options.fd, (err) => {
          this.syncing = undefined;
          if (err) this.fail(err);
          resolve();
        });
      });
    }
  }
}
