// Small pure helpers for Run records: Kubernetes-style conditions (list-map keyed by type,
// lastTransitionTime moving only when the status flips), RFC 3339 second-precision times as
// the API server writes them, deep copies of records handed out, and RFC 7386 merge patch.
import type { Condition, Run } from '../../protocol/kruntimes/run';

export function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export function rfc3339(d = new Date()): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function setCondition(run: Run, type: string, status: Condition['status'], reason: string, message: string): void {
  const status0 = (run.status ??= {});
  const conditions = (status0.conditions ??= []);
  const existing = conditions.find((c) => c.type === type);
  const now = rfc3339();
  if (existing) {
    if (existing.status !== status) existing.lastTransitionTime = now;
    existing.status = status;
    existing.reason = reason;
    existing.message = message;
  } else {
    conditions.push({ type, status, reason, message, lastTransitionTime: now });
  }
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

