// Commands that died with a previous gateway daemon: found by their exec records (running, owner gone), what is
// left of their process groups killed, and each record marked lost with a message that says what happened —
// reported when a Run is recovered, never dropped.
import { CommandLostError } from './commandLost';
import { ExecRecords, killRecordedGroup, ownerAlive, type ExecRecord } from './execRecord';
import { GROUP_EXIT_BOUND_MS, killGroupAndWait } from './procInfo';

/** Marks running exec records whose daemon is gone as lost, killing what is left of them. */
export async function reapLostCommands(execDir: string, uid: string, log: (line: string) => void): Promise<ExecRecord[]> {
  const records = new ExecRecords(execDir);
  const lost: ExecRecord[] = [];
  for (const rec of await records.list()) {
    if (rec.state !== 'running' || ownerAlive(rec)) continue;
    const killed = killRecordedGroup(rec, 'SIGKILL');
    const pgid = rec.kill?.pgid ?? 0;
    const survivors = killed ? await killGroupAndWait(pgid) : [];
    const what =
      survivors.length > 0
        ? `; ${new CommandLostError(pgid, survivors, GROUP_EXIT_BOUND_MS).message}`
        : killed
          ? '; its remaining processes were killed'
          : rec.remote
            ? '; it is interrupted in the remote sandbox'
            : '';
    if (survivors.length > 0) log(`run ${uid}: operation ${rec.operationId}: CommandLost${what}`);
    const updated: ExecRecord = {
      ...rec,
      state: 'lost',
      outcome: 'lost',
      exitCode: -1,
      message: `the gateway daemon (pid ${rec.owner.pid}) that ran this command exited${what}`,
      endedAt: new Date().toISOString(),
    };
    await records.write(updated);
    lost.push(updated);
  }
  return lost;
}
