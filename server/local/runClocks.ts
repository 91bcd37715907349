// The clocks of a local Run, as pure checks the lifecycle's tick asks (runLifecycle.ts acts on them): the total
// timeout, the idle and lease timeouts of a Ready session, and ttlSecondsAfterFinished of a finished Run.
import { formatGoDuration, parseGoDuration, RunMessages } from '../../protocol/kruntimes/run';
import type { RunEntry } from './runRecords';

/** Whether a finished Run's ttlSecondsAfterFinished has passed (false when it has none or no completion time). */
export function ttlElapsed(entry: RunEntry, now: number): boolean {
  const run = entry.run;
  const ttl = run.spec.ttlSecondsAfterFinished;
  if (ttl === undefined || !run.status?.completionTime) return false;
  const finished = entry.finishedMs ?? Date.parse(run.status.completionTime);
  return now >= finished + ttl * 1000;
}

/** Why a live Run times out now (its message), or undefined. */
export function expiryOf(entry: RunEntry, now: number): string | undefined {
  const run = entry.run;
  const phase = run.status?.phase;
  const timeoutMs = run.spec.timeout !== undefined ? parseGoDuration(run.spec.timeout) : undefined;
  const started = entry.startedMs ?? (run.status?.startTime ? Date.parse(run.status.startTime) : undefined);
  if (timeoutMs !== undefined && timeoutMs > 0 && started !== undefined && now >= started + timeoutMs) return RunMessages.timeoutAfter(formatGoDuration(timeoutMs));
  const idle = run.spec.mode.session?.idleTimeoutSeconds;
  const session = entry.session;
  if (idle !== undefined && phase === 'Ready' && session && !session.busy && !entry.terminatingMode) {
    if (now - Number(session.lastActivityNs / 1_000_000n) >= idle * 1000) return RunMessages.idleTimeout;
  }
  // The lease runs on connection heartbeats alone: a busy session expires too once they stop.
  const lease = run.spec.mode.session?.leaseTimeoutSeconds;
  if (lease !== undefined && phase === 'Ready' && session && !entry.terminatingMode && now - session.leaseRenewedMs >= lease * 1000) return RunMessages.leaseExpired;
  return undefined;
}
