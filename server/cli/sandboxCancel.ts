// `sandbox cancel` when the gateway daemon is gone (sandbox.ts loads this only then): the command's exec
// record on disk says which process group runs it, and that group is killed — SIGTERM, then SIGKILL — and
// waited for, so "cancelled" means nothing of the command is left.
import fs from 'node:fs/promises';
import path from 'node:path';
import { RunSchema } from '../../protocol/kruntimes/run';
import { LocalApiError } from '../gateway/localClient';
import { readJsonRecord } from '../local/atomicFile';
import { CommandLostError } from '../local/commandLost';
import { ExecRecords, killRecordedGroup, ownerAlive } from '../local/execRecord';
import { GROUP_EXIT_BOUND_MS, killGroupAndWait } from '../local/procInfo';
import { StateLayout } from '../local/stateRoot';

/** Cancel without a daemon: find the Run's record on disk and kill the recorded process group. */
export async function cancelFromRecord(stateDir: string, ns: string, name: string, operationId: string): Promise<'cancelled' | 'ended' | 'unknown'> {
  const layout = new StateLayout(stateDir);
  const uids = await fs.readdir(layout.runsDir).catch(() => [] as string[]);
  for (const uid of uids) {
    const run = await readJsonRecord(path.join(layout.runsDir, uid, 'run.json'), RunSchema).catch(() => undefined);
    if (!run || run.metadata.namespace !== ns || run.metadata.name !== name) continue;
    const rec = await new ExecRecords(layout.execDir(uid)).read(operationId);
    if (!rec) return 'unknown';
    if (rec.state !== 'running') return 'ended';
    if (!rec.kill) throw new LocalApiError(503, `operation ${operationId} runs in a remote sandbox (${rec.backend}); only the running gateway daemon can interrupt it: start it with \`sandbox-sessions gateway --detach\``);
    if (!killRecordedGroup(rec, 'SIGTERM')) return 'ended';
    await new Promise((r) => setTimeout(r, 2000));
    if (!ownerAlive(rec) && killRecordedGroup(rec, 'SIGKILL')) {
      // Cancelled means nothing of the command is left: answer only once the group is gone.
      const survivors = await killGroupAndWait(rec.kill.pgid, GROUP_EXIT_BOUND_MS);
      if (survivors.length > 0) throw new CommandLostError(rec.kill.pgid, survivors, GROUP_EXIT_BOUND_MS);
    }
    return 'cancelled';
  }
  return 'unknown';
}
