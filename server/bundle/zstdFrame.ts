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

export function createBundleZstdCompressor(): zlib.ZstdCompress {
  const c = zlib.constants;
  return zlib.createZstdCompress({
    chunkSize: CHUNK,
    params: {
      [c.ZSTD_c_compressionLevel]: 3,
      [c.ZSTD_c_checksumFlag]: 1,
      [c.ZSTD_c_contentSizeFlag]: 0,
      [c.ZSTD_c_dictIDFlag]: 0,
      [c.ZSTD_c_nbWorkers]: 0,
      [c.ZSTD_c_windowLog]: 21,
    },
  });
}

export function createBundleZstdDecompressor(): zlib.ZstdDecompress {
  return zlib.createZstdDecompress({ chunkSize: CHUNK, params: { [zlib.constants.ZSTD_d_windowLogMax]: 21 } });
}

/** Holds back the last 13 output bytes and drops them when they are exactly Node's empty trailing frame. */
export class StripTrailingEmptyFrame extends Transform {
  private tail: Buffer = Buffer.alloc(0);

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const all = this.tail.length === 0 ? chunk : Buffer.concat([this.tail, chunk]);
    const keep = NODE_TRAILING_EMPTY_FRAME.length;
    if (all.length > keep) this.push(all.subarray(0, all.length - keep));
    this.tail = Buffer.from(all.subarray(Math.max(0, all.length - keep)));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (!this.tail.equals(NODE_TRAILING_EMPTY_FRAME) && this.tail.length > 0) this.push(this.tail);
    done();
  }
}

type FrameState = 'header' | 'blockHeader' | 'blockBody' | 'checksum' | 'done';

function frameError(reason: string): SessionBundleError {
  return new SessionBundleError('integrity_mismatch', `integrity mismatch: ${reason}`);
}

/**
 * Validates the frame structure as bytes flow through (they pass unchanged): header 28b52ffd 04 58, blocks of
 * type 0/1/2 with at most 128 KiB each, then the 4-byte checksum, then end of file.
 */
export class CanonicalFrameValidator extends Transform {
  private state: FrameState = 'header';
  private need = FRAME_HEADER.length;
  private small: number[] = [];
  private lastBlock = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.scan(chunk);
    } catch (err) {
      done(err as Error);
      return;
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    done(this.state === 'done' ? null : frameError('zstd frame is truncated'));
  }

  private scan(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'done') throw frameError('bytes after the zstd frame (exactly one frame is allowed)');
      if (this.state === 'blockBody') {
        const take = Math.min(this.need, chunk.length - i);
        i += take;
        this.need -= take;
        if (this.need === 0) this.enterAfterBlock();
        continue;
      }
      this.small.push(chunk[i] ?? 0);
      i += 1;
      if (this.small.length < this.need) continue;
      const bytes = Buffer.from(this.small);
      this.small = [];
      if (this.state === 'header') {
        if (!bytes.equals(FRAME_HEADER)) throw frameError('zstd frame header is not 28b52ffd 04 58');
        this.state = 'blockHeader';
        this.need = 3;
      } else if (this.state === 'blockHeader') {
        this.readBlockHeader(bytes.readUIntLE(0, 3));
      } else {
        this.state = 'done';
      }
    }
  }

  private readBlockHeader(header: number): void {
    this.lastBlock = (header & 1) === 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (type === 3) throw frameError('reserved zstd block type');
    if (size > MAX_BLOCK) throw frameError('zstd block larger than 128 KiB');
    this.need = type === 1 ? 1 : size;
    if (this.need === 0) this.enterAfterBlock();
    else this.state = 'blockBody';
  }

  private enterAfterBlock(): void {
    this.state = this.lastBlock ? 'checksum' : 'blockHeader';
    this.need = this.lastBlock ? 4 : 3;
  }
}
