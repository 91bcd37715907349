// Counts and hashes archive (compressed) bytes as they pass, enforcing maxCompressedBytes per chunk: on pack
// on the way to the temp file, on inspect/hydrate before the bytes reach the frame check and the decoder.
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import type { SessionBundleLimits, SessionBundleOperation } from '../../protocol/bundle';
import { checkQuota } from './limits';

export class ArchiveMeter extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;

  constructor(
    private readonly limits: SessionBundleLimits,
    private readonly operation: SessionBundleOperation,
    private readonly onBytes?: (total: number) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    try {
      checkQuota(this.limits, 'maxCompressedBytes', this.bytes, this.operation);
    } catch (err) {
      done(err as Error);
      return;
    }
    this.hash.update(chunk);
    this.onBytes?.(this.bytes);
    done(null, chunk);
  }

  get digest(): string {
    return `sha256:${this.hash.digest('hex')}`;
  }
}
