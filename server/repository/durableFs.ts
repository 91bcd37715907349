// Small durability helpers for the file adapter: fsync a directory after a link/rename/unlink, and
// remove a file ignoring "already gone". Kept here so the repository owns its crash-safety story.
import fs from 'node:fs/promises';

export async function fsyncDir(dir: string): Promise<void> {
  let handle: fs.FileHandle | undefined;
  try {
    handle = await fs.open(dir, 'r');
    await handle.sync();
  } catch (err) {
    // Some file systems refuse fsync on a directory (EINVAL); the rename/link itself is still atomic.
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
  } finally {
    await handle?.close();
  }
}

export async function removeIfPresent(file: string): Promise<void> {
  try {
    await fs.unlink(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}
