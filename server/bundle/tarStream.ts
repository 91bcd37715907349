// The pack-side tar stream (spec §1, §4): manifest first, then every payload entry in canonical order, content
// in 64 KiB chunks (the chunk pattern Maka feeds its encoder, for byte-identical frames) re-hashed on the way,
// then exactly two zero blocks. A file whose bytes differ from the scan is `source_changed`.
import { createHash } from 'node:crypto';
import { SessionBundleError } from './errors';
import { readSourceFile, sourceChanged } from './sourceFile';
import type { SourceEntry } from './sourceTree';
import { BLOCK, encodeUstarHeader, paddingLength } from './ustar';

export type PackEntry = SourceEntry | { kind: 'identity'; archivePath: string; bytes: Buffer; size: number; digest: Buffer };

export function tarLength(manifestBytes: number, entries: readonly PackEntry[]): number {
  let total = BLOCK + manifestBytes + paddingLength(manifestBytes) + 2 * BLOCK;
  for (const entry of entries) total += BLOCK + (entry.kind === 'directory' ? 0 : entry.size + paddingLength(entry.size));
  return total;
}

/** SHA-256 of every source file (read ahead), stored on the entries; `onBytes` reports progress. */
export async function hashSourceFiles(entries: readonly SourceEntry[], onBytes?: (n: number) => void): Promise<void> {
  for (const entry of entries) {
    if (entry.kind !== 'file') continue;
    const hash = createHash('sha256');
    for await (const chunk of readSourceFile(entry)) {
      hash.update(chunk);
      onBytes?.(chunk.length);
    }
    entry.digest = hash.digest();
  }
}

export const TERMINATOR = Buffer.alloc(2 * BLOCK);
const ZERO_BLOCK = Buffer.alloc(BLOCK);

/**
 * The tar bytes before the terminator, as chunks valid until the next one; throws when they would not be exactly
 * `expectedLength` − 1024 bytes.
 */
export async function* tarBody(manifest: Buffer, entries: readonly PackEntry[], expectedLength: number): AsyncGenerator<Buffer> {
  let emitted = 0;
  const emit = (chunk: Buffer): Buffer => {
    emitted += chunk.length;
    return chunk;
  };
  yield emit(encodeUstarHeader({ kind: 'file', path: 'manifest.json', mode: 0o644, size: manifest.length }));
  if (manifest.length > 0) yield emit(manifest);
  if (paddingLength(manifest.length) > 0) yield emit(ZERO_BLOCK.subarray(0, paddingLength(manifest.length)));
  for (const entry of entries) {
    if (entry.kind === 'directory') {
      yield emit(encodeUstarHeader({ kind: 'directory', path: entry.archivePath, mode: 0o755, size: 0 }));
      continue;
    }
    const mode = entry.kind === 'identity' ? 0o644 : entry.mode;
    yield emit(encodeUstarHeader({ kind: 'file', path: entry.archivePath, mode, size: entry.size }));
    if (entry.kind === 'identity') {
      if (entry.bytes.length > 0) yield emit(entry.bytes);
    } else {
      const hash = createHash('sha256');
      for await (const chunk of readSourceFile(entry)) {
        hash.update(chunk);
        yield emit(chunk);
      }
      if (entry.digest === undefined || !hash.digest().equals(entry.digest)) throw sourceChanged(entry, 'content');
    }
    if (paddingLength(entry.size) > 0) yield emit(ZERO_BLOCK.subarray(0, paddingLength(entry.size)));
  }
  if (emitted + TERMINATOR.length !== expectedLength) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: tar length drifted while packing', { operation: 'pack' });
}

export const COALESCE_BYTES = 256 * 1024;

/**
 * Copy the body chunks into fresh writes of COALESCE_BYTES (the last one shorter), then yield the terminator as
 * its own last write, as Maka's stream has it. Every write costs the encoder a thread-pool round trip, and
 * libzstd buffers input into 128 KiB blocks, so for realistic input the frame does not depend on how the stream
 * was split: on two 200 MB / 5,000-file trees (one the bench tree) Maka's chunk pattern, 64 KiB, 256 KiB and 1 MiB
 * writes and one buffer gave identical frames (uniform 1,000-byte writes did not, as the spec notes). The golden
 * archive test pins the result. Copying at once also lets the file reader reuse its buffer. Deterministic: the
 * same bytes are always split the same way.
 */
export async function* coalesce(body: AsyncIterable<Buffer>, terminator: Buffer, size = COALESCE_BYTES): AsyncGenerator<Buffer> {
  let batch = Buffer.allocUnsafe(size);
  let used = 0;
  for await (const chunk of body) {
    let offset = 0;
    while (offset < chunk.length) {
      const take = Math.min(size - used, chunk.length - offset);
      chunk.copy(batch, used, offset, offset + take);
      used += take;
      offset += take;
      if (used === size) {
        yield batch;
        batch = Buffer.allocUnsafe(size);
        used = 0;
      }
    }
  }
  if (used > 0) yield batch.subarray(0, used);
  yield terminator;
}
