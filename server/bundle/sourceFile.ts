// Reading one source file for pack, in 64 KiB chunks (the chunk sizes Maka feeds its encoder), checking after
// the read that the inode still has the scan's fingerprint (a replaced file or a write while we read both show)
// and that exactly the scanned number of bytes came back.
// Small files are read with synchronous calls into one reused buffer: for thousands of small files the per-call
// cost of the promise API (measured ~3× the CPU of open/read/fstat/close themselves) and the garbage of a fresh
// buffer per read dominated packing, while one small read from the page cache blocks the event loop for well under
// a millisecond. Big files are streamed asynchronously. Chunks handed out are views valid until the next chunk.
import { closeSync, constants, fstatSync, openSync, promises as fsp, readSync, type BigIntStats } from 'node:fs';
import { SessionBundleError } from './errors';
import { fingerprintOf, READ_CHUNK, sameFingerprint } from './fsx';
import type { SourceEntry } from './sourceTree';

export const SYNC_READ_MAX_BYTES = 1024 * 1024;
const scratch = Buffer.allocUnsafe(READ_CHUNK);

export function sourceChanged(entry: SourceEntry, what = ''): SessionBundleError {
  return new SessionBundleError('source_changed', `source changed while packing: ${JSON.stringify(entry.archivePath)}${what === '' ? '' : ` ${what}`}`, { operation: 'pack' });
}

/** Size of the next read: up to 64 KiB, one byte past the expected end so that growth shows. */
function nextReadSize(entry: SourceEntry, position: number): number {
  return Math.min(READ_CHUNK, Math.max(entry.size - position, 0) + 1);
}

function checkAfterRead(entry: SourceEntry, position: number, st: BigIntStats): void {
  if (position !== entry.size) throw sourceChanged(entry, position > entry.size ? 'grew' : 'shrank');
  if (!sameFingerprint(fingerprintOf(st), entry.fingerprint)) throw sourceChanged(entry);
}

function* readSmallFileSync(entry: SourceEntry): Generator<Buffer> {
  const fd = openSync(entry.sourcePath, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let position = 0;
    while (position <= entry.size) {
      const bytesRead = readSync(fd, scratch, 0, nextReadSize(entry, position), position);
      if (bytesRead === 0) break;
      position += bytesRead;
      if (position > entry.size) break;
      yield scratch.subarray(0, bytesRead);
    }
    checkAfterRead(entry, position, fstatSync(fd, { bigint: true }));
  } finally {
    closeSync(fd);
  }
}

async function* streamBigFile(entry: SourceEntry): AsyncGenerator<Buffer> {
  const handle = await fsp.open(entry.sourcePath, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    let position = 0;
    while (position <= entry.size) {
      const buffer = Buffer.allocUnsafe(nextReadSize(entry, position));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      if (position > entry.size) break;
      yield buffer.subarray(0, bytesRead);
    }
    checkAfterRead(entry, position, await handle.stat({ bigint: true }));
  } finally {
    await handle.close();
  }
}

/** The file's content as 64 KiB chunks, verified against the scan; each chunk is valid until the next one. */
export async function* readSourceFile(entry: SourceEntry): AsyncGenerator<Buffer> {
  if (entry.size <= SYNC_READ_MAX_BYTES) yield* readSmallFileSync(entry);
  else yield* streamBigFile(entry);
}
