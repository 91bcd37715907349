// One daemon per user: `<state>/gateway.lock` is created exclusively by the daemon that
// serves and names it (pid + start time + boot id). A lock whose owner is gone is stale and
// is taken over; a live owner means "another daemon is already here".
import fs from 'node:fs/promises';
import { z } from 'zod';
import { readJsonRecord } from '../local/atomicFile';
import { bootId, isSameProcessAlive, processStartTime } from '../platform/processIdentity';

const LockSchema = z.strictObject({ pid: z.number().int(), startTime: z.string(), bootId: z.string() });
export type LockOwner = z.infer<typeof LockSchema>;

export type LockResult = { acquired: true; release: () => Promise<void> } | { acquired: false; owner: LockOwner };

const sameOwner = (a: LockOwner | undefined, b: LockOwner | undefined): boolean =>
  a === undefined || b === undefined ? a === b : a.pid === b.pid && a.startTime === b.startTime && a.bootId === b.bootId;

/** A breaker whose creator died (it holds it for milliseconds) is abandoned after this long. */
const ABANDONED_BREAKER_MS = 10_000;

/**
 * Removes a stale lock, but only under `<lock>.break` (created exclusively) and only if the lock
 * still names the same dead owner: two starters that both saw the stale lock can then never
 * remove each other's fresh one (which would leave two daemons for one state directory).
 */
export async function breakStaleLock(file: string, stale: LockOwner | undefined): Promise<void> {
  const breaker = `${file}.break`;
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(breaker, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const st = await fs.stat(breaker).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs > ABANDONED_BREAKER_MS) await fs.rm(breaker, { force: true });
    await new Promise((r) => setTimeout(r, 50));
    return;
  }
  try {
    await handle.close();
    const current = await readJsonRecord(file, LockSchema).catch(() => undefined);
    if (sameOwner(current, stale)) await fs.rm(file, { force: true });
  } finally {
    await fs.rm(breaker, { force: true });
  }
}

export async function acquireDaemonLock(file: string): Promise<LockResult> {
  const me: LockOwner = { pid: process.pid, startTime: processStartTime(process.pid) ?? 'unknown', bootId: bootId() };
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      const handle = await fs.open(file, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(me) + '\n');
        await handle.sync();
      } finally {
        await handle.close();
      }
      return {
        acquired: true,
        release: async () => {
          const owner = await readJsonRecord(file, LockSchema).catch(() => undefined);
          if (owner?.pid === me.pid && owner.startTime === me.startTime) await fs.rm(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let owner = await readJsonRecord(file, LockSchema).catch(() => undefined);
    if (owner && isSameProcessAlive(owner.pid, owner.startTime, owner.bootId)) return { acquired: false, owner };
    if (!owner) {
      // Being written right now, or damaged: give a writer a moment before calling it stale.
      await new Promise((r) => setTimeout(r, 200));
      owner = await readJsonRecord(file, LockSchema).catch(() => undefined);
      if (owner && isSameProcessAlive(owner.pid, owner.startTime, owner.bootId)) return { acquired: false, owner };
    }
    await breakStaleLock(file, owner);
  }
  throw new Error(`cannot take the daemon lock ${file}: it keeps changing hands`);
}
