// How the sandbox log's lines read in the Operations view and the Sandbox Log channel: runtimed's
// JSON lines (`<RFC3339Nano> <json>` with timestamps) turned into rows and readable text. No VS Code
// API here, so it is unit-tested directly.
import { RuntimedLogLineSchema, type SessionAuditLine, SessionAuditLineSchema, splitTimestamped } from '../../protocol/kruntimes/runtimedLog';

export interface OperationRow {
  /** When runtimed logged it (RFC 3339). */
  time: string;
  audit: SessionAuditLine;
}

/** The audit lines among timestamped log lines (`<RFC3339Nano> <json>`). */
export function auditRows(lines: readonly string[]): OperationRow[] {
  const rows: OperationRow[] = [];
  for (const line of lines) {
    const split = splitTimestamped(line);
    if (!split) continue;
    let json: unknown;
    try {
      json = JSON.parse(split.content);
    } catch {
      continue;
    }
    const audit = SessionAuditLineSchema.safeParse(json);
    if (audit.success) rows.push({ time: split.timestamp, audit: audit.data });
  }
  return rows;
}

/** `failed · exit 2 · 41 ms` */
export function operationSummary(audit: SessionAuditLine): string {
  const parts: string[] = [audit.outcome.replace('_', ' ')];
  if (audit.exit_code !== undefined) parts.push(`exit ${audit.exit_code}`);
  if (audit.status_code !== undefined) parts.push(audit.status_code);
  parts.push(`${audit.duration_milliseconds ?? 0} ms`);
  return parts.join(' · ');
}

/** One log line as a person reads it: `<time> [stdout] hello`, `<time> [audit] command failed · exit 2 · 41 ms`. */
export function readableLogLine(line: string): string {
  const split = splitTimestamped(line);
  if (!split) return line;
  let json: unknown;
  try {
    json = JSON.parse(split.content);
  } catch {
    return line;
  }
  const audit = SessionAuditLineSchema.safeParse(json);
  if (audit.success) return `${split.timestamp} [audit] ${audit.data.operation} ${operationSummary(audit.data)}`;
  const entry = RuntimedLogLineSchema.safeParse(json);
  return entry.success ? `${split.timestamp} [${entry.data.stream}] ${entry.data.message}` : line;
}
