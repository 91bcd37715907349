// The pack-side tar stream (spec §1, §4): manifest first, then every payload entry in canonical order, then exactly
// two zero blocks. Headers, content and padding are laid straight into fixed-size batches (file content is read
// into the batch itself, no copy), each file re-hashed on the way: a file whose bytes differ from the first pass
// is `source_changed`. Every batch is one write to the compressor; the terminator is a write of its own, last.
//
// Why batches rather than Maka's chunk pattern (header, ≤64 KiB content reads, padding): every compressor write
// costs a thread-pool round trip, and libzstd buffers its input into 128 KiB blocks, so for realistic input the
// frame does not depend on how the stream is split. On two 200 MB / 5,000-file trees (one the bench tree) Maka's
// chunk pattern, 64 KiB, 256 KiB, 1 MiB and 4 MiB writes, random-sized writes and one buffer all gave identical
// frames (uniform 1,000-byte writes did not, as the spec notes); the golden archive test pins the result.
// Deterministic: the same bytes are always split the same way.
import { createHash } from 'node:crypto';
import { SessionBundleError } from './errors';
import { SourceFileReader, sourceChanged } from './sourceFile';
import type { SourceEntry } from './sourceTree';
import { BLOCK, paddingLength, writeUstarHeader, type UstarEntry } from './ustar';

export type PackEntry = SourceEntry | { kind: 'identity'; archivePath: string; bytes: Buffer; size: number; digest: Buffer };

export function tarLength(manifestBytes: number, entries: readonly PackEntry[]): number {
  let total = BLOCK + manifestBytes + paddingLength(manifestBytes) + 2 * BLOCK;
  for (const entry of entries) total += BLOCK + (entry.kind === 'directory' ? 0 : entry.size + paddingLength(entry.size));
  return total;
}

export const TERMINATOR = Buffer.alloc(2 * BLOCK);

/** Where the tar bytes go. */
export interface TarSink {
  /** A buffer to fill (recycled once the compressor is done with it); all the same length, a multiple of 512. */
  take(): Buffer;
  /** The first `length` bytes of a buffer from `take` (or the terminator): it belongs to the sink now. */
  put(buffer: Buffer, length: number): void | Promise<void>;
  /** Called after about every `pauseEvery` bytes of file content: a chance for other work to run. */
  pause(): void | Promise<void>;
}

/**
 * Write the whole tar stream into `sink`, then the terminator; throws before the terminator when the body would not
 * be exactly `expectedLength` − 1024 bytes, and `source_changed` when a file's content differs from `entry.digest`.
 */
export async function writeTar(manifest: Buffer, entries: readonly PackEntry[], expectedLength: number, sink: TarSink, pauseEvery = 1024 * 1024): Promise<void> {
  let batch = sink.take();
  if (batch.length === 0 || batch.length % BLOCK !== 0) throw new RangeError('tar batches must be whole 512-byte blocks');
  let used = 0;
  let emitted = 0;
  let work = 0;

  const flush = async (): Promise<void> => {
    const full = batch;
    const length = used;
    emitted += length;
    batch = sink.take();
    used = 0;
    await sink.put(full, length);
  };
  const append = async (bytes: Buffer): Promise<void> => {
    let offset = 0;
    while (offset < bytes.length) {
      if (used === batch.length) await flush();
      const take = Math.min(batch.length - used, bytes.length - offset);
      bytes.copy(batch, used, offset, offset + take);
      used += take;
      offset += take;
    }
  };
  // Entries start on 512-byte boundaries and batches are whole blocks, so a header never straddles two batches.
  const header = async (entry: UstarEntry): Promise<void> => {
    if (used === batch.length) await flush();
    writeUstarHeader(entry, batch, used);
    used += BLOCK;
  };
  const zeros = async (n: number): Promise<void> => {
    while (n > 0) {
      if (used === batch.length) await flush();
      const take = Math.min(batch.length - used, n);
      batch.fill(0, used, used + take);
      used += take;
      n -= take;
    }
  };

  await header({ kind: 'file', path: 'manifest.json', mode: 0o644, size: manifest.length });
  await append(manifest);
  await zeros(paddingLength(manifest.length));
  for (const entry of entries) {
    if (entry.kind === 'directory') {
      await header({ kind: 'directory', path: entry.archivePath, mode: 0o755, size: 0 });
      continue;
    }
    const mode = entry.kind === 'identity' ? 0o644 : entry.mode;
    await header({ kind: 'file', path: entry.archivePath, mode, size: entry.size });
    if (entry.kind === 'identity') {
      await append(entry.bytes);
    } else {
      const reader = new SourceFileReader(entry);
      try {
        const hash = createHash('sha256');
        while (reader.remaining > 0) {
          if (used === batch.length) await flush();
          const n = reader.read(batch, used, batch.length - used);
          hash.update(batch.subarray(used, used + n));
          used += n;
          work += n;
          if (work >= pauseEvery) {
            work = 0;
            await sink.pause();
          }
        }
        reader.finish();
        if (entry.digest === undefined || !hash.digest().equals(entry.digest)) throw sourceChanged(entry, 'content');
      } finally {
        reader.close();
      }
    }
    await zeros(paddingLength(entry.size));
  }
  if (used > 0) await flush();
  if (emitted + TERMINATOR.length !== expectedLength) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: tar length drifted while packing', { operation: 'pack' });
  await sink.put(TERMINATOR, TERMINATOR.length);
}
