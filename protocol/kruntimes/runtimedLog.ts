// The lines of a Runtime Pod's log as kruntimes' runtimed writes them (one JSON object per
// line, no timestamp inside: the container runtime adds it), and the Kubernetes pod-log query
// (`tailLines`, `sinceTime`, `sinceSeconds`, `timestamps`, `follow`) a caller reads them with.
// Upstream (kruntimes/kruntimes internal/runtimed/execution_logs.go and proxy_session.go
// `emitSessionOperationLog`): after each session mutation, the command's stdout and stderr
// lines (`stream: "stdout" | "stderr"`), then one `stream: "audit"` line
// `message: "session operation completed"`; reads and listings are not logged. Go's
// `omitempty` applies: `assigned_pod_uid`, `status_code` (errors only), `exit_code` (only when a
// command answered), `timed_out` (only when true) and `duration_milliseconds` (only when > 0)
// may be absent. The audit line never carries command text, stdin or file contents.
import { z } from 'zod';

// Schemas are wrapped in z.lazy, built on first parse (issue 25: zod 4 binds every method to every schema
// instance, a cost at start for the CLI and the daemon); RunLogQueryFields stays eager, callers extend it.

export const SESSION_OPERATION_COMPLETED = 'session operation completed';

export const AuditOperationSchema = z.lazy(() =>
  z.enum(['command', 'write_file', 'create_directory', 'delete_file', 'rename_file', 'unknown']),
);
export type AuditOperation = z.infer<typeof AuditOperationSchema>;

export const AuditOutcomeSchema = z.lazy(() => z.enum(['succeeded', 'failed', 'cancelled', 'timed_out']));
export type AuditOutcome = z.infer<typeof AuditOutcomeSchema>;

export const RuntimedLogStreamSchema = z.lazy(() => z.enum(['stdout', 'stderr', 'audit']));

/** One runtimed log line (looseObject: runtimed's other lines, e.g. function invocations, carry more). */
function runtimedLogLineObject() {
  return z.looseObject({
    run_uid: z.string(),
    assigned_pod_uid: z.string().optional(),
    run_name: z.string(),
    namespace: z.string(),
    runtime: z.string(),
    pod: z.string(),
    stream: z.string(),
    message: z.string(),
    operation: z.string().optional(),
    outcome: z.string().optional(),
    status_code: z.string().optional(),
    exit_code: z.number().int().optional(),
    timed_out: z.boolean().optional(),
    duration_milliseconds: z.number().int().optional(),
  });
}
export const RuntimedLogLineSchema = z.lazy(runtimedLogLineObject);
export type RuntimedLogLine = z.infer<typeof RuntimedLogLineSchema>;

/** An audit line, narrowed: what the Operations view and the CLI show. */
export const SessionAuditLineSchema = z.lazy(() =>
  runtimedLogLineObject().extend({
    stream: z.literal('audit'),
    message: z.literal(SESSION_OPERATION_COMPLETED),
    operation: AuditOperationSchema,
    outcome: AuditOutcomeSchema,
  }),
);
export type SessionAuditLine = z.infer<typeof SessionAuditLineSchema>;

/** `<RFC3339Nano> <content>`, as `kubectl logs --timestamps` prints a line. */
export function splitTimestamped(line: string): { timestamp: string; content: string } | undefined {
  const i = line.indexOf(' ');
  if (i <= 0) return undefined;
  return { timestamp: line.slice(0, i), content: line.slice(i + 1) };
}

/** The pod-log query's fields (Kubernetes PodLogOptions, the subset that applies to one Run's log). */
export const RunLogQueryFields = z.object({
  /** The last N lines (kubectl logs --tail); applied before `sinceTime`/`sinceSeconds`, as the kubelet does. */
  tailLines: z.number().int().min(0).optional(),
  /** Only lines at or after this RFC 3339 time. */
  sinceTime: z.string().optional(),
  /** Only lines of the last N seconds (> 0); not together with sinceTime. */
  sinceSeconds: z.number().int().min(1).optional(),
  /** Prefix each line with its RFC 3339 time (nine fractional digits). */
  timestamps: z.boolean().optional(),
  /** Keep delivering new lines until the Run ends (or the caller stops). */
  follow: z.boolean().optional(),
});

/** sinceTime and sinceSeconds exclude each other, as in Kubernetes. */
export function sinceExclusive(q: { sinceTime?: string | undefined; sinceSeconds?: number | undefined }): boolean {
  return q.sinceTime === undefined || q.sinceSeconds === undefined;
}
export const SINCE_EXCLUSIVE_MESSAGE = 'at most one of sinceTime or sinceSeconds may be specified';

export const RunLogQuerySchema = z.lazy(() =>
  RunLogQueryFields.refine(sinceExclusive, { message: SINCE_EXCLUSIVE_MESSAGE, path: ['sinceSeconds'] }),
);
export type RunLogQuery = z.infer<typeof RunLogQuerySchema>;

/** The query string of `GET …/runs/{name}/log` for a query (Kubernetes' parameter names). */
export function runLogSearchParams(q: RunLogQuery): URLSearchParams {
  const p = new URLSearchParams();
  if (q.tailLines !== undefined) p.set('tailLines', String(q.tailLines));
  if (q.sinceTime !== undefined) p.set('sinceTime', q.sinceTime);
  if (q.sinceSeconds !== undefined) p.set('sinceSeconds', String(q.sinceSeconds));
  if (q.timestamps) p.set('timestamps', 'true');
  if (q.follow) p.set('follow', 'true');
  return p;
}
