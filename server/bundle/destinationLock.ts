// The per-destination lock that hydrate and cleanup hold (spec §8 step 1). Maka locks the file with a native
// add-on (flock); we may not ship native add-ons, so the lock here is the lock file's *existence*: created
// O_EXCL|O_NOFOLLOW (0600) holding the owner's pid, process start time and boot id, removed on release. A lock
// whose owner is dead (no such pid, a different start time, or another boot) is broken — under a second O_EXCL
// "breaker" file so two waiters never both break it — so a SIGKILLed owner does not keep it forever.
// An in-process promise gate per lock path serializes callers in this process before they touch the file.
import { createHash, randomUUID } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { SessionBundleOperation } from '../../protocol/bundle';
import { SessionBundleError } from './errors';
import { currentProcessIdentity, ownerLiveness } from '../platform/processIdentity';
import { errnoOf, lstatOrUndefined, sameInode, writeFully } from './fsx';

const POLL_MS = 25;
const MAX_POLL_MS = 200;
const STALE_BREAKER_MS = 30_000;
const UNREADABLE_OWNER_GRACE_MS = 10_000;
const MAX_OWNER_BYTES = 1024;

interface LockOwner {
  pid: number;
  startTime: string | null;
  bootId: string | null;
}

const gates = new Map<string, Promise<void>>();

export function destinationLockPath(destinationRoot: string): string {
  const name = basename(destinationRoot);
  const hash = createHash('sha256').update(name.normalize('NFC').toLocaleLowerCase('en-US'), 'utf8').digest('hex');
  return join(dirname(destinationRoot), `.maka-session-bundle-publish-${hash}.lock`);
}

/** Whether the recorded owner may still hold the lock (only a provably dead owner is broken). */
function ownerIsAlive(owner: LockOwner): boolean {
  return (
    ownerLiveness({ host: hostname(), bootId: owner.bootId ?? 'unknown', pid: owner.pid, startTime: owner.startTime ?? 'unknown' }) !== 'dead'
  );
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return undefined;
    const { pid, startTime, bootId: boot } = value as Record<string, unknown>;
    if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return undefined;
    return { pid, startTime: typeof startTime === 'string' ? startTime : null, bootId: typeof boot === 'string' ? boot : null };
  } catch {
    return undefined;
  }
}

async function tryCreate(lockPath: string): Promise<fsp.FileHandle | undefined> {
  try {
    return await fsp.open(lockPath, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return undefined;
    throw err;
  }
}

/** True when the lock at lockPath is held by a dead owner (or is unreadable for too long). */
async function isStale(lockPath: string): Promise<{ stale: boolean; ino?: bigint; dev?: bigint }> {
  const st = await lstatOrUndefined(lockPath);
  if (st === undefined) return { stale: false };
  if (!st.isFile()) throw new SessionBundleError('io_failure', 'the destination lock is not a regular file');
  let owner: LockOwner | undefined;
  if (st.size <= BigInt(MAX_OWNER_BYTES)) {
    const text = await fsp.readFile(lockPath, 'utf8').catch(() => '');
    owner = parseOwner(text);
  }
  const stale = owner === undefined ? Date.now() - Number(st.mtimeMs) > UNREADABLE_OWNER_GRACE_MS : !ownerIsAlive(owner);
  return { stale, ino: st.ino, dev: st.dev };
}

async function breakStaleLock(lockPath: string, seen: { ino?: bigint; dev?: bigint }): Promise<void> {
  const breakerPath = `${lockPath}.break`;
  const breaker = await tryCreate(breakerPath);
  if (breaker === undefined) {
    const st = await lstatOrUndefined(breakerPath);
    if (st !== undefined && Date.now() - Number(st.mtimeMs) > STALE_BREAKER_MS) await fsp.unlink(breakerPath).catch(() => undefined);
    return;
  }
  try {
    const now = await lstatOrUndefined(lockPath);
    if (now !== undefined && seen.ino !== undefined && seen.dev !== undefined && sameInode(now, { ino: seen.ino, dev: seen.dev })) {
      await fsp.unlink(lockPath);
    }
  } finally {
    await breaker.close();
    await fsp.unlink(breakerPath).catch(() => undefined);
  }
}

async function acquire(lockPath: string): Promise<{ ino: bigint; dev: bigint }> {
  let delay = POLL_MS;
  while (true) {
    const handle = await tryCreate(lockPath);
    if (handle !== undefined) {
      try {
        const me = currentProcessIdentity();
        const owner = { schemaVersion: 1, token: randomUUID(), pid: me.pid, startTime: me.startTime, bootId: me.bootId };
        await writeFully(handle, Buffer.from(`${JSON.stringify(owner)}\n`));
        await handle.sync();
        const st = await handle.stat({ bigint: true });
        const named = await lstatOrUndefined(lockPath);
        if (named === undefined || !sameInode(named, st)) throw new SessionBundleError('io_failure', 'the destination lock file changed identity while it was taken');
        return { ino: st.ino, dev: st.dev };
      } finally {
        await handle.close();
      }
    }
    const seen = await isStale(lockPath);
    if (seen.stale) {
      await breakStaleLock(lockPath, seen);
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(MAX_POLL_MS, delay * 2);
  }
}

async function release(lockPath: string, held: { ino: bigint; dev: bigint }): Promise<void> {
  const st = await lstatOrUndefined(lockPath);
  if (st === undefined || !sameInode(st, held)) throw new SessionBundleError('io_failure', 'the destination lock file changed identity while it was held');
  await fsp.unlink(lockPath);
}

/** Run `work` while holding the destination lock of `destinationRoot` (absolute). */
export async function withDestinationLock<T>(destinationRoot: string, operation: SessionBundleOperation, work: () => Promise<T>): Promise<T> {
  const lockPath = destinationLockPath(destinationRoot);
  const previous = gates.get(lockPath) ?? Promise.resolve();
  let open!: () => void;
  const mine = new Promise<void>((resolve) => (open = resolve));
  const chained = previous.then(() => mine);
  gates.set(lockPath, chained);
  await previous;
  try {
    let held: { ino: bigint; dev: bigint };
    try {
      held = await acquire(lockPath);
    } catch (err) {
      if (err instanceof SessionBundleError) throw err;
      throw new SessionBundleError('io_failure', `could not take the destination lock (${errnoOf(err) ?? 'error'})`, { operation });
    }
    let result: T;
    try {
      result = await work();
    } catch (err) {
      await release(lockPath, held).catch(() => undefined);
      throw err;
    }
    await release(lockPath, held);
    return result;
  } finally {
    open();
    if (gates.get(lockPath) === chained) gates.delete(lockPath);
  }
}
