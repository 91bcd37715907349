// Crash-safe, no-replace publication of a packed archive (spec §8 "Pack publication"): write a 0600 temp
// file beside the destination, fsync it, `link` it to the destination (fails if anything is there, so of
// several concurrent packers exactly one wins), then check that the published name is the inode that was written,
// with the size and modification time it had when our last write was synced.
// Unlike Maka, the published file is not read back and re-hashed: the archive digest is computed over exactly the
// bytes written to this inode (ArchiveWriter hashes each slice as it writes it), so re-reading would recompute the
// same digest unless someone else wrote to our private 0600 temp inode — which moves its mtime, checked here.
// What pack hands on (`WrittenArchive`, see `writtenArchiveOf`): the digest it computed over the bytes it wrote and the
// published file's identity as this code left it, so that a store taking the file over need not hash it again
// while it is still that very inode, unchanged (its ctime, which nobody can set back, included).
import { randomUUID } from 'node:crypto';
import { constants, promises as fsp, type BigIntStats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { SessionBundleError } from './errors';
import { errnoOf, fsyncDirectory, lstatOrUndefined, sameInode } from './fsx';

/** A published file's identity right after this code's last change to it; any later change moves its ctime. */
export interface WrittenIdentity {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

/** An archive pack wrote in this process: the SHA-256 it computed over exactly the bytes it wrote, and the file's identity. */
export interface WrittenArchive {
  digest: string;
  identity: WrittenIdentity;
}

/** Artifact object (as pack returned it, never a copy or a parsed one) → what pack knows it wrote. */
const writtenArchives = new WeakMap<object, WrittenArchive>();

export function recordWrittenArchive(artifact: object, written: WrittenArchive): void {
  writtenArchives.set(artifact, written);
}

/**
 * What pack wrote for this very artifact object in this process (undefined for anything else, e.g. an artifact
 * parsed from JSON): for a store that may skip hashing a handed-over file still unchanged since (objectStore.ts).
 */
export function writtenArchiveOf(artifact: object): WrittenArchive | undefined {
  return writtenArchives.get(artifact);
}

export interface PackTemp {
  path: string;
  handle: fsp.FileHandle;
  stat: BigIntStats;
}

function changed(what: string): SessionBundleError {
  return new SessionBundleError('source_changed', `publication raced: ${what}`, { operation: 'pack' });
}

export async function assertDestinationFree(destination: string): Promise<void> {
  const parent = await fsp.stat(dirname(destination)).catch((err: unknown) => {
    throw new SessionBundleError('io_failure', `the destination's parent directory is unusable (${errnoOf(err) ?? 'error'})`, { operation: 'pack' });
  });
  if (!parent.isDirectory()) throw new SessionBundleError('io_failure', "the destination's parent is not a directory", { operation: 'pack' });
  if ((await lstatOrUndefined(destination)) !== undefined) {
    throw new SessionBundleError('destination_exists', 'the destination already exists; bundles are never replaced', { operation: 'pack' });
  }
}

export async function createPackTemp(destination: string): Promise<PackTemp> {
  const path = join(dirname(destination), `.${basename(destination)}.maka-session-bundle-pack-${randomUUID()}.tmp`);
  const handle = await fsp.open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  await handle.chmod(0o600);
  return { path, handle, stat: await handle.stat({ bigint: true }) };
}

/** Remove the temp (and a published destination) only while they are still our inode. */
export async function discardPackTemp(temp: PackTemp, destination: string, published: boolean): Promise<void> {
  await temp.handle.close().catch(() => undefined);
  for (const path of published ? [temp.path, destination] : [temp.path]) {
    const st = await lstatOrUndefined(path).catch(() => undefined);
    if (st !== undefined && sameInode(st, temp.stat)) await fsp.unlink(path).catch(() => undefined);
  }
}

/**
 * fsync, link to the destination, verify the published inode, drop the temp name, fsync the parent.
 * `onPublished` is called once the destination name exists, so the caller knows to remove it on failure.
 * Returns the destination's identity after the last step here, or undefined if it is not provably the inode written
 * and synced, unchanged (then nobody may skip hashing it).
 */
export async function publishPackTemp(temp: PackTemp, destination: string, compressedBytes: number, onPublished: () => void): Promise<WrittenIdentity | undefined> {
  await temp.handle.sync();
  const written = await temp.handle.stat({ bigint: true });
  if (!sameInode(written, temp.stat) || written.size !== BigInt(compressedBytes)) throw changed('the temp file changed while it was written');
  await temp.handle.close();
  const tempNow = await lstatOrUndefined(temp.path);
  if (tempNow === undefined || !sameInode(tempNow, temp.stat)) throw changed('the temp file was replaced');
  try {
    await fsp.link(temp.path, destination);
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') throw new SessionBundleError('destination_exists', 'the destination already exists; bundles are never replaced', { operation: 'pack' });
    throw err;
  }
  onPublished();
  const published = await fsp.open(destination, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const st = await published.stat({ bigint: true });
    if (!sameInode(st, temp.stat)) throw changed('the destination is not the inode that was written');
    if (st.size !== written.size || st.mtimeNs !== written.mtimeNs) throw changed('the published file was written to after it was synced');
  } finally {
    await published.close();
  }
  const tempAfter = await lstatOrUndefined(temp.path);
  if (tempAfter !== undefined && sameInode(tempAfter, temp.stat)) await fsp.unlink(temp.path);
  await fsyncDirectory(dirname(destination));
  // Unlinking the temp name moved the ctime: the identity is taken now, and only if size and mtime are still those
  // of the synced write (checked above through the open destination).
  const final = await lstatOrUndefined(destination);
  if (final === undefined || !final.isFile() || !sameInode(final, temp.stat) || final.size !== written.size || final.mtimeNs !== written.mtimeNs) return undefined;
  return { dev: final.dev, ino: final.ino, size: final.size, mtimeNs: final.mtimeNs, ctimeNs: final.ctimeNs };
}
