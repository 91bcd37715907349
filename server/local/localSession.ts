// One Ready local Run as the Runtime Server sees it: the FIFO mutation queue, commands and
// file mutations through it, reads and listings beside it, the operation deadline, explicit
// cancel by operation id (answered once the command is gone), the activity clock the idle
// timeout reads, the lease clock the lease timeout reads (renewed only by connection
// heartbeats), drain/close, and — after each mutation, whatever its outcome — one report to
// `audit` (runtimed's log lines; reads and listings are not reported).
import path from 'node:path';
import {
  GatewayMessages,
  operationKind,
  type ExecuteResponse,
  type SessionCommand,
  type SessionOperation,
} from '../../protocol/kruntimes/gateway';
import type { Backend } from './backend';
import type { OutputStream } from './execution';
import { CommandLostError } from './commandLost';
import { ExecRecords, killRecordedGroup, ownerAlive, selfIdentity, type ExecOutcome, type ExecRecord } from './execRecord';
import type { ListPage, ReadResult } from './fileOperations';
import type { CompletedOperation } from './operationAudit';
import { OperationAbort, abortKindOf } from './operationAbort';
import { OperationQueue } from './operationQueue';
import { GROUP_EXIT_BOUND_MS, killGroupAndWait } from './procInfo';
import { SessionError, invalidArgument } from './sessionError';
import type { SessionWorkspace } from './sessionWorkspace';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSink } from './workspaceTerminal';

export interface SessionConfig {
  uid: string;
  /** What runs the Run's commands, and what it isolates (the status response advertises it). */
  backend: Backend;
  /** Where the workspace lives: a host directory (hostWorkspace.ts) or a remote sandbox. */
  workspace: SessionWorkspace;
  env: Record<string, string>;
  queueSize: number;
  operationTimeoutMs: number;
  records: ExecRecords;
  /** Called on every admitted or completed mutation/command (the idle timeout's clock). */
  onActivity?: () => void;
  /** Where the session reports what callers may not see (a command lost after SIGKILL). */
  log?: (line: string) => void;
  /** Called once per mutation when it has finished (before its caller gets the answer). */
  audit?: (op: CompletedOperation) => void;
}

export interface ExecuteOptions {
  operationId: string;
  /** The caller's request; aborting it cancels the operation. */
  clientSignal?: AbortSignal;
  /** Called once the operation holds a place in the queue. */
  onAccepted?: (operationId: string) => void;
  /** Streaming: command output goes here and is not returned in the result. */
  onOutput?: (stream: OutputStream, data: Buffer) => void;
}

export type CancelResult = 'cancelled' | 'ended' | 'unknown';

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

export class LocalSession {
  private readonly queue: OperationQueue;
  /** Admitted operations by id: how to stop one, and when it has finished (its error, if any). */
  private readonly active = new Map<string, { controller: AbortController; done: Promise<unknown> }>();
  private accepting = true;
  private closed = false;
  lastActivityNs: bigint = nowNs();
  /**
   * When a connection heartbeat last renewed the session lease (ms since the epoch): the clock
   * `leaseTimeoutSeconds` reads. Commands, mutations and NDJSON streams never move it.
   */
  leaseRenewedMs: number = Date.now();

  constructor(readonly config: SessionConfig) {
    this.queue = new OperationQueue(config.queueSize);
  }

  /** Operations admitted and not yet finished. */
  get busy(): boolean {
    return this.queue.size > 0;
  }

  private touch(): void {
    this.lastActivityNs = nowNs();
    this.config.onActivity?.();
  }

  /** A connection heartbeat (opening `operations:ws`, or a heartbeat frame on it): renews the lease only. */
  renewLease(): void {
    if (this.closed) throw new SessionError('Canceled', GatewayMessages.sessionClosed);
    this.leaseRenewedMs = Date.now();
  }

  /** Runs one operation (a command or a file mutation) through the queue, then reports it to `audit`. */
  async execute(op: SessionOperation, opts: ExecuteOptions): Promise<ExecuteResponse> {
    const audit = this.config.audit;
    if (!audit) return this.executeQueued(op, opts);
    const started = performance.now();
    // Streamed output is teed for the log (already capped by the runtime's output limit).
    const streamed: Record<OutputStream, Buffer[]> = { stdout: [], stderr: [] };
    const sink = opts.onOutput;
    const teed: ExecuteOptions = sink
      ? {
          ...opts,
          onOutput: (stream, data) => {
            streamed[stream].push(Buffer.from(data));
            sink(stream, data);
          },
        }
      : opts;
    const report = (response: ExecuteResponse | undefined, error: unknown): void => {
      const cmd = response?.command;
      audit({
        kind: operationKind(op),
        ...(response ? { response } : {}),
        ...(error !== undefined ? { error } : {}),
        durationMs: performance.now() - started,
        stdout: sink ? Buffer.concat(streamed.stdout) : Buffer.from(cmd?.stdout ?? '', 'base64'),
        stderr: sink ? Buffer.concat(streamed.stderr) : Buffer.from(cmd?.stderr ?? '', 'base64'),
      });
    };
    let response: ExecuteResponse;
    try {
      response = await this.executeQueued(op, teed);
    } catch (err) {
      report(undefined, err);
      throw err;
    }
    report(response, undefined);
    return response;
  }

  private async executeQueued(op: SessionOperation, opts: ExecuteOptions): Promise<ExecuteResponse> {
    const kind = operationKind(op);
    if (kind === undefined) throw invalidArgument(GatewayMessages.exactlyOneOperation);
    if (this.closed) throw new SessionError('Canceled', GatewayMessages.sessionClosed);
    if (!this.accepting) throw new SessionError('FailedPrecondition', GatewayMessages.finalizing);
    if (op.command) this.precheckCommand(op.command);
    if (this.active.has(opts.operationId)) {
      throw new SessionError('AlreadyExists', `operation ID "${opts.operationId}" is already in use`);
    }
    const controller = new AbortController();
    const onClientAbort = (): void => controller.abort(new OperationAbort('client'));
    const deadline = setTimeout(() => controller.abort(new OperationAbort('deadline')), this.config.operationTimeoutMs);
    const cleanup = (): void => {
      clearTimeout(deadline);
      opts.clientSignal?.removeEventListener('abort', onClientAbort);
      this.active.delete(opts.operationId);
    };
    let running: Promise<ExecuteResponse>;
    try {
      running = this.queue.run(() => this.perform(op, opts, controller.signal), controller.signal);
    } catch (err) {
      cleanup();
      throw err;
    }
    this.active.set(opts.operationId, { controller, done: running.then(() => undefined, (err: unknown) => err) });
    if (opts.clientSignal?.aborted) onClientAbort();
    else opts.clientSignal?.addEventListener('abort', onClientAbort, { once: true });
    this.touch();
    opts.onAccepted?.(opts.operationId);
    try {
      return await running;
    } catch (err) {
      const abortKind = abortKindOf(err);
      if (abortKind === 'deadline') throw new SessionError('DeadlineExceeded', GatewayMessages.deadlineExceeded);
      if (abortKind === 'session') throw new SessionError('Canceled', GatewayMessages.sessionClosed);
      if (abortKind !== undefined) throw new SessionError('Canceled', 'context canceled');
      throw err;
    } finally {
      cleanup();
      this.touch();
    }
  }

  private precheckCommand(cmd: SessionCommand): void {
    const hasArgv = cmd.argv !== undefined && cmd.argv.length > 0;
    const hasShell = cmd.shell !== undefined && cmd.shell !== '';
    if (hasArgv === hasShell) throw invalidArgument(GatewayMessages.exactlyOneArgvOrShell);
    if (cmd.isolateNetwork && !this.config.backend.capabilities.isolateNetwork) {
      throw new SessionError(
        'FailedPrecondition',
        `backend "${this.config.backend.name}" cannot isolate the network (isolation: ${this.config.backend.capabilities.isolation}); use a Run on the "bubblewrap" backend`,
      );
    }
  }

  private async perform(op: SessionOperation, opts: ExecuteOptions, signal: AbortSignal): Promise<ExecuteResponse> {
    if (signal.aborted) throw signal.reason;
    const ws = this.config.workspace;
    if (op.command) return this.runSessionCommand(op.command, opts, signal);
    if (op.writeFile) {
      const contents = Buffer.from(op.writeFile.contents ?? '', 'base64');
      await ws.writeFile(op.writeFile.path, contents, op.writeFile.createParents ?? false);
    } else if (op.createDirectory) {
      await ws.createDirectory(op.createDirectory.path);
    } else if (op.deleteFile) {
      await ws.deleteFile(op.deleteFile.path, op.deleteFile.recursive ?? false);
    } else if (op.renameFile) {
      await ws.renameFile(op.renameFile.sourcePath, op.renameFile.destinationPath, op.renameFile.overwrite ?? false);
    }
    return {};
  }

  private async runSessionCommand(cmd: SessionCommand, opts: ExecuteOptions, signal: AbortSignal): Promise<ExecuteResponse> {
    const env = { ...this.config.env, ...(cmd.env ?? {}) };
    const records = this.config.records;
    let started: ExecRecord | undefined;
    let startedWrite: Promise<void> | undefined;
    const outcome = await this.config.workspace.runCommand({
      command: cmd,
      operationId: opts.operationId,
      env,
      signal,
      onOutput: opts.onOutput,
      onStarted: (handle, summary) => {
        started = {
          version: 1,
          operationId: opts.operationId,
          runUid: this.config.uid,
          backend: this.config.backend.name,
          summary: summary.slice(0, 200),
          owner: selfIdentity(),
          ...handle,
          state: 'running',
          startedAt: new Date().toISOString(),
        };
        // Before the command may run (it waits at its gate until this settles), so a daemon killed from
        // then on leaves a record that names what to kill. An unwritable state dir must not fail the
        // command; it only loses crash recovery.
        startedWrite = records.write(started).catch(() => undefined);
        return startedWrite;
      },
    }).catch(async (err: unknown) => {
      if (err instanceof CommandLostError) await this.recordLost(started, opts.operationId, err);
      throw err;
    });
    const abortKind = abortKindOf(outcome.abortReason);
    const result: ExecOutcome =
      abortKind !== undefined ? 'cancelled' : outcome.timedOut ? 'timed_out' : outcome.exitCode === 0 ? 'succeeded' : 'failed';
    if (started) {
      await startedWrite; // the ended record replaces the running one, never the other way round
      await records
        .write({ ...started, state: 'ended', outcome: result, exitCode: outcome.exitCode, endedAt: new Date().toISOString() })
        .catch(() => undefined);
    }
    if (abortKind !== undefined && abortKind !== 'cancel') throw outcome.abortReason;
    const command: NonNullable<ExecuteResponse['command']> = { exitCode: outcome.exitCode };
    if (!opts.onOutput) {
      if (outcome.stdout.length > 0) command.stdout = outcome.stdout.toString('base64');
      if (outcome.stderr.length > 0) command.stderr = outcome.stderr.toString('base64');
    }
    if (outcome.timedOut) command.timedOut = true;
    if (abortKind === 'cancel') command.cancelled = true;
    return { command };
  }

  /** A command whose processes outlived SIGKILL: its record says `lost` (never `cancelled`), and the log says why. */
  private async recordLost(started: ExecRecord | undefined, operationId: string, err: CommandLostError): Promise<void> {
    this.config.log?.(`operation ${operationId}: ${err.code}: ${err.message}`);
    if (!started) return;
    await this.config.records
      .write({ ...started, state: 'lost', outcome: 'lost', exitCode: -1, message: err.message, endedAt: new Date().toISOString() })
      .catch(() => undefined);
  }

  read(p: string, maxBytes: number, offset = 0): Promise<ReadResult> {
    return this.config.workspace.read(p, maxBytes, offset);
  }

  list(dir: string, limit: number, pageToken: string): Promise<ListPage> {
    return this.config.workspace.list(dir, limit, pageToken);
  }

  /**
   * Cancels a queued or running operation by id, also one a previous daemon left behind.
   * `cancelled` is answered only once nothing of the command is left; a command whose
   * processes outlive SIGKILL throws CommandLostError (and its record says `lost`).
   */
  async cancel(operationId: string): Promise<CancelResult> {
    const op = this.active.get(operationId);
    if (op) {
      op.controller.abort(new OperationAbort('cancel'));
      const err = await op.done;
      if (err instanceof CommandLostError) throw err;
      return 'cancelled';
    }
    const rec = await this.config.records.read(operationId).catch(() => undefined);
    if (!rec) return 'unknown';
    const orphaned = rec.state === 'running' && !ownerAlive(rec);
    const stuck = rec.state !== 'running' && rec.outcome === 'lost'; // something may still run: try again
    if (!orphaned && !stuck) return 'ended';
    if (rec.remote || !rec.kill) return this.cancelRecordedRemote(rec, orphaned);
    const killed = killRecordedGroup(rec, 'SIGKILL');
    const survivors = killed ? await killGroupAndWait(rec.kill.pgid) : [];
    if (survivors.length > 0) {
      const err = new CommandLostError(rec.kill.pgid, survivors, GROUP_EXIT_BOUND_MS);
      this.config.log?.(`operation ${operationId}: ${err.code}: ${err.message}`);
      await this.config.records.write({ ...rec, state: 'lost', outcome: 'lost', message: err.message, endedAt: new Date().toISOString() });
      throw err;
    }
    if (orphaned || killed) {
      await this.config.records.write({
        ...rec,
        state: 'lost',
        outcome: killed ? 'cancelled' : 'lost',
        message: orphaned ? 'the gateway daemon that ran this command exited' : `${rec.message ?? 'lost'}; a later cancel killed what was left`,
        endedAt: new Date().toISOString(),
      });
    }
    return killed ? 'cancelled' : 'ended';
  }

  /** A remote command a previous daemon left running: interrupted through the workspace that runs it. */
  private async cancelRecordedRemote(rec: ExecRecord, orphaned: boolean): Promise<CancelResult> {
    const interrupted = (await this.config.workspace.interruptRecorded?.(rec)) ?? false;
    if (orphaned || interrupted) {
      await this.config.records.write({
        ...rec,
        state: 'lost',
        outcome: interrupted ? 'cancelled' : 'lost',
        message: orphaned ? 'the gateway daemon that ran this command exited' : `${rec.message ?? 'lost'}; a later cancel interrupted it`,
        endedAt: new Date().toISOString(),
      });
    }
    return interrupted ? 'cancelled' : 'ended';
  }

  /** Drain: refuse new operations (409 `session is finalizing`), let admitted ones finish. */
  async drain(): Promise<void> {
    this.accepting = false;
    await this.queue.whenIdle();
  }

  /**
   * Immediate: refuse everything and cancel what is queued or running; resolves once their
   * processes are gone (bounded by the kill grace plus GROUP_EXIT_BOUND_MS; a command lost
   * past that is logged and recorded `lost`).
   */
  async close(): Promise<void> {
    this.accepting = false;
    this.closed = true;
    for (const { controller } of this.active.values()) controller.abort(new OperationAbort('session'));
    await this.queue.whenIdle();
    await this.config.workspace.close().catch((err: unknown) => this.config.log?.(`closing the workspace: ${(err as Error).message}`));
  }

  /** Whether the workspace has an interactive terminal (the status advertises `capabilities.terminal`). */
  get hasTerminal(): boolean {
    return this.config.workspace.openTerminal !== undefined;
  }

  /**
   * The workspace's interactive terminal (`GET P/pty`, outside the mutation queue: it is one
   * long-lived connection, not an operation). Refused while finalizing or closed, and where the
   * workspace has none; opening it counts as activity, and so does each keystroke (`terminalInput`).
   */
  async openTerminal(o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink): Promise<WorkspaceTerminal> {
    if (this.closed) throw new SessionError('Canceled', GatewayMessages.sessionClosed);
    if (!this.accepting) throw new SessionError('FailedPrecondition', GatewayMessages.finalizing);
    const open = this.config.workspace.openTerminal?.bind(this.config.workspace);
    if (!open) {
      throw new SessionError(
        'FailedPrecondition',
        `this sandbox has no interactive terminal (backend "${this.config.backend.name}" has no PTY here${this.config.backend.remote ? '' : ": a local sandbox's terminal needs util-linux's script on this machine"}); use the line-based Sandbox terminal`,
      );
    }
    this.touch();
    return open({ ...o, env: this.config.env }, sink);
  }

  /** Input typed into an interactive terminal: the sandbox is in use. */
  terminalInput(): void {
    this.touch();
  }

  /** The workspace as a directory of this machine, when it is one (undefined for a remote sandbox). */
  get hostRoot(): string | undefined {
    return this.config.workspace.hostRoot;
  }

  static tmpDirFor(runDir: string): string {
    return path.join(runDir, 'tmp');
  }
}
