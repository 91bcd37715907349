// Exact-length reads over an async stream of chunks, without ever holding more than one chunk plus one
// 512-byte block: what the tar reader needs to stay bounded in memory. Counts every byte it pulls so the
// decompressed-tar quota is enforced on the decoder's output as it arrives.
// Views returned (by readExact when the bytes lie in one chunk, and by readSlices) are only valid until the next
// read: the reading worker refills a chunk's shared slot as soon as the next chunk is requested.
import { SessionBundleError } from './errors';

export class ByteSource {
  private chunk: Buffer = Buffer.alloc(0);
  private offset = 0;
  private ended = false;
  total = 0;

  constructor(
    private readonly iterator: AsyncIterator<Buffer>,
    private readonly onChunk: (chunkLength: number, total: number) => void,
  ) {}

  private async fill(): Promise<boolean> {
    while (this.offset >= this.chunk.length) {
      if (this.ended) return false;
      const next = await this.iterator.next();
      if (next.done === true) {
        this.ended = true;
        return false;
      }
      const value = next.value;
      this.total += value.length;
      this.onChunk(value.length, this.total);
      this.chunk = value;
      this.offset = 0;
    }
    return true;
  }

  /** Exactly n bytes, or `integrity_mismatch` when the stream ends first. */
  async readExact(n: number): Promise<Buffer> {
    if (!(await this.fill())) throw truncated();
    if (this.chunk.length - this.offset >= n) {
      const out = this.chunk.subarray(this.offset, this.offset + n);
      this.offset += n;
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      if (!(await this.fill())) throw truncated();
      const take = Math.min(n - filled, this.chunk.length - this.offset);
      this.chunk.copy(out, filled, this.offset, this.offset + take);
      this.offset += take;
      filled += take;
    }
    return out;
  }

  /** n bytes as a sequence of slices (no copy); each slice is valid until the next call. */
  async *readSlices(n: number): AsyncGenerator<Buffer> {
    let remaining = n;
    while (remaining > 0) {
      if (!(await this.fill())) throw truncated();
      const take = Math.min(remaining, this.chunk.length - this.offset);
      const slice = this.chunk.subarray(this.offset, this.offset + take);
      this.offset += take;
      remaining -= take;
      yield slice;
    }
  }

  async atEnd(): Promise<boolean> {
    return !(await this.fill());
  }
}

function truncated(): SessionBundleError {
  return new SessionBundleError('integrity_mismatch', 'integrity mismatch: tar stream is truncated');
}
