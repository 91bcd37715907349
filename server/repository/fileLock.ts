// The file adapter's process-lifetime write lock, without native add-ons. The lock is a file
// created atomically (link of a fully written owner record: token, host, boot id, pid, start
// time). A waiter that finds the owner provably dead breaks the lock — but only after winning an
// exclusive "breaker" file named for that owner's token, and only if the lock still holds that
// token; tokens are never reused, so two waiters can never both break, and a live owner's lock
// is never removed. Within one process, callers are serialized by a promise gate.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { sha256Hex } from './digestMeter';
import { errnoCode, removeIfPresent } from './durableFs';
import { SessionRepositoryError } from './errors';
import { currentProcessIdentity, ownerLiveness, type ProcessIdentity } from '../platform/processIdentity';

const LockRecordSchema = z.strictObject({
  schemaVersion: z.literal(1),
  token: z.string().regex(/^[0-9a-f-]{36}$/),
  host: z.string(),
  bootId: z.string(),
  pid: z.number().int().positive(),
  startTime: z.string(),
  acquiredAt: z.string(),
});
type LockRecord = z.infer<typeof LockRecordSchema>;

/** A breaker whose owner died mid-break is removed after this long (the break itself takes microseconds). */
const STALE_BREAKER_MS = 5_000;

export interface HeldLock {
  release(): Promise<void>;
}

const gates = new Map<string, Promise<void>>();

/** Acquires the lock at `lockPath`, waiting at most `timeoutMs`. */
export async function acquireFileLock(lockPath: string, timeoutMs: number): Promise<HeldLock> {
  // In-process gate: one contender per process at a time; others queue here instead of polling.
  const previous = gates.get(lockPath) ?? Promise.resolve();
  let releaseGate!: () => void;
  const gate = new Promise<void>((resolve) => {
    releaseGate = resolve;
  });
  const chained = previous.then(() => gate);
  gates.set(lockPath, chained);
  const deadline = Date.now() + timeoutMs;
  try {
    await withTimeout(previous, deadline, lockPath);
    await acquireAcrossProcesses(lockPath, deadline);
    return {
      release: async () => {
        try {
          await releaseFileLock(lockPath);
        } finally {
          releaseGate();
          if (gates.get(lockPath) === chained) gates.delete(lockPath);
        }
      },
    };
  } catch (err) {
    releaseGate();
    if (gates.get(lockPath) === chained) gates.delete(lockPath);
    throw err;
  }
}

async function withTimeout(p: Promise<void>, deadline: number, lockPath: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(lockTimeout(lockPath, undefined)), Math.max(0, deadline - Date.now()));
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function acquireAcrossProcesses(lockPath: string, deadline: number): Promise<string> {
  const me: ProcessIdentity = currentProcessIdentity();
  const record: LockRecord = { schemaVersion: 1, token: randomUUID(), ...me, acquiredAt: new Date().toISOString() };
  const tmp = `${lockPath}.${record.token}.owner`;
  await fs.writeFile(tmp, JSON.stringify(record) + '\n', { flag: 'wx', mode: 0o600 });
  try {
    let delay = 1;
    for (;;) {
      try {
        await fs.link(tmp, lockPath);
        return record.token;
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST') throw err;
      }
      const holder = await readHolder(lockPath);
      if (holder !== undefined) {
        const liveness = holder.record ? ownerLiveness(holder.record) : holder.ageMs > STALE_BREAKER_MS ? 'dead' : 'alive';
        if (liveness === 'dead') {
          await breakStaleLock(lockPath, holder.identity, me);
          continue;
        }
        if (Date.now() >= deadline) throw lockTimeout(lockPath, holder.record);
      }
      await sleep(Math.min(delay, Math.max(0, deadline - Date.now())));
      delay = Math.min(delay * 2, 25) + Math.random() * 2;
    }
  } finally {
    await removeIfPresent(tmp);
  }
}

interface Holder {
  /** The owner's token, or a hash of an unreadable lock file's bytes and inode. */
  identity: string;
  record: LockRecord | undefined;
  ageMs: number;
}

async function readHolder(lockPath: string): Promise<Holder | undefined> {
  let text: string;
  let st: import('node:fs').Stats;
  try {
    st = await fs.stat(lockPath);
    text = await fs.readFile(lockPath, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  let record: LockRecord | undefined;
  try {
    const parsed = LockRecordSchema.safeParse(JSON.parse(text));
    record = parsed.success ? parsed.data : undefined;
  } catch {
    record = undefined;
  }
  return { identity: record?.token ?? `x${sha256Hex(`${st.ino}:${text}`).slice(0, 32)}`, record, ageMs: Date.now() - st.mtimeMs };
}

async function breakStaleLock(lockPath: string, identity: string, me: ProcessIdentity): Promise<void> {
  const breaker = `${lockPath}.break-${identity}`;
  try {
    await fs.writeFile(breaker, JSON.stringify(me) + '\n', { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') throw err;
    // Another waiter is breaking this lock; if it died doing so, its breaker goes stale.
    const st = await fs.stat(breaker).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs > STALE_BREAKER_MS) await removeIfPresent(breaker);
    return;
  }
  try {
    const holder = await readHolder(lockPath);
    if (holder?.identity === identity) await removeIfPresent(lockPath);
  } finally {
    await removeIfPresent(breaker);
  }
}

/** Only a provably dead owner's lock is ever broken, so a live holder still owns `lockPath` here. */
async function releaseFileLock(lockPath: string): Promise<void> {
  await removeIfPresent(lockPath);
}

/**
 * Removes what dead waiters left beside the lock (owner records of processes killed while waiting,
 * breakers abandoned mid-break). Call while holding the lock.
 */
export async function removeDeadLockLeftovers(lockPath: string): Promise<void> {
  const dir = path.dirname(lockPath);
  const base = path.basename(lockPath);
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(`${base}.`)) continue;
    const file = path.join(dir, name);
    if (name.endsWith('.owner')) {
      const record = await fs
        .readFile(file, 'utf8')
        .then((text) => LockRecordSchema.safeParse(JSON.parse(text)))
        .catch(() => undefined);
      if (record?.success && ownerLiveness(record.data) === 'dead') await removeIfPresent(file);
    } else if (name.includes('.break-')) {
      const st = await fs.stat(file).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > STALE_BREAKER_MS) await removeIfPresent(file);
    }
  }
}

function lockTimeout(lockPath: string, owner: LockRecord | undefined): SessionRepositoryError {
  const who = owner ? `process ${owner.pid} on ${owner.host} (since ${owner.acquiredAt})` : 'another caller in this process';
  return new SessionRepositoryError(
    'io_failure',
    `timed out waiting for the repository lock ${lockPath}, held by ${who}; if that process no longer exists on that host, delete the lock file`,
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
