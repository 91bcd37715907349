// One record per command, written when it starts and updated when it ends:
// runs/<uid>/exec/<operationId>.json. It names the owning daemon (pid + start time + boot
// id) and the process group to kill, so another process can cancel the command and a
// restarted daemon can tell which commands died with its predecessor. Ended records are
// kept (bounded) so a late cancel can answer `ended`.
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { readJsonRecord, writeJsonAtomic } from './atomicFile';
import { HAS_PROC, bootId, isSameProcessAlive, processStartTime } from '../platform/processIdentity';
import { processGroupMembers, signalGroup } from './procInfo';
import { byCodeUnits } from '../platform/codeUnitOrder';

// The schemas are built on first parse (z.lazy): zod 4 binds every method to every schema instance, a cost
// at the start of the daemon and the CLI (issue 25).

export const ExecOutcomeSchema = z.lazy(() => z.enum(['succeeded', 'failed', 'timed_out', 'cancelled', 'lost']));
export type ExecOutcome = z.infer<typeof ExecOutcomeSchema>;

export const ExecRecordSchema = z.lazy(() =>
  z.strictObject({
    version: z.literal(1),
    operationId: z.string(),
    runUid: z.string(),
    backend: z.string(),
    /** The first 200 characters of the command, for people reading records. */
    summary: z.string(),
    owner: z.strictObject({ pid: z.number().int(), startTime: z.string(), bootId: z.string() }),
    /** How to kill a host command: signal this process group (the leader's identity guards pid reuse). */
    kill: z.strictObject({ pgid: z.number().int(), leaderStartTime: z.string() }).optional(),
    /** How to stop a command of a remote workspace (an OpenSandbox sandbox): interrupt it by its id there. */
    remote: z.strictObject({ sandboxId: z.string(), commandId: z.string() }).optional(),
    state: z.enum(['running', 'ended', 'lost']),
    outcome: ExecOutcomeSchema.optional(),
    exitCode: z.number().int().optional(),
    message: z.string().optional(),
    startedAt: z.string(),
    endedAt: z.string().optional(),
  }),
);
export type ExecRecord = z.infer<typeof ExecRecordSchema>;

export const MAX_ENDED_RECORDS = 200;
const OPERATION_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function isValidOperationId(id: string): boolean {
  return OPERATION_ID.test(id) && id !== '.' && id !== '..';
}

export function selfIdentity(): ExecRecord['owner'] {
  return { pid: process.pid, startTime: processStartTime(process.pid) ?? 'unknown', bootId: bootId() };
}

export class ExecRecords {
  private writesSincePrune = 0;
  constructor(private readonly dir: string) {}

  file(operationId: string): string {
    return path.join(this.dir, `${operationId}.json`);
  }

  /** The `running` record is written before the command may run (see runCommand's onStarted), the ended one after. */
  async write(record: ExecRecord): Promise<void> {
    // Not fsynced: these describe live processes, which a machine crash ends anyway. The folder is made only when
    // missing (the run's first command): a mkdir per write was 5% of the daemon's main thread under many executes.
    const file = this.file(record.operationId);
    try {
      await writeJsonAtomic(file, record, 0o600, false);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
      await writeJsonAtomic(file, record, 0o600, false);
    }
    if (record.state !== 'running' && ++this.writesSincePrune >= 50) {
      this.writesSincePrune = 0;
      await this.prune();
    }
  }

  read(operationId: string): Promise<ExecRecord | undefined> {
    if (!isValidOperationId(operationId)) return Promise.resolve(undefined);
    return readJsonRecord(this.file(operationId), ExecRecordSchema);
  }

  async list(): Promise<ExecRecord[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch {
      return [];
    }
    const records: ExecRecord[] = [];
    for (const name of names) {
      if (!name.endsWith('.json') || name.startsWith('.')) continue;
      const rec = await readJsonRecord(path.join(this.dir, name), ExecRecordSchema).catch(() => undefined);
      if (rec) records.push(rec);
    }
    return records.sort((a, b) => byCodeUnits(a.startedAt, b.startedAt));
  }

  /** Keeps the newest MAX_ENDED_RECORDS ended records. */
  async prune(): Promise<void> {
    const ended = (await this.list()).filter((r) => r.state !== 'running');
    for (const rec of ended.slice(0, Math.max(0, ended.length - MAX_ENDED_RECORDS))) {
      await fs.rm(this.file(rec.operationId), { force: true });
    }
  }
}

/** True when the daemon that owns the record is still alive. */
export function ownerAlive(rec: ExecRecord): boolean {
  return isSameProcessAlive(rec.owner.pid, rec.owner.startTime, rec.owner.bootId);
}

/**
 * Kills what is left of a recorded command's process group, from any process. Only on the
 * same boot, and only while the group still has a member no older than the command.
 */
export function killRecordedGroup(rec: ExecRecord, signal: NodeJS.Signals): boolean {
  if (!rec.kill) return false; // a remote command: its workspace interrupts it
  if (rec.owner.bootId !== bootId()) return false;
  if (!HAS_PROC) return signalGroup(rec.kill.pgid, signal); // no way to inspect the group: signal it
  const members = processGroupMembers(rec.kill.pgid);
  if (members.length === 0) return false;
  const leaderStart = Number(rec.kill.leaderStartTime);
  const genuine = members.some((pid) => Number(processStartTime(pid) ?? '0') >= leaderStart);
  if (!genuine) return false;
  return signalGroup(rec.kill.pgid, signal);
}
