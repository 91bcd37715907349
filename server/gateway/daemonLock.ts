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

export async function acquireDaemonLock(file: string): Promise<LockResult> {
  const me: LockOwner = { pid: process.pid, startTime: processStartTime(process.pid) ?? 'unknown', bootId: bootId() };
  for (let attempt = 0; attempt < 3; attempt++) {
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
    const owner = await readJsonRecord(file, LockSchema).catch(() => undefined);
    if (owner && isSameProcessAlive(owner.pid, owner.startTime, owner.bootId)) return { acquired: false, owner };
    if (!owner) {
      // Being written right now, or damaged: give a writer a moment before calling it stale.
      await new Promise((r) => setTimeout(r, 200));
      const again = await readJsonRecord(file, LockSchema).catch(() => undefined);
      if (again && isSameProcessAlive(again.pid, again.startTime, again.bootId)) return { acquired: false, owner: again };
    }
    await fs.rm(file, { force: true });
  }
  throw new Error(`cannot take the daemon lock ${file}: it keeps changing hands`);
}
