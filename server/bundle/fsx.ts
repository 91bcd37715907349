// Small file-system helpers the codec shares: inode fingerprints (to notice a source that changes under us),
// directory fsync, full writes and a bounded file reader. Nothing here knows the bundle format.
import { constants, promises as fsp, writeSync, type BigIntStats } from 'node:fs';
import { Readable } from 'node:stream';

export const READ_CHUNK = 64 * 1024;

export interface Fingerprint {
  dev: bigint;
  ino: bigint;
  nlink: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

export function fingerprintOf(st: Pick<BigIntStats, keyof Fingerprint | 'mtimeNs' | 'ctimeNs'>): Fingerprint {
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
