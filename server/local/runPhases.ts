// What each phase of a local Run writes into its status — phase, message, times, conditions, in kruntimes' words —
// kept apart from when it happens (runLifecycle.ts). A Run that already ended (Immediate or a timeout got there
// first) is left as it is.
import { randomUUID } from 'node:crypto';
import { isTerminalPhase, RunMessages, type Run, type RunPhase, type RunReason } from '../../protocol/kruntimes/run';
import type { RunEntry } from './runRecords';
import { rfc3339, setCondition } from './runStatus';

/** Pending → Scheduled: assigned to the backend's (local) runtime pod. */
export function markScheduled(r: Run, backendName: string): void {
  if (isTerminalPhase(r.status?.phase)) return;
  const st = (r.status ??= {});
  st.phase = 'Scheduled';
  st.assignedPod = `local-${backendName}`;
  st.assignedPodUID = randomUUID();
  st.message = `assigned to runtime pod local-${backendName}`;
  setCondition(r, 'Scheduled', 'True', 'Assigned', `assigned to runtime pod local-${backendName}`);
}

/** Scheduled → Running: the start time (the total timeout's clock) is set. */
export function markRunning(r: Run, entry: RunEntry): void {
  if (isTerminalPhase(r.status?.phase)) return;
  const st = (r.status ??= {});
  st.phase = 'Running';
  entry.startedMs = Date.now();
  st.startTime = rfc3339(new Date(entry.startedMs));
  st.message = 'claimed by runtimed';
  setCondition(r, 'Running', 'True', 'Claimed', 'claimed by runtimed');
}

/** Running → Ready: the session's endpoint is published and the lease clock starts. */
export function markReady(r: Run, entry: RunEntry, endpointUrl: string): void {
  if (isTerminalPhase(r.status?.phase)) return;
  const st = (r.status ??= {});
  st.phase = 'Ready';
  st.message = RunMessages.registered;
  st.endpoint = { protocol: 'HTTP', url: endpointUrl };
  setCondition(r, 'Ready', 'True', 'SessionRegistered', 'session is ready for Console operations');
  if (entry.session) entry.session.leaseRenewedMs = Date.now(); // the lease clock starts at Ready
}

/** Ready → Finalizing (Drain): no new operations. */
export function markFinalizing(r: Run): void {
  if (isTerminalPhase(r.status?.phase)) return;
  const st = (r.status ??= {});
  st.phase = 'Finalizing';
  st.message = RunMessages.finalizationRequested;
  setCondition(r, 'Ready', 'False', 'Finalizing', 'session is no longer accepting new operations');
}

/** A terminal phase, once (the first one wins), with its completion time and reason. */
export function markTerminal(run: Run, entry: RunEntry, phase: RunPhase, reason: RunReason, message: string): void {
  if (isTerminalPhase(run.status?.phase)) return;
  const st = (run.status ??= {});
  st.phase = phase;
  st.message = message;
  entry.finishedMs = Date.now();
  st.completionTime = rfc3339(new Date(entry.finishedMs));
  if (!st.attempt) st.attempt = 1;
  setCondition(run, 'Running', 'False', reason, message);
  setCondition(run, 'Completed', 'False', reason, message);
  if (st.conditions?.some((c) => c.type === 'Ready')) setCondition(run, 'Ready', 'False', reason, message);
}
