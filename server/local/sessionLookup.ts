// How the access API finds the session behind `/v1/namespaces/{ns}/runtimes/{rt}/sessions/{uid}`:
// the gateway's `sessionRun` lookup with upstream's refusals (404 `Session Run not found`, 409
// `Session Run is <Phase>, not Ready`), and the cancel extension's lookup, which also reaches
// Runs that are finalizing.
import { GatewayMessages } from '../../protocol/kruntimes/gateway';
import type { Run } from '../../protocol/kruntimes/run';
import type { LocalSession } from './localSession';
import type { RunRecords } from './runRecords';
import { SessionError } from './sessionError';

/** 404 unless a session Run with that uid lives in `namespace` under `runtime`; 409 unless it is Ready with a session. */
export function lookupSession(records: RunRecords, namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } {
  const entry = records.byUid(uid);
  const run = entry?.run;
  if (!entry || !run || run.metadata.namespace !== namespace || run.spec.runtime !== runtime || run.spec.mode.session === undefined) {
    throw new SessionError('NotFound', GatewayMessages.sessionRunNotFound);
  }
  const phase = run.status?.phase ?? '';
  if (phase !== 'Ready' || !run.status?.assignedPodUID || !entry.session) {
    throw new SessionError('FailedPrecondition', GatewayMessages.notReady(phase));
  }
  return { run, session: entry.session };
}

/** A Run's open session by uid, in any phase (undefined when it has none). */
export function sessionByUid(records: RunRecords, namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } | undefined {
  const entry = records.byUid(uid);
  if (!entry?.session || entry.run.metadata.namespace !== namespace || entry.run.spec.runtime !== runtime) return undefined;
  return { run: entry.run, session: entry.session };
}
