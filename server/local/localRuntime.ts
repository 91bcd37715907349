// The embedded local runtime: local Runs as records (runs/<uid>/run.json is the authority),
// their phases Pending → Scheduled → Running → Ready → Finalizing → Succeeded | Failed |
// Timeout | Cancelled with kruntimes' reasons and messages, termination (Drain exports
// artifacts, Immediate cancels), the idle, lease and total timeouts, recovery after a daemon
// restart (commands that died with the old daemon are reported, never dropped), and each
// Run's runtimed log (an audit line per mutation; it ends once the Run is terminal and its
// session closed).
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs/promises';
import path from 'node:path';
import { GatewayLimits, GatewayMessages } from '../../protocol/kruntimes/gateway';
import {
  IMMUTABLE_FIELDS_MESSAGE,
  RUN_API_VERSION,
  RUN_KIND,
  RunMessages,
  RunSchema,
  RunSpecSchema,
  checkRunSpecOnCreate,
  checkTerminationTransition,
  formatGoDuration,
  invalidRunMessage,
  isTerminalPhase,
  parseGoDuration,
  sessionEndpointPath,
  type Run,
  type RunPhase,
  type RunReason,
  type TerminationMode,
} from '../../protocol/kruntimes/run';
import { ApiStatusError, invalidSpec, runNotFound } from './apiStatusError';
import { clone, mergePatch, rfc3339, setCondition } from './runStatus';
import { ArtifactInvalidError, exportArtifacts } from './artifactExport';
import { readJsonRecord, writeJsonAtomic } from './atomicFile';
import type { Backend, ProbeResult } from './backend';
import type { BackendRegistry } from './backends';
import { CommandLostError } from './commandLost';
import { ContainerLog, DEFAULT_CONTAINER_LOG_LIMITS, type ContainerLogLimits } from './containerLog';
import { operationLogLines, type CompletedOperation } from './operationAudit';
import { ExecRecords, killRecordedGroup, ownerAlive, type ExecRecord } from './execRecord';
import { GROUP_EXIT_BOUND_MS, killGroupAndWait } from './procInfo';
import { LocalSession } from './localSession';
import { RunLock } from './runLock';
import { SessionError } from './sessionError';
import { filteredDaemonEnv, sessionEnv } from './sessionEnv';
import type { StateLayout } from './stateRoot';
import { cleanRelative } from './workspacePaths';

export type RunEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export interface RunEvent {
  type: RunEventType;
  object: Run;
}

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
}

interface Entry {
  run: Run;
  lock: RunLock;
  session?: LocalSession;
  /** The termination work in progress (drain/export or cancel), if any. */
  terminating?: Promise<void>;
  terminatingMode?: TerminationMode;
  /** When the Run started, in ms (status.startTime has only second precision). */
  startedMs?: number;
  /** When it reached a terminal phase, in ms (for ttlSecondsAfterFinished). */
  finishedMs?: number;
  deleting?: boolean;
  /** runtimed's log of the Run, opened on first use. */
  log?: ContainerLog;
  /** No more log lines will come: the Run is terminal and its session closed. */
  logEnded?: boolean;
}

/** The local runtime serves session Runs only. */
export const SESSION_ONLY_MESSAGE = 'the local runtime serves session Runs only (spec.mode.session)';
/** A caller-chosen Run UID: a UUID, or any such safe name (it becomes a directory and a URL segment). */
const UID_RE = /^[a-z0-9]([-a-z0-9]{0,62}[a-z0-9])?$/;

export interface CreateRunOptions {
  /**
   * The Run's UID instead of a random UUID — for an embedding caller (the cluster simulator)
   * that already assigned one. Lowercase letters, digits and `-`, at most 64; must be unused.
   */
  uid?: string;
}
const NAME_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const NAMESPACE_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function isValidNamespace(ns: string): boolean {
  return NAMESPACE_RE.test(ns);
}

const IMMUTABLE_SPEC_FIELDS = ['runtime', 'source', 'mode', 'artifactInputs', 'env', 'timeout', 'retryPolicy', 'resources', 'workspace', 'affinity'];

export class LocalRuntime extends EventEmitter {
  private readonly entries = new Map<string, Entry>();
  private resourceVersion = 0;
  private ticker: NodeJS.Timeout | undefined;
  private readonly probes = new Map<string, Promise<ProbeResult>>();
  private readonly baseEnv: Record<string, string>;
  private stopped = false;

  constructor(private readonly opts: LocalRuntimeOptions) {
    super();
    this.setMaxListeners(0);
    this.baseEnv = filteredDaemonEnv(opts.daemonEnv ?? process.env);
  }

  private log(line: string): void {
    this.opts.log?.(line);
  }

  get layout(): StateLayout {
    return this.opts.layout;
  }

  probeBackend(name: string): Promise<ProbeResult> {
    let p = this.probes.get(name);
    if (!p) {
      const backend = this.opts.backends.get(name);
      p = backend ? backend.probe() : Promise.resolve({ ok: false, reason: `unknown backend "${name}"` } as ProbeResult);
      this.probes.set(name, p);
    }
    return p;
  }

  // ---- startup and shutdown -----------------------------------------------------------------

  /** Loads every Run record, recovers the live ones, and starts the timeout clock. */
  async start(): Promise<void> {
    await fs.mkdir(this.layout.runsDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(this.layout.artifactStoreRoot, { recursive: true, mode: 0o700 });
    const names = await fs.readdir(this.layout.runsDir);
    for (const uid of names) {
      if (uid.startsWith('.deleted-')) {
        await fs.rm(path.join(this.layout.runsDir, uid), { recursive: true, force: true });
        continue;
      }
      let run: Run | undefined;
      try {
        run = await readJsonRecord(this.layout.runFile(uid), RunSchema);
      } catch (err) {
        this.log(`skipping run record ${uid}: ${(err as Error).message}`);
        continue;
      }
      if (!run) continue;
      const rv = Number(run.metadata.resourceVersion ?? '0');
      if (Number.isFinite(rv)) this.resourceVersion = Math.max(this.resourceVersion, rv);
      this.entries.set(uid, { run, lock: new RunLock() });
    }
    for (const [uid, entry] of this.entries) {
      await this.recover(uid, entry).catch((err: unknown) => this.log(`recovering run ${uid}: ${(err as Error).message}`));
    }
    const tick = this.opts.tickMs ?? 200;
    this.ticker = setInterval(() => this.checkTimeouts(), tick);
    this.ticker.unref();
  }

  /** Stops timers and cancels running commands (their records say so); Runs stay as they are. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    const closing: Promise<void>[] = [];
    for (const entry of this.entries.values()) if (entry.session) closing.push(entry.session.close());
    await Promise.allSettled(closing);
  }

  private async recover(uid: string, entry: Entry): Promise<void> {
    const run = entry.run;
    const phase = run.status?.phase ?? 'Pending';
    const lost = await this.reapLostCommands(uid);
    if (lost.length > 0) {
      this.log(`run ${run.metadata.namespace}/${run.metadata.name}: ${lost.length} command(s) died with the previous gateway daemon: ${lost.map((r) => r.operationId).join(', ')}`);
      await this.update(entry, (r) => {
        setCondition(r, 'OperationsLost', 'True', 'ExecutionLost', `${lost.length} command(s) died with the previous gateway daemon: ${lost.map((x) => x.operationId).join(', ')}`.slice(0, 1024));
      });
    }
    if (isTerminalPhase(phase)) return;
    const wsExists = await fs.stat(this.layout.workspaceDir(uid)).then((s) => s.isDirectory(), () => false);
    if (!wsExists && phase !== 'Pending' && phase !== 'Scheduled') {
      await this.terminal(entry, 'Failed', 'ExecutionLost', 'runtime session not found after runtimed restart');
      return;
    }
    const termination = run.spec.termination?.mode;
    if (termination === 'Immediate') {
      this.requestTermination(entry, 'Immediate');
      return;
    }
    if (phase === 'Ready' || phase === 'Finalizing') {
      await this.openSession(entry);
      await this.update(entry, (r) => {
        if (r.status?.endpoint) r.status.endpoint.url = this.endpointUrl(r);
      });
      if (phase === 'Finalizing' || termination === 'Drain') this.requestTermination(entry, 'Drain');
      return;
    }
    void this.advance(entry);
  }

  /** Marks running exec records whose daemon is gone as lost, killing what is left of them. */
  private async reapLostCommands(uid: string): Promise<ExecRecord[]> {
    const records = new ExecRecords(this.layout.execDir(uid));
    const lost: ExecRecord[] = [];
    for (const rec of await records.list()) {
      if (rec.state !== 'running' || ownerAlive(rec)) continue;
      const killed = killRecordedGroup(rec, 'SIGKILL');
      const survivors = killed ? await killGroupAndWait(rec.kill.pgid) : [];
      const what = survivors.length > 0 ? `; ${new CommandLostError(rec.kill.pgid, survivors, GROUP_EXIT_BOUND_MS).message}` : killed ? '; its remaining processes were killed' : '';
      if (survivors.length > 0) this.log(`run ${uid}: operation ${rec.operationId}: CommandLost${what}`);
      const updated: ExecRecord = {
        ...rec,
        state: 'lost',
        outcome: 'lost',
        exitCode: -1,
        message: `the gateway daemon (pid ${rec.owner.pid}) that ran this command exited${what}`,
        endedAt: new Date().toISOString(),
      };
      await records.write(updated);
      lost.push(updated);
    }
    return lost;
  }

  // ---- records ------------------------------------------------------------------------------

  private endpointUrl(run: Run): string {
    return this.opts.baseUrl() + sessionEndpointPath(run.metadata.namespace ?? 'default', run.spec.runtime, run.metadata.uid ?? '');
  }

  private async persist(entry: Entry, type: RunEventType): Promise<void> {
    this.resourceVersion++;
    entry.run.metadata.resourceVersion = String(this.resourceVersion);
    const uid = entry.run.metadata.uid as string;
    await writeJsonAtomic(this.layout.runFile(uid), entry.run);
    this.emit('event', { type, object: clone(entry.run) } satisfies RunEvent);
  }

  /** Changes a Run under its lock and writes it; no-op after the Run was deleted. */
  private update(entry: Entry, mutate: (run: Run) => void): Promise<void> {
    return entry.lock.run(async () => {
      if (!this.entries.has(entry.run.metadata.uid as string)) return;
      mutate(entry.run);
      await this.persist(entry, 'MODIFIED');
    });
  }

  private async terminal(entry: Entry, phase: RunPhase, reason: RunReason, message: string): Promise<void> {
    await this.update(entry, (run) => {
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
    });
    if (isTerminalPhase(entry.run.status?.phase)) {
      // Commands cancelled while the session closes still write their lines; the log ends after them.
      void (entry.session?.close() ?? Promise.resolve()).finally(() => this.endLog(entry));
    }
  }

  // ---- runtimed's log -----------------------------------------------------------------------

  private logOf(entry: Entry): ContainerLog {
    if (!entry.log) {
      entry.log = new ContainerLog(this.layout.runLogFile(entry.run.metadata.uid as string), this.opts.runLogLimits ?? DEFAULT_CONTAINER_LOG_LIMITS);
      if (entry.logEnded || (isTerminalPhase(entry.run.status?.phase) && !entry.session)) entry.log.finish();
    }
    return entry.log;
  }

  private endLog(entry: Entry): void {
    entry.logEnded = true;
    entry.log?.finish();
  }

  /** Writes runtimed's lines for one finished mutation; a log that cannot be written never fails the operation. */
  private writeOperationLog(entry: Entry, op: CompletedOperation): void {
    const run = entry.run;
    try {
      const log = this.logOf(entry);
      const lines = operationLogLines(
        {
          runUid: run.metadata.uid as string,
          ...(run.status?.assignedPodUID ? { assignedPodUid: run.status.assignedPodUID } : {}),
          runName: run.metadata.name ?? '',
          namespace: run.metadata.namespace ?? 'default',
          runtime: run.spec.runtime,
          pod: run.status?.assignedPod ?? `local-${run.spec.runtime}`,
        },
        op,
      );
      for (const line of lines) log.write(line);
    } catch (err) {
      this.log(`run ${run.metadata.namespace}/${run.metadata.name}: writing its runtimed log: ${(err as Error).message}`);
    }
  }

  /** runtimed's log of a Run, for the log API (404 when there is no such Run). */
  runLog(namespace: string, name: string): ContainerLog {
    return this.logOf(this.mustFind(namespace, name));
  }

  // ---- Runs API -----------------------------------------------------------------------------

  list(namespace?: string): Run[] {
    return [...this.entries.values()]
      .map((e) => e.run)
      .filter((r) => namespace === undefined || r.metadata.namespace === namespace)
      .sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''))
      .map(clone);
  }

  get listResourceVersion(): string {
    return String(this.resourceVersion);
  }

  private findByName(namespace: string, name: string): Entry | undefined {
    for (const e of this.entries.values()) {
      if (e.run.metadata.namespace === namespace && e.run.metadata.name === name) return e;
    }
    return undefined;
  }

  private mustFind(namespace: string, name: string): Entry {
    const e = this.findByName(namespace, name);
    if (!e) throw runNotFound(name);
    return e;
  }

  get(namespace: string, name: string): Run {
    return clone(this.mustFind(namespace, name).run);
  }

  async create(namespace: string, body: unknown, options: CreateRunOptions = {}): Promise<Run> {
    if (!isValidNamespace(namespace)) throw new ApiStatusError(400, 'BadRequest', `namespace "${namespace}" is not a valid DNS label`);
    if (options.uid !== undefined) {
      if (!UID_RE.test(options.uid)) {
        throw new ApiStatusError(400, 'BadRequest', `Run UID "${options.uid}" is not valid: use lowercase letters, digits and "-" (at most 64, e.g. a UUID)`);
      }
      if (this.entries.has(options.uid)) throw new ApiStatusError(409, 'AlreadyExists', `a Run with UID "${options.uid}" already exists`);
    }
    const parsed = RunSchema.safeParse(body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      throw new ApiStatusError(422, 'Invalid', `Run.kruntimes.io is invalid: ${issues}`);
    }
    const input = parsed.data;
    if (input.metadata.namespace !== undefined && input.metadata.namespace !== namespace) {
      throw new ApiStatusError(400, 'BadRequest', `the namespace of the object (${input.metadata.namespace}) does not match the namespace on the request (${namespace})`);
    }
    let name = input.metadata.name;
    if (!name) {
      if (!input.metadata.generateName) throw new ApiStatusError(422, 'Invalid', 'Run.kruntimes.io is invalid: metadata.name: Required value: name or generateName is required');
      do name = input.metadata.generateName + randomBytes(4).toString('hex').slice(0, 5);
      while (this.findByName(namespace, name));
    }
    if (!NAME_RE.test(name)) throw new ApiStatusError(422, 'Invalid', `Run.kruntimes.io "${name}" is invalid: metadata.name: must be a lowercase RFC 1123 subdomain`, name);
    if (this.findByName(namespace, name)) throw new ApiStatusError(409, 'AlreadyExists', `runs.kruntimes.io "${name}" already exists`, name);
    const spec = input.spec as Run['spec'] & { workspace?: unknown };
    const rule = checkRunSpecOnCreate(spec);
    if (!rule.ok) throw invalidSpec(name, invalidRunMessage(name, rule.message), rule.message);
    if (spec.mode.session === undefined) throw invalidSpec(name, invalidRunMessage(name, SESSION_ONLY_MESSAGE), SESSION_ONLY_MESSAGE);
    if (!this.opts.backends.has(spec.runtime)) {
      const msg = `spec.runtime must name a local backend (${[...this.opts.backends.keys()].join(', ')}), not "${spec.runtime}"`;
      throw new ApiStatusError(422, 'Invalid', `Run.kruntimes.io "${name}" is invalid: spec.runtime: Unsupported value: "${spec.runtime}": ${msg}`, name, [
        { reason: 'FieldValueNotSupported', message: msg, field: 'spec.runtime' },
      ]);
    }
    const uid = options.uid ?? randomUUID();
    const run: Run = {
      apiVersion: RUN_API_VERSION,
      kind: RUN_KIND,
      metadata: {
        ...input.metadata,
        name,
        namespace,
        uid,
        creationTimestamp: rfc3339(),
        finalizers: ['kruntimes.io/registration-cleanup'],
      },
      spec: input.spec,
      status: { phase: 'Pending', message: RunMessages.pending },
    };
    delete run.metadata.generateName;
    if (input.metadata.generateName) run.metadata.generateName = input.metadata.generateName;
    await fs.mkdir(this.layout.runDir(uid), { recursive: true, mode: 0o700 });
    const entry: Entry = { run, lock: new RunLock() };
    this.entries.set(uid, entry);
    await entry.lock.run(() => this.persist(entry, 'ADDED'));
    void this.advance(entry);
    return clone(run);
  }

  async patch(namespace: string, name: string, patch: unknown): Promise<Run> {
    if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
      throw new ApiStatusError(400, 'BadRequest', 'a merge patch must be a JSON object');
    }
    const entry = this.mustFind(namespace, name);
    let nextMode: TerminationMode | undefined;
    let changed = false;
    await entry.lock.run(async () => {
      const current = entry.run;
      const { metadata: pMeta, spec: pSpec } = patch as { metadata?: unknown; spec?: unknown };
      const merged = mergePatch(clone(current.spec), pSpec ?? {}) as Record<string, unknown>;
      for (const field of IMMUTABLE_SPEC_FIELDS) {
        if (JSON.stringify((current.spec as Record<string, unknown>)[field]) !== JSON.stringify(merged[field])) {
          throw invalidSpec(name, invalidRunMessage(name, IMMUTABLE_FIELDS_MESSAGE), IMMUTABLE_FIELDS_MESSAGE);
        }
      }
      const specCheck = RunSpecSchema.safeParse(merged);
      if (!specCheck.success) {
        throw new ApiStatusError(422, 'Invalid', `Run.kruntimes.io "${name}" is invalid: ${specCheck.error.issues.map((i) => `spec.${i.path.join('.')}: ${i.message}`).join('; ')}`, name);
      }
      const from = current.spec.termination?.mode;
      const to = specCheck.data.termination?.mode;
      const rule = checkTerminationTransition(from, to);
      if (!rule.ok) throw invalidSpec(name, invalidRunMessage(name, rule.message), rule.message);
      let metadata = current.metadata;
      if (pMeta !== undefined) {
        const m = mergePatch(clone(current.metadata), pMeta) as Run['metadata'];
        for (const k of ['name', 'namespace', 'uid', 'resourceVersion', 'creationTimestamp', 'generateName'] as const) {
          if (k === 'resourceVersion') continue;
          if (m[k] !== current.metadata[k]) throw new ApiStatusError(422, 'Invalid', `Run.kruntimes.io "${name}" is invalid: metadata.${k}: field is immutable`, name);
        }
        metadata = { ...m, resourceVersion: current.metadata.resourceVersion };
      }
      entry.run = { ...current, metadata, spec: specCheck.data };
      if (to !== from) nextMode = to;
      changed = JSON.stringify(current) !== JSON.stringify(entry.run);
      if (changed) await this.persist(entry, 'MODIFIED');
    });
    if (nextMode) this.requestTermination(entry, nextMode);
    return clone(entry.run);
  }

  async delete(namespace: string, name: string): Promise<Run> {
    const entry = this.mustFind(namespace, name);
    const uid = entry.run.metadata.uid as string;
    if (!isTerminalPhase(entry.run.status?.phase)) {
      this.requestTermination(entry, 'Immediate');
      await entry.terminating;
    }
    await entry.lock.run(async () => {
      if (!this.entries.has(uid)) return; // deleted meanwhile (e.g. by ttlSecondsAfterFinished)
      // Artifacts first, the run record last: a crash in between leaves a Run that can be deleted again.
      await fs.rm(path.join(this.layout.artifactStoreRoot, 'namespaces', namespace, 'runs', uid), { recursive: true, force: true });
      // One atomic rename retires the whole Run; the removal after it may be interrupted safely.
      const trash = path.join(this.layout.runsDir, `.deleted-${uid}`);
      await fs.rename(this.layout.runDir(uid), trash).catch(() => undefined);
      await fs.rm(trash, { recursive: true, force: true });
      this.entries.delete(uid);
      this.endLog(entry);
      this.emit('event', { type: 'DELETED', object: clone(entry.run) } satisfies RunEvent);
    });
    return clone(entry.run);
  }

  /** Exec records of a Run (running, ended, and lost with a previous daemon). */
  async operations(namespace: string, name: string): Promise<ExecRecord[]> {
    const entry = this.mustFind(namespace, name);
    return new ExecRecords(this.layout.execDir(entry.run.metadata.uid as string)).list();
  }

  // ---- phases -------------------------------------------------------------------------------

  private async advance(entry: Entry): Promise<void> {
    const run = entry.run;
    const uid = run.metadata.uid as string;
    const backendName = run.spec.runtime;
    try {
      if (run.status?.phase === 'Pending' || run.status?.phase === undefined) {
        await this.update(entry, (r) => {
          if (isTerminalPhase(r.status?.phase)) return; // Immediate or a timeout got there first
          const st = (r.status ??= {});
          st.phase = 'Scheduled';
          st.assignedPod = `local-${backendName}`;
          st.assignedPodUID = randomUUID();
          st.message = `assigned to runtime pod local-${backendName}`;
          setCondition(r, 'Scheduled', 'True', 'Assigned', `assigned to runtime pod local-${backendName}`);
        });
      }
      if (this.cancelling(entry)) return;
      if (entry.run.status?.phase === 'Scheduled') {
        await this.update(entry, (r) => {
          if (isTerminalPhase(r.status?.phase)) return; // Immediate or a timeout got there first
          const st = (r.status ??= {});
          st.phase = 'Running';
          entry.startedMs = Date.now();
          st.startTime = rfc3339(new Date(entry.startedMs));
          st.message = 'claimed by runtimed';
          setCondition(r, 'Running', 'True', 'Claimed', 'claimed by runtimed');
        });
      }
      if (this.cancelling(entry)) return;
      const probe = await this.probeBackend(backendName);
      if (!probe.ok) {
        await this.terminal(entry, 'Failed', 'SessionRegister', `backend "${backendName}" is not available: ${probe.reason}`);
        return;
      }
      const prepared = await this.prepare(entry).catch(async (err: unknown) => {
        await this.terminal(entry, 'Failed', 'PrepareSource', (err as Error).message.slice(0, 4000));
        return false;
      });
      if (prepared === false || this.cancelling(entry) || isTerminalPhase(entry.run.status?.phase)) return;
      await this.openSession(entry);
      await this.update(entry, (r) => {
        if (isTerminalPhase(r.status?.phase)) return; // Immediate or a timeout got there first
        const st = (r.status ??= {});
        st.phase = 'Ready';
        st.message = RunMessages.registered;
        st.endpoint = { protocol: 'HTTP', url: this.endpointUrl(r) };
        setCondition(r, 'Ready', 'True', 'SessionRegistered', 'session is ready for Console operations');
        if (entry.session) entry.session.leaseRenewedMs = Date.now(); // the lease clock starts at Ready
      });
      if (entry.run.spec.termination?.mode) this.requestTermination(entry, entry.run.spec.termination.mode);
    } catch (err) {
      this.log(`run ${uid}: ${(err as Error).message}`);
      await this.terminal(entry, 'Failed', 'RuntimeError', `local runtime error: ${(err as Error).message}`.slice(0, 4000)).catch(() => undefined);
    }
  }

  /** Immediate (or a timeout) was requested; a separate method because awaits change it. */
  private cancelling(entry: Entry): boolean {
    return entry.terminatingMode === 'Immediate';
  }

  private sessionRoot(run: Run): string {
    const ws = this.layout.workspaceDir(run.metadata.uid as string);
    return run.spec.source?.repoURL ? path.join(ws, 'repo') : ws;
  }

  /** Workspace, artifacts dir, source and artifact inputs, before Ready. Idempotent. */
  private async prepare(entry: Entry): Promise<boolean> {
    const run = entry.run;
    const uid = run.metadata.uid as string;
    const ws = this.layout.workspaceDir(uid);
    await fs.mkdir(ws, { recursive: true, mode: 0o755 });
    await fs.mkdir(this.layout.artifactsDir(uid), { recursive: true, mode: 0o755 });
    await fs.mkdir(LocalSession.tmpDirFor(this.layout.runDir(uid)), { recursive: true, mode: 0o700 });
    const source = run.spec.source;
    if (source?.inline !== undefined) {
      if (Buffer.byteLength(source.inline) > 256 * 1024) throw new Error('source.inline exceeds 256 KiB');
      await fs.writeFile(path.join(ws, 'script'), source.inline, { mode: 0o755 });
    }
    if (source?.repoURL) {
      const repo = path.join(ws, 'repo');
      const exists = await fs.stat(path.join(repo, '.git')).then(() => true, () => false);
      if (!exists) {
        await git(['clone', '--quiet', '--', source.repoURL, repo], ws);
        if (source.commitSHA) await git(['checkout', '--quiet', '--detach', source.commitSHA], repo);
      }
    }
    for (const input of run.spec.artifactInputs ?? []) {
      const rel = cleanRelative(input.path, { allowRoot: false });
      const loc = input.ref.location;
      if (!('filesystem' in loc)) throw new Error(`open artifact input ${input.ref.name}: the local runtime reads filesystem artifacts only`);
      const src = path.resolve(this.layout.artifactStoreRoot, loc.filesystem.path);
      if (!src.startsWith(this.layout.artifactStoreRoot + path.sep)) throw new Error(`open artifact input ${input.ref.name}: location is outside the artifact store`);
      const dest = path.join(this.sessionRoot(run), rel);
      await fs.mkdir(path.dirname(dest), { recursive: true });
      await fs.copyFile(src, dest).catch((err: unknown) => {
        throw new Error(`open artifact input ${input.ref.name}: ${(err as Error).message}`);
      });
    }
    return true;
  }

  private async openSession(entry: Entry): Promise<void> {
    if (entry.session) return;
    const run = entry.run;
    const uid = run.metadata.uid as string;
    const backend = this.opts.backends.get(run.spec.runtime) as Backend;
    const sessionMode = run.spec.mode.session ?? {};
    const opTimeout = Math.min(
      sessionMode.operationTimeout !== undefined ? (parseGoDuration(sessionMode.operationTimeout) ?? Infinity) : Infinity,
      GatewayLimits.maxOperationTimeoutMs,
    );
    await fs.mkdir(LocalSession.tmpDirFor(this.layout.runDir(uid)), { recursive: true, mode: 0o700 });
    entry.session = new LocalSession({
      uid,
      backend,
      sessionRoot: this.sessionRoot(run),
      writable: [this.layout.workspaceDir(uid), this.layout.artifactsDir(uid)],
      tmpDir: LocalSession.tmpDirFor(this.layout.runDir(uid)),
      hide: [this.layout.root],
      env: sessionEnv(this.baseEnv, run.spec.env, this.layout.artifactsDir(uid)),
      queueSize: Math.min(sessionMode.queueSize ?? GatewayLimits.maxQueueSize, GatewayLimits.maxQueueSize),
      operationTimeoutMs: opTimeout > 0 ? opTimeout : GatewayLimits.maxOperationTimeoutMs,
      records: new ExecRecords(this.layout.execDir(uid)),
      log: (line) => this.log(`run ${run.metadata.namespace}/${run.metadata.name}: ${line}`),
      audit: (op) => this.writeOperationLog(entry, op),
    });
  }

  // ---- termination and timeouts --------------------------------------------------------------

  /** Starts Drain or Immediate for a Run (idempotent; Immediate wins over a drain in progress). */
  private requestTermination(entry: Entry, mode: TerminationMode): void {
    if (isTerminalPhase(entry.run.status?.phase)) return;
    if (entry.terminatingMode === 'Immediate') return;
    if (entry.terminatingMode === 'Drain' && mode === 'Drain') return;
    entry.terminatingMode = mode;
    const work = mode === 'Drain' ? this.finalize(entry) : this.end(entry, 'Cancelled', 'Cancelled', RunMessages.cancelled);
    entry.terminating = work.catch((err: unknown) => this.log(`terminating run ${entry.run.metadata.uid}: ${(err as Error).message}`));
  }

  private async finalize(entry: Entry): Promise<void> {
    const phase = entry.run.status?.phase;
    if (phase !== 'Ready' && phase !== 'Finalizing') {
      // Not Ready yet: wait for the preparation to settle (bounded by its own steps).
      while (!isTerminalPhase(entry.run.status?.phase) && entry.run.status?.phase !== 'Ready') {
        if (entry.terminatingMode !== 'Drain') return;
        await new Promise((r) => setTimeout(r, 50));
      }
      if (isTerminalPhase(entry.run.status?.phase)) return;
    }
    await this.update(entry, (r) => {
      if (isTerminalPhase(r.status?.phase)) return; // Immediate or a timeout got there first
      const st = (r.status ??= {});
      st.phase = 'Finalizing';
      st.message = RunMessages.finalizationRequested;
      setCondition(r, 'Ready', 'False', 'Finalizing', 'session is no longer accepting new operations');
    });
    await entry.session?.drain();
    const uid = entry.run.metadata.uid as string;
    for (let attempt = 1; ; attempt++) {
      if (entry.terminatingMode !== 'Drain') return;
      try {
        const refs = await exportArtifacts({
          artifactsDir: this.layout.artifactsDir(uid),
          storeRoot: this.layout.artifactStoreRoot,
          namespace: entry.run.metadata.namespace ?? 'default',
          uid,
        });
        if (entry.terminatingMode !== 'Drain') return;
        await this.update(entry, (r) => {
          const st = (r.status ??= {});
          st.artifactStore = { driver: 'filesystem', filesystem: { path: this.layout.artifactStoreRoot } };
          if (refs.length > 0) {
            st.artifactRefs = refs;
            r.metadata.finalizers = [...new Set([...(r.metadata.finalizers ?? []), 'kruntimes.io/artifact-cleanup'])];
          }
        });
        await entry.session?.close();
        await this.terminal(entry, 'Succeeded', 'SessionCompleted', RunMessages.finalized);
        return;
      } catch (err) {
        if (err instanceof ArtifactInvalidError) {
          await entry.session?.close();
          await this.terminal(entry, 'Failed', 'ArtifactInvalid', err.message);
          return;
        }
        this.log(`exporting artifacts of run ${uid} (attempt ${attempt}): ${(err as Error).message}`);
        if (attempt >= 30) {
          await entry.session?.close();
          await this.terminal(entry, 'Failed', 'RuntimeError', `export artifacts: ${(err as Error).message}`);
          return;
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** Immediate or timeout: the phase changes first (new calls get 409), then everything is cancelled. */
  private async end(entry: Entry, phase: RunPhase, reason: RunReason, message: string): Promise<void> {
    const session = entry.session;
    const closing = session?.close();
    await this.terminal(entry, phase, reason, message);
    await closing;
  }

  private checkTimeouts(): void {
    if (this.stopped) return;
    const now = Date.now();
    for (const entry of this.entries.values()) {
      const run = entry.run;
      const phase = run.status?.phase;
      const ttl = run.spec.ttlSecondsAfterFinished;
      if (isTerminalPhase(phase) && ttl !== undefined && !entry.deleting && run.status?.completionTime) {
        const finished = entry.finishedMs ?? Date.parse(run.status.completionTime);
        if (now >= finished + ttl * 1000) {
          entry.deleting = true;
          void this.delete(run.metadata.namespace ?? 'default', run.metadata.name ?? '').catch((err: unknown) => this.log(`deleting finished run ${run.metadata.name}: ${(err as Error).message}`));
        }
        continue;
      }
      if (isTerminalPhase(phase) || entry.terminatingMode === 'Immediate') continue;
      const timeoutMs = run.spec.timeout !== undefined ? parseGoDuration(run.spec.timeout) : undefined;
      const started = entry.startedMs ?? (run.status?.startTime ? Date.parse(run.status.startTime) : undefined);
      if (timeoutMs !== undefined && timeoutMs > 0 && started !== undefined && now >= started + timeoutMs) {
        this.expire(entry, RunMessages.timeoutAfter(formatGoDuration(timeoutMs)));
        continue;
      }
      const idle = run.spec.mode.session?.idleTimeoutSeconds;
      const session = entry.session;
      if (idle !== undefined && phase === 'Ready' && session && !session.busy && !entry.terminatingMode) {
        const idleMs = now - Number(session.lastActivityNs / 1_000_000n);
        if (idleMs >= idle * 1000) {
          this.expire(entry, RunMessages.idleTimeout);
          continue;
        }
      }
      // The lease runs on connection heartbeats alone: a busy session expires too once they stop.
      const lease = run.spec.mode.session?.leaseTimeoutSeconds;
      if (lease !== undefined && phase === 'Ready' && session && !entry.terminatingMode && now - session.leaseRenewedMs >= lease * 1000) {
        this.expire(entry, RunMessages.leaseExpired);
      }
    }
  }

  private expire(entry: Entry, message: string): void {
    entry.terminatingMode = 'Immediate';
    entry.terminating = this.end(entry, 'Timeout', 'Timeout', message).catch((err: unknown) => this.log(`timing out run: ${(err as Error).message}`));
  }

  /** Waits until a Run's termination work (if any) has finished; for tests and shutdown. */
  async settled(namespace: string, name: string): Promise<void> {
    await this.findByName(namespace, name)?.terminating;
  }

  // ---- access API lookup --------------------------------------------------------------------

  /**
   * The gateway's `sessionRun` lookup: 404 `Session Run not found` unless a session Run with
   * that uid lives in `namespace` under `runtime`; 409 `Session Run is <Phase>, not Ready`.
   */
  lookupSession(namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } {
    const entry = this.entries.get(uid);
    const run = entry?.run;
    if (!entry || !run || run.metadata.namespace !== namespace || run.spec.runtime !== runtime || run.spec.mode.session === undefined) {
      throw new SessionError('NotFound', GatewayMessages.sessionRunNotFound);
    }
    const phase = run.status?.phase ?? '';
    if (phase !== 'Ready' || !run.status?.assignedPodUID || !entry.session) {
      throw new SessionError('FailedPrecondition', GatewayMessages.notReady(phase));
    }
    return { run, session: entry.session };
  }

  /** A Run by uid, for the cancel extension (which also reaches Runs that are finalizing). */
  sessionByUid(namespace: string, runtime: string, uid: string): { run: Run; session: LocalSession } | undefined {
    const entry = this.entries.get(uid);
    if (!entry?.session || entry.run.metadata.namespace !== namespace || entry.run.spec.runtime !== runtime) return undefined;
    return { run: entry.run, session: entry.session };
  }
}

function git(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, timeout: 120_000, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } }, (err, _out, stderr) => {
      if (err) reject(new Error(`git ${args[0]}: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}
