// The mutations this window sends to each sandbox (commands and file changes, from every part of
// the window: file system, terminals, tasks, search), so that its log's audit lines can be told
// apart from other clients' (an agent over MCP, the CLI, another window). runtimed's audit line
// holds no operation id and no command text (upstream keeps them out on purpose): only the kind
// of operation and when it was logged. A sandbox runs its mutations one at a time and logs each as
// it completes, so an audit line of this window's operation is logged inside that operation's
// [sent, answered] (with slack for the log's clock); each recorded operation claims at most one
// line. If another client's line claims one of ours by mistake (it ran while ours waited in the
// queue), our own line then finds nothing to claim and counts as foreign: the changes are picked
// up one line later, never lost. Bounded: the newest MAX_PER_SANDBOX per sandbox, for at most
// KEEP_MS after they ended. No VS Code API here, so it is unit-testable.
import type { AuditOperation } from '../../protocol/kruntimes/runtimedLog';
import { type ExecuteResponse, operationKind, type OperationKind, type SessionOperation, type StreamEvent } from '../../protocol/kruntimes/gateway';
import { GatewayClient, type GatewayClientOptions } from '../../protocol/kruntimes/gatewayClient';

/** How far the log's clock and this window's may disagree. */
export const CLOCK_SLACK_MS = 2000;
/** How long after it ended an operation still claims its line (the log may be read late). */
export const KEEP_MS = 60_000;
export const MAX_PER_SANDBOX = 1024;

const AUDIT_NAMES: Record<OperationKind, AuditOperation> = {
  command: 'command',
  writeFile: 'write_file',
  createDirectory: 'create_directory',
  deleteFile: 'delete_file',
  renameFile: 'rename_file',
};

interface OwnOperation {
  kind: AuditOperation;
  startedAt: number;
  endedAt?: number;
}

export class OwnOperations {
  private readonly bySandbox = new Map<string, OwnOperation[]>();

  /** Records an operation sent now; call the result when it was answered (or failed). */
  begin(sandboxKey: string, kind: AuditOperation, now = Date.now()): (endedAt?: number) => void {
    let ops = this.bySandbox.get(sandboxKey);
    if (!ops) this.bySandbox.set(sandboxKey, (ops = []));
    const op: OwnOperation = { kind, startedAt: now };
    ops.push(op);
    this.prune(sandboxKey, now);
    return (end = Date.now()) => {
      op.endedAt ??= end;
    };
  }

  /**
   * Whether the audit line of a `kind` operation of `sandboxKey`, logged at `loggedAt` (ms), is
   * one of this window's; if so, that operation is used up.
   */
  claim(sandboxKey: string, kind: AuditOperation, loggedAt: number, now = Date.now()): boolean {
    this.prune(sandboxKey, now);
    const ops = this.bySandbox.get(sandboxKey);
    if (!ops || kind === 'unknown') return false;
    // The oldest candidate first: the sandbox completes them in the order it accepted them.
    const i = ops.findIndex(
      (op) => op.kind === kind && loggedAt >= op.startedAt - CLOCK_SLACK_MS && (op.endedAt === undefined || loggedAt <= op.endedAt + CLOCK_SLACK_MS),
    );
    if (i < 0) return false;
    ops.splice(i, 1);
    if (ops.length === 0) this.bySandbox.delete(sandboxKey);
    return true;
  }

  /** How many operations are recorded for a sandbox (for tests). */
  size(sandboxKey: string): number {
    return this.bySandbox.get(sandboxKey)?.length ?? 0;
  }

  private prune(sandboxKey: string, now: number): void {
    const ops = this.bySandbox.get(sandboxKey);
    if (!ops) return;
    const kept = ops.filter((op) => op.endedAt === undefined || now - op.endedAt <= KEEP_MS);
    if (kept.length > MAX_PER_SANDBOX) kept.splice(0, kept.length - MAX_PER_SANDBOX);
    if (kept.length === 0) this.bySandbox.delete(sandboxKey);
    else if (kept.length !== ops.length) this.bySandbox.set(sandboxKey, kept);
  }
}

/** The audit name of an operation body ('unknown' when it is not exactly one operation). */
export function auditKindOf(operation: SessionOperation): AuditOperation {
  const kind = operationKind(operation);
  return kind === undefined ? 'unknown' : AUDIT_NAMES[kind];
}

/**
 * The window's gateway client of one sandbox: every mutation it sends (all of them go through
 * `execute` or `stream`, on either era) is recorded in `own` while it runs.
 */
export class OwnOperationsClient extends GatewayClient {
  constructor(
    options: GatewayClientOptions,
    private readonly sandboxKey: string,
    private readonly own: OwnOperations,
  ) {
    super(options);
  }

  override async execute(operation: SessionOperation, options?: Parameters<GatewayClient['execute']>[1]): Promise<ExecuteResponse> {
    const end = this.own.begin(this.sandboxKey, auditKindOf(operation));
    try {
      return await super.execute(operation, options);
    } finally {
      end();
    }
  }

  override async *stream(operation: SessionOperation, args?: Parameters<GatewayClient['stream']>[1]): AsyncGenerator<StreamEvent> {
    const end = this.own.begin(this.sandboxKey, auditKindOf(operation));
    try {
      yield* super.stream(operation, args);
    } finally {
      end();
    }
  }
}
