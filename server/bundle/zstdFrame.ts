// The single canonical zstd frame of Session Bundle v1 (spec §4). Writer: Node's built-in zstd with level 3,
// checksum on, no content size, window log 21, and Node's trailing empty frame stripped. Reader: a structural
// check of exactly one frame with header 28b52ffd 04 58 and nothing after it, in front of a decoder whose
// window is capped at 2 MiB — so no bundle can demand more decoder memory than ours ever needs.
import { Transform, type TransformCallback } from 'node:stream';
import zlib from 'node:zlib';
import { SessionBundleError } from './errors';

export const FRAME_HEADER = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58]);
/** Node appends this empty frame after multi-chunk input; it is not part of a bundle. */
export const NODE_TRAILING_EMPTY_FRAME = Buffer.from('28b52ffd040001000099e9d851', 'hex');
const MAX_BLOCK = 128 * 1024;
const CHUNK = 256 * 1024; // output chunking only; it does not change the compressed bytes

/** The encoder parameters of Session Bundle v1 (also handed to the compressing worker thread). */
export function bundleZstdParams(): Record<number, number> {
  const c = zlib.constants;
  return {
    [c.ZSTD_c_compressionLevel]: 3,
    [c.ZSTD_c_checksumFlag]: 1,
    [c.ZSTD_c_contentSizeFlag]: 0,
    [c.ZSTD_c_dictIDFlag]: 0,
    [c.ZSTD_c_nbWorkers]: 0,
    [c.ZSTD_c_windowLog]: 21,
  };
}

/** `chunkSize` is the size of the compressor's output buffers; it does not change the compressed bytes. */
export function createBundleZstdCompressor(chunkSize = CHUNK): zlib.ZstdCompress {
  return zlib.createZstdCompress({ chunkSize, params: bundleZstdParams() });
}

/** The decoder parameters: a window of at most 2 MiB (also handed to the reading worker thread). */
export function bundleZstdDecoderParams(): Record<number, number> {
  return { [zlib.constants.ZSTD_d_windowLogMax]: 21 };
}

export function createBundleZstdDecompressor(): zlib.ZstdDecompress {
  return zlib.createZstdDecompress({ chunkSize: CHUNK, params: bundleZstdDecoderParams() });
}

/**
 * Holding back Node's trailing empty frame, as plain JavaScript shared with the compressing worker thread
 * (workerArchiveWriter.ts), so there is one implementation: `push` passes on everything but the last 13 bytes seen
 * (views valid during the call), `end` passes those on too unless they are exactly NODE_TRAILING_EMPTY_FRAME.
 */
export const TRAILER_HOLD_SOURCE = `
class TrailerHold {
  constructor(trailer) {
    this.trailer = Buffer.from(trailer);
    this.tail = Buffer.alloc(0);
  }
  push(piece, emit) {
    const hold = this.trailer.length;
    if (piece.length >= hold) {
      if (this.tail.length > 0) emit(this.tail);
      if (piece.length > hold) emit(piece.subarray(0, piece.length - hold));
      this.tail = Buffer.from(piece.subarray(piece.length - hold));
      return;
    }
    const all = Buffer.concat([this.tail, piece]);
    if (all.length > hold) emit(all.subarray(0, all.length - hold));
    this.tail = all.subarray(Math.max(0, all.length - hold));
  }
  end(emit) {
    if (this.tail.length > 0 && !this.tail.equals(this.trailer)) emit(this.tail);
    this.tail = Buffer.alloc(0);
  }
}
`;

export interface TrailerHold {
  push(piece: Buffer, emit: (bytes: Buffer) => void): void;
  end(emit: (bytes: Buffer) => void): void;
}
// Compiled from the shared source (a constant of this module, not outside input).
const TrailerHoldClass = new Function(`${TRAILER_HOLD_SOURCE}\nreturn TrailerHold;`)() as new (trailer: Uint8Array) => TrailerHold;

export function createTrailerHold(): TrailerHold {
  return new TrailerHoldClass(NODE_TRAILING_EMPTY_FRAME);
}

/** Holds back the last 13 output bytes and drops them when they are exactly Node's empty trailing frame. */
export class StripTrailingEmptyFrame extends Transform {
  private readonly hold = createTrailerHold();

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hold.push(chunk, (bytes) => this.push(Buffer.from(bytes)));
    done();
  }

  override _flush(done: TransformCallback): void {
    this.hold.end((bytes) => this.push(Buffer.from(bytes)));
    done();
  }
}

/**
 * The structural check of the one canonical frame, as plain JavaScript: the same source runs here (below) and in
 * the reading worker thread (readerWorker.ts), so there is one implementation. `scan` takes the compressed bytes in
 * any split; `finish` after the last one. Failures are Errors carrying `frameReason`.
 * Accepted: header 28b52ffd 04 58, blocks of type 0/1/2 declaring at most 128 KiB (an RLE block's body is one
 * byte), after the last block the 4-byte checksum, then nothing.
 */
export const FRAME_SCANNER_SOURCE = `
class FrameScanner {
  constructor(header, maxBlock) {
    this.header = header;
    this.maxBlock = maxBlock;
    this.state = 'header';
    this.need = header.length;
    this.small = [];
    this.lastBlock = false;
  }
  fail(reason) {
    throw Object.assign(new Error(reason), { frameReason: reason });
  }
  scan(chunk) {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'done') this.fail('bytes after the zstd frame (exactly one frame is allowed)');
      if (this.state === 'blockBody') {
        const take = Math.min(this.need, chunk.length - i);
        i += take;
        this.need -= take;
        if (this.need === 0) this.afterBlock();
        continue;
      }
      this.small.push(chunk[i]);
      i += 1;
      if (this.small.length < this.need) continue;
      const bytes = this.small;
      this.small = [];
      if (this.state === 'header') {
        if (bytes.length !== this.header.length || bytes.some((b, k) => k < 4 && b !== this.header[k])) {
          this.fail('the file is not a Session Bundle: it is not zstd-compressed (it does not start with the zstd magic number 28b52ffd)');
        }
        if (bytes.some((b, k) => b !== this.header[k])) this.fail('zstd frame header is not 28b52ffd 04 58: a zstd file, but not framed as a Session Bundle is');
        this.state = 'blockHeader';
        this.need = 3;
      } else if (this.state === 'blockHeader') {
        const header = bytes[0] | (bytes[1] << 8) | (bytes[2] << 16);
        this.lastBlock = (header & 1) === 1;
        const type = (header >> 1) & 3;
        const size = header >>> 3;
        if (type === 3) this.fail('reserved zstd block type');
        if (size > this.maxBlock) this.fail('zstd block larger than 128 KiB');
        this.need = type === 1 ? 1 : size;
        if (this.need === 0) this.afterBlock();
        else this.state = 'blockBody';
      } else {
        this.state = 'done';
      }
    }
  }
  afterBlock() {
    this.state = this.lastBlock ? 'checksum' : 'blockHeader';
    this.need = this.lastBlock ? 4 : 3;
  }
  finish() {
    if (this.state !== 'done') this.fail('zstd frame is truncated');
  }
}
`;

interface FrameScanner {
  scan(chunk: Uint8Array): void;
  finish(): void;
}
// Compiled from the shared source (not eval'd input: a constant of this module).
const FrameScannerClass = new Function(`${FRAME_SCANNER_SOURCE}\nreturn FrameScanner;`)() as new (header: Uint8Array, maxBlock: number) => FrameScanner;

function frameError(reason: string): SessionBundleError {
  return new SessionBundleError('integrity_mismatch', `integrity mismatch: ${reason}`);
}

/** Map a scanner failure to `integrity_mismatch`; anything else is rethrown. */
export function frameFailure(err: unknown): unknown {
  const reason = typeof err === 'object' && err !== null && 'frameReason' in err ? (err as { frameReason: unknown }).frameReason : undefined;
  return typeof reason === 'string' ? frameError(reason) : err;
}

export function createFrameScanner(): FrameScanner {
  return new FrameScannerClass(FRAME_HEADER, MAX_BLOCK);
}

/** Validates the frame structure (FRAME_SCANNER_SOURCE) as bytes flow through; they pass unchanged. */
export class CanonicalFrameValidator extends Transform {
  private readonly scanner = createFrameScanner();

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.scanner.scan(chunk);
    } catch (err) {
      done(frameFailure(err) as Error);
      return;
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    try {
      this.scanner.finish();
    } catch (err) {
      done(frameFailure(err) as Error);
      return;
    }
    done();
  }
}
