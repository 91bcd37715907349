// A pass-through stream that hashes and counts bytes while they flow, and fails as soon as more
// bytes arrive than expected — so publish, verify and materialize never buffer a whole object.
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback, Writable } from 'node:stream';
import { SessionRepositoryError } from './errors';

export class DigestMeter extends Transform {
  private readonly hash: Hash = createHash('sha256');
  bytes = 0;

  constructor(
    private readonly expectedBytes: number,
    private readonly what: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    try {
      this.add(chunk);
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback(null, chunk);
  }

  /** Counts and hashes `chunk` (a stream's, or a value held in memory); integrity_mismatch past the expected size. */
  add(chunk: Uint8Array): void {
    this.bytes += chunk.length;
    if (this.bytes > this.expectedBytes) {
      throw new SessionRepositoryError('integrity_mismatch', `${this.what} has more than the expected ${this.expectedBytes} bytes`);
    }
    this.hash.update(chunk);
  }

  /** `sha256:<hex>` of everything that passed; call once, after the stream ended. */
  digest(): string {
    return `sha256:${this.hash.digest('hex')}`;
  }

  /** Throws integrity_mismatch unless the bytes seen match the expected size and digest. */
  verify(expectedDigest: string): void {
    if (this.bytes !== this.expectedBytes) {
      throw new SessionRepositoryError(
        'integrity_mismatch',
        `${this.what} has ${this.bytes} bytes, expected ${this.expectedBytes}`,
      );
    }
    const actual = this.digest();
    if (actual !== expectedDigest) {
      throw new SessionRepositoryError('integrity_mismatch', `${this.what} has digest ${actual}, expected ${expectedDigest}`);
    }
  }
}

/** A sink that discards bytes (for verify-only reads). */
export function discard(): Writable {
  return new Writable({
    write(_chunk, _enc, cb) {
      cb();
    },
  });
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
