// Small file-system helpers the codec shares: inode fingerprints (to notice a source that changes under us),
// directory fsync, and a bounded-memory file hash. Nothing here knows the bundle format.
import { createHash } from 'node:crypto';
import { constants, promises as fsp, writeSync, type BigIntStats } from 'node:fs';
import { Readable, Writable } from 'node:stream';

export const READ_CHUNK = 64 * 1024;

export interface Fingerprint {
  dev: bigint;
  ino: bigint;
  nlink: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

export function fingerprintOf(st: BigIntStats): Fingerprint {
  return { dev: st.dev, ino: st.ino, nlink: st.nlink, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}

export function sameFingerprint(a: Fingerprint, b: Fingerprint): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.nlink === b.nlink && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

export function sameInode(a: { dev: bigint; ino: bigint }, b: { dev: bigint; ino: bigint }): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

export async function lstatOrUndefined(path: string): Promise<BigIntStats | undefined> {
  try {
    return await fsp.lstat(path, { bigint: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
}

export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

export async function fsyncDirectory(path: string): Promise<void> {
  const handle = await fsp.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** SHA-256 of an open file from offset 0, reading 64 KiB at a time; returns the digest and the byte count. */
export async function hashOpenFile(handle: fsp.FileHandle, onBytes?: (n: number) => void): Promise<{ digest: Buffer; bytes: number }> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  let position = 0;
  while (true) {
    const { bytesRead } = await handle.read(buffer, 0, READ_CHUNK, position);
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(0, bytesRead));
    position += bytesRead;
    onBytes?.(bytesRead);
  }
  return { digest: hash.digest(), bytes: position };
}

/**
 * A Writable appending to an open FileHandle with synchronous writes (leaves the handle open). Page-cache writes
 * take microseconds, while each asynchronous call costs a thread-pool wake-up that, on small VMs, dominated
 * packing; FileHandle.createWriteStream with autoClose:false also keeps a reference that blocks close().
 */
export function handleWriter(handle: fsp.FileHandle): Writable {
  return new Writable({
    highWaterMark: READ_CHUNK,
    write(chunk: Buffer, _enc, done) {
      try {
        writeFullySync(handle.fd, chunk);
        done();
      } catch (err) {
        done(err as Error);
      }
    },
  });
}

export function writeFullySync(fd: number, chunk: Uint8Array): void {
  let offset = 0;
  while (offset < chunk.length) offset += writeSync(fd, chunk, offset, chunk.length - offset);
}

export async function writeFully(handle: fsp.FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/** A Readable over an open FileHandle from offset 0 in 256 KiB reads; leaves the handle open. */
export function handleReader(handle: fsp.FileHandle): Readable {
  let position = 0;
  const size = 4 * READ_CHUNK;
  return new Readable({
    highWaterMark: size,
    read() {
      const buffer = Buffer.allocUnsafe(size);
      handle.read(buffer, 0, size, position).then(
        ({ bytesRead }) => {
          position += bytesRead;
          this.push(bytesRead === 0 ? null : buffer.subarray(0, bytesRead));
        },
        (err: Error) => this.destroy(err),
      );
    },
  });
}
