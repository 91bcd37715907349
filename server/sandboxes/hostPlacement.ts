// Using a sandbox whose root is a directory of this machine (the local runtime) directly, instead of one gateway
// call per file (transfer.ts), which for a 100 MB session was most of an activation's overhead: confirming that the
// directory is the root the sandbox's commands see (before anyone reads it in place), and moving a tree in by
// rename, or by a copy when it lives on another file system. Moving in is only for a fresh sandbox that nothing has
// run in yet: the target must not exist, and nothing is written anywhere else.
import { promises as fsp } from 'node:fs';
import path from 'node:path';

/**
 * The sandbox's root on this machine, if `hostDirectory` (what the provider says) is the very directory commands
 * see as their root (`sandboxRoot`, from `pwd` inside the sandbox); otherwise undefined, and callers use the gateway.
 */
export async function confirmedHostRoot(hostDirectory: string | undefined, sandboxRoot: string): Promise<string | undefined> {
  if (hostDirectory === undefined) return undefined;
  const [host, seen] = await Promise.all([fsp.realpath(hostDirectory).catch(() => undefined), fsp.realpath(sandboxRoot).catch(() => undefined)]);
  return host !== undefined && host === seen ? host : undefined;
}

/** Moves the directory `from` to `to` (which must not exist; its parent must). Files keep their modes. */
export async function placeTree(from: string, to: string): Promise<void> {
  // rename(2) would replace an empty directory at `to`; the target is in a fresh sandbox nothing runs in yet.
  if ((await fsp.lstat(to).catch(() => undefined)) !== undefined) throw Object.assign(new Error(`${to} already exists`), { code: 'EEXIST' });
  try {
    await fsp.rename(from, to);
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
  }
  await fsp.cp(from, to, { recursive: true, errorOnExist: true, force: false, verbatimSymlinks: true });
  await fsp.rm(from, { recursive: true, force: true });
}

/** Moves every entry of the directory `from` into the existing directory `into`; none of them may exist there. */
export async function placeEntries(from: string, into: string): Promise<void> {
  for (const name of (await fsp.readdir(from)).sort()) await placeTree(path.join(from, name), path.join(into, name));
}

/** Places a hydrated `state/` and `workspace/` pair under `sessionDir` (created, 0755). */
export async function placeSession(hydrated: string, sessionDir: string): Promise<void> {
  await fsp.mkdir(sessionDir, { mode: 0o755 });
  await fsp.chmod(sessionDir, 0o755);
  for (const part of ['state', 'workspace']) await placeTree(path.join(hydrated, part), path.join(sessionDir, part));
}
