// Turns a Run into the summary views show: phase, the reason and message of its latest
// condition, timeouts, termination and artifacts, whether agents created it or may use it, and the session
// revision it was opened from or saved as.
import { isCreatedByAgent, isGrantedToAgents } from '../../protocol/agentAccess';
import type { Run } from '../../protocol/kruntimes/run';
import { sessionRevisionOf } from '../../protocol/sandboxRevision';
import { type ProviderKind, sandboxKey, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';

export function runRef(provider: ProviderKind, context: string, run: Run): SandboxRef {
  return { provider, context, namespace: run.metadata.namespace ?? 'default', name: run.metadata.name ?? '' };
}

export function summarizeRun(provider: ProviderKind, context: string, run: Run): SandboxSummary {
  const ref = runRef(provider, context, run);
  const conditions = run.status?.conditions ?? [];
  const latest = [...conditions].reverse().find((c) => c.reason);
  const s: SandboxSummary = { ref, key: sandboxKey(ref), runtime: run.spec.runtime };
  if (run.metadata.uid) s.uid = run.metadata.uid;
  if (run.status?.phase) s.phase = run.status.phase;
  if (latest?.reason) s.reason = latest.reason;
  if (run.status?.message) s.message = run.status.message;
  if (run.metadata.creationTimestamp) s.createdAt = run.metadata.creationTimestamp;
  if (run.status?.startTime) s.startTime = run.status.startTime;
  if (run.status?.completionTime) s.completionTime = run.status.completionTime;
  const idle = run.spec.mode.session?.idleTimeoutSeconds;
  if (idle !== undefined) s.idleTimeoutSeconds = idle;
  const lease = run.spec.mode.session?.leaseTimeoutSeconds;
  if (lease !== undefined) s.leaseTimeoutSeconds = lease;
  if (run.spec.timeout) s.timeout = run.spec.timeout;
  if (run.spec.termination?.mode) s.terminationMode = run.spec.termination.mode;
  if (run.status?.artifactRefs?.length) s.artifacts = run.status.artifactRefs;
  if (isCreatedByAgent(run.metadata)) s.createdByAgent = true;
  if (isGrantedToAgents(run.metadata)) s.grantedToAgents = true;
  const revision = sessionRevisionOf(run.metadata);
  if (revision) s.sessionRevision = revision;
  return s;
}
