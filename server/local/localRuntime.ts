// The embedded local runtime, as the local gateway's Runs API and access API see it: one object
// that serves local Runs (create, get, list, patch, delete, their command records and runtimed's
// log, a watch through its 'event's) and finds the session behind an access-API path. It only
// wires the parts, each a file with one job: admission (runAdmission.ts: the API's 400/409/422
// rules), the records (runRecords.ts: run.json, atomic writes, events), the lifecycle
// (runLifecycle.ts: phases, timers, Drain, crash recovery), runtimed's log (runLogs.ts) and the
// access-API lookup (sessionLookup.ts).
import { EventEmitter } from 'node:events';
import { isTerminalPhase, type Run, type TerminationMode } from '../../protocol/kruntimes/run';
import { ApiStatusError } from './apiStatusError';
import type { ProbeResult } from './backend';
import type { BackendRegistry } from './backends';
import type { ContainerLog, ContainerLogLimits } from './containerLog';
import { ExecRecords, type ExecRecord } from './execRecord';
import type { LocalSession } from './localSession';
import { admitCreate, admitPatch, checkMergePatch } from './runAdmission';
import { RunLifecycle } from './runLifecycle';
import { RunLogs } from './runLogs';
import { RunRecords, uidOf, type RunEvent } from './runRecords';
import { clone } from './runStatus';
import { filteredDaemonEnv } from './sessionEnv';
import { SessionError } from './sessionError';
import { lookupSession, sessionByUid } from './sessionLookup';
import type { PortEndpoint } from './sessionWorkspace';
import type { StateLayout } from './stateRoot';

export type { RunEvent, RunEventType } from './runRecords';
export { isValidNamespace, SESSION_ONLY_MESSAGE } from './runAdmission';

export interface LocalRuntimeOptions {
  layout: StateLayout;
  backends: BackendRegistry;
  /** `http://127.0.0.1:<port>`; a function because the port is known only after listen. */
  baseUrl: () => string;
  log?: (line: string) => void;
  daemonEnv?: NodeJS.ProcessEnv;
  /** How often timeouts are checked. */
  tickMs?: number;
  /** Size and rotation of each Run's runtimed log. */
  runLogLimits?: ContainerLogLimits;
  /** false: local sandboxes get no interactive terminal (default: where this machine makes ptys). */
  hostTerminals?: boolean | undefined;
}

export interface CreateRunOptions {
  /**
   * The Run's UID instead of a random UUID — for an embedding caller (the cluster simulator)
   * that already assigned one. Lowercase letters, digits and `-`, at most 64; must be unused.
   */
  uid?: string;
}

export class LocalRuntime extends EventEmitter {
  private readonly records: RunRecords;
  private readonly logs: RunLogs;
  private readonly lifecycle: RunLifecycle;
  private ticker: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: LocalRuntimeOptions) {
    super();
    this.setMaxListeners(0);
    const log = (line: string): void => opts.log?.(line);
    this.records = new RunRecords(opts.layout, (event) => this.emit('event', event satisfies RunEvent), log);
    this.logs = new RunLogs(opts.layout, opts.runLogLimits, log);
    this.lifecycle = new RunLifecycle({
      layout: opts.layout,
      backends: opts.backends,
      records: this.records,
      logs: this.logs,
      baseUrl: opts.baseUrl,
      baseEnv: filteredDaemonEnv(opts.daemonEnv ?? process.env),
      hostTerminals: opts.hostTerminals,
      log,
      deleteRun: (namespace, name) => this.delete(namespace, name),
    });
  }

  get layout(): StateLayout {
    return this.opts.layout;
  }

  probeBackend(name: string): Promise<ProbeResult> {
    return this.lifecycle.probeBackend(name);
  }

  /** Loads every Run record, recovers the live ones, and starts the timeout clock. */
  async start(): Promise<void> {
    for (const entry of await this.records.load()) {
      await this.lifecycle.recover(entry).catch((err: unknown) => this.opts.log?.(`recovering run ${uidOf(entry)}: ${(err as Error).message}`));
    }
    this.ticker = setInterval(() => {
      if (!this.stopped) this.lifecycle.checkTimeouts();
    }, this.opts.tickMs ?? 200);
    this.ticker.unref();
  }

  /** Stops timers and cancels running commands (their records say so); Runs stay as they are. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    const closing: Promise<void>[] = [];
    for (const entry of this.records.all()) if (entry.session) closing.push(entry.session.close());
    await Promise.allSettled(closing);
  }

  // ---- Runs API -----------------------------------------------------------------------------

  list(namespace?: string): Run[] {
    return this.records.list(namespace);
  }

  get listResourceVersion(): string {
    return this.records.listResourceVersion;
  }

  get(namespace: string, name: string): Run {
    return clone(this.records.mustFind(namespace, name).run);
  }

  async create(namespace: string, body: unknown, options: CreateRunOptions = {}): Promise<Run> {
    const run = admitCreate(namespace, body, options.uid, {
      nameTaken: (ns, name) => this.records.findByName(ns, name) !== undefined,
      uidTaken: (uid) => this.records.has(uid),
      backends: [...this.opts.backends.keys()],
      backendRefusal: (candidate) => this.opts.backends.get(candidate.spec.runtime)?.remote?.refusal(candidate),
    });
    const entry = await this.records.add(run);
    void this.lifecycle.advance(entry);
    return clone(run);
  }

  async patch(namespace: string, name: string, patch: unknown): Promise<Run> {
    checkMergePatch(patch);
    const entry = this.records.mustFind(namespace, name);
    let nextMode: TerminationMode | undefined;
    await entry.lock.run(async () => {
      const admitted = admitPatch(entry.run, patch);
      nextMode = admitted.nextMode;
      if (JSON.stringify(entry.run) !== JSON.stringify(admitted.run)) await this.records.persist(entry, 'MODIFIED', clone(admitted.run));
    });
    if (nextMode) this.lifecycle.requestTermination(entry, nextMode);
    return clone(entry.run);
  }

  async delete(namespace: string, name: string): Promise<Run> {
    const entry = this.records.mustFind(namespace, name);
    if (!isTerminalPhase(entry.run.status?.phase)) {
      this.lifecycle.requestTermination(entry, 'Immediate');
      await entry.terminating;
    }
    // A remote sandbox whose deletion failed when the Run ended gets one more try before its record goes.
    await this.lifecycle.releaseRemote(entry);
    await this.records.remove(entry, () => this.logs.end(entry));
    return clone(entry.run);
  }

  /** Exec records of a Run (running, ended, and lost with a previous daemon). */
  async operations(namespace: string, name: string): Promise<ExecRecord[]> {
    const entry = this.records.mustFind(namespace, name);
    return new ExecRecords(this.opts.layout.execDir(uidOf(entry))).list();
  }

  /** runtimed's log of a Run, for the log API (404 when there is no such Run). */
  runLog(namespace: string, name: string): ContainerLog {
    return this.logs.of(this.records.mustFind(namespace, name));
  }

  /**
   * Where port `port` of a Ready Run's remote sandbox is reached (an OpenSandbox endpoint and the headers it needs),
   * for the companion's loopback proxy; 409 when the Run is not Ready, 400 when its backend shares this machine's
   * network (nothing to resolve). The connection's API key is never part of it (opensandboxClient.ts).
   */
  async portEndpoint(namespace: string, name: string, port: number): Promise<PortEndpoint> {
    const entry = this.records.mustFind(namespace, name);
    const phase = entry.run.status?.phase ?? 'Pending';
    if (phase !== 'Ready' || !entry.session) throw new ApiStatusError('Conflict', `Run ${name} is ${phase}, not Ready: its ports can be reached once it is Ready`, name);
    const workspace = entry.session.config.workspace;
    if (!workspace.portEndpoint) {
      throw new ApiStatusError('BadRequest', `Run ${name} runs on backend "${entry.run.spec.runtime}", which shares this machine's network: port ${port} is reached on this machine directly`, name);
    }
    try {
      return await workspace.portEndpoint(port);
    } catch (err) {
      if (!(err instanceof SessionError)) throw err;
      const reason = ({ FailedPrecondition: 'Conflict', NotFound: 'NotFound', InvalidArgument: 'BadRequest', Unavailable: 'ServiceUnavailable' } as const)[err.grpc as string] ?? 'InternalError';
      throw new ApiStatusError(reason, err.message, name);
    }
  }

  /** Waits until a Run's termination work (if any) has finished; for tests and shutdown. */
  async settled(namespace: string, name: string): Promise<void> {
    await this.records.findByName(namespace, name)?.terminating;
  }

  // ---- access API lookup --------------------------------------------------------------------

  /** The gateway's `sessionRun` lookup (sessionLookup.ts). */
  lookupSession(namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } {
    return lookupSession(this.records, namespace, runtime, uid);
  }

  /** A Run by uid, for the cancel extension (which also reaches Runs that are finalizing). */
  sessionByUid(namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } | undefined {
    return sessionByUid(this.records, namespace, runtime, uid);
  }
}
