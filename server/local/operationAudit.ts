// What runtimed logs after each session mutation, for the local runtime: the command's stdout
// and stderr lines, then the audit line (protocol/kruntimes/runtimedLog.ts), built exactly as
// upstream's `emitSessionOperationLog` builds them (kruntimes/kruntimes
// internal/runtimed/proxy_session.go, execution_logs.go): field order, Go's `omitempty`, the
// outcome table, lines split on "\n" with empty lines skipped and a trailing "\r" trimmed.
// Nothing of the request goes in: no argv or shell text, no stdin, no env, no path, no file
// contents. The local runtime's own outcomes map as follows:
//   a command cancelled by id (`cancelled: true`)  → cancelled (a local extension; no status_code)
//   its per-command timeout (`timedOut: true`)      → timed_out, exit_code −1
//   the operation deadline (DeadlineExceeded)       → timed_out, status_code "DeadlineExceeded"
//   the caller went away / the session closed       → cancelled, status_code "Canceled"
//   a command lost after SIGKILL (CommandLost)      → failed, status_code "Internal" — never
//                                                     cancelled, as something may still run
//   any other refusal                               → failed, status_code = its gRPC code name
import type { ExecuteResponse, OperationKind } from '../../protocol/kruntimes/gateway';
import { GrpcCode, type GrpcCodeName } from '../../protocol/kruntimes/gateway';
import { SESSION_OPERATION_COMPLETED, type AuditOperation, type AuditOutcome } from '../../protocol/kruntimes/runtimedLog';
import { SessionError } from './sessionError';

/** Who the lines are about: the Run and its assignment (the local runtime's stand-in for the Pod). */
export interface RunLogIdentity {
  runUid: string;
  assignedPodUid?: string;
  runName: string;
  namespace: string;
  runtime: string;
  pod: string;
}

/** One finished mutation, as LocalSession reports it. */
export interface CompletedOperation {
  kind: OperationKind | undefined;
  response?: ExecuteResponse;
  error?: unknown;
  durationMs: number;
  /** The command's output (also when it was streamed to the caller); bounded by the runtime's output cap. */
  stdout?: Buffer;
  stderr?: Buffer;
}

const OPERATION_NAMES: Record<OperationKind, AuditOperation> = {
  command: 'command',
  writeFile: 'write_file',
  createDirectory: 'create_directory',
  deleteFile: 'delete_file',
  renameFile: 'rename_file',
};

export function auditOperationName(kind: OperationKind | undefined): AuditOperation {
  return kind === undefined ? 'unknown' : OPERATION_NAMES[kind];
}

function grpcName(err: unknown): GrpcCodeName {
  return err instanceof SessionError ? err.grpc : 'Unknown';
}

/** runtimed's `sessionOperationOutcome`, plus the local cancel-by-id extension. */
export function operationOutcome(response: ExecuteResponse | undefined, error: unknown): { outcome: AuditOutcome; statusCode?: string } {
  if (error !== undefined) {
    const code = grpcName(error);
    if (GrpcCode[code] === GrpcCode.Canceled) return { outcome: 'cancelled', statusCode: code };
    if (GrpcCode[code] === GrpcCode.DeadlineExceeded) return { outcome: 'timed_out', statusCode: code };
    return { outcome: 'failed', statusCode: code };
  }
  const command = response?.command;
  if (command) {
    if (command.cancelled === true) return { outcome: 'cancelled' };
    if (command.timedOut === true) return { outcome: 'timed_out' };
    if (command.exitCode !== 0) return { outcome: 'failed' };
  }
  return { outcome: 'succeeded' };
}

/** The JSON lines, in the order runtimed writes them: stdout lines, stderr lines, the audit line. */
export function operationLogLines(id: RunLogIdentity, op: CompletedOperation): string[] {
  const { outcome, statusCode } = operationOutcome(op.response, op.error);
  const command = op.error === undefined ? op.response?.command : undefined;
  const duration = Math.max(0, Math.floor(op.durationMs));
  const line = (stream: string, message: string): string =>
    JSON.stringify({
      run_uid: id.runUid,
      ...(id.assignedPodUid ? { assigned_pod_uid: id.assignedPodUid } : {}),
      run_name: id.runName,
      namespace: id.namespace,
      runtime: id.runtime,
      pod: id.pod,
      stream,
      message,
      operation: auditOperationName(op.kind),
      outcome,
      ...(statusCode ? { status_code: statusCode } : {}),
      ...(command ? { exit_code: command.exitCode } : {}),
      ...(command?.timedOut === true ? { timed_out: true } : {}),
      ...(duration > 0 ? { duration_milliseconds: duration } : {}),
    });
  const lines: string[] = [];
  if (command) {
    for (const [stream, data] of [['stdout', op.stdout], ['stderr', op.stderr]] as const) {
      if (!data || data.length === 0) continue;
      for (const message of data.toString('utf8').replace(/\n$/, '').split('\n')) {
        if (message !== '') lines.push(line(stream, message.replace(/\r$/, '')));
      }
    }
  }
  lines.push(line('audit', SESSION_OPERATION_COMPLETED));
  return lines;
}
