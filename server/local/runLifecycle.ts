// The life of a local Run: its phases Pending → Scheduled → Running → Ready → Finalizing →
// Succeeded | Failed | Timeout | Cancelled with kruntimes' reasons and messages, termination
// (Drain drains the session and exports artifacts, Immediate cancels), the idle, lease, total and
// ttlSecondsAfterFinished clocks, and recovery after a daemon restart (commands that died with the
// old daemon are reported, never dropped). It decides; runRecords.ts stores and tells watchers.
import fs from 'node:fs/promises';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import {
  isTerminalPhase,
  parseGoDuration,
  RunMessages,
  sessionEndpointPath,
  type Run,
  type RunPhase,
  type RunReason,
  type TerminationMode,
} from '../../protocol/kruntimes/run';
import { ArtifactInvalidError, exportArtifacts } from './artifactExport';
import type { Backend, ProbeResult, RemoteRunContext, RemoteWorkspace } from './backend';
import type { BackendRegistry } from './backends';
import { ExecRecords, type ExecRecord } from './execRecord';
import { LocalSession } from './localSession';
import type { RunLogs } from './runLogs';
import { reapLostCommands } from './lostCommands';
import { markFinalizing, markReady, markRunning, markScheduled, markTerminal } from './runPhases';
import { expiryOf, ttlElapsed } from './runClocks';
import { uidOf, type RunEntry, type RunRecords } from './runRecords';
import { setCondition } from './runStatus';
import { hostTerminalProbe } from './hostTerminal';
import { HostWorkspace } from './hostWorkspace';
import { sessionEnv } from './sessionEnv';
import type { StateLayout } from './stateRoot';
import { prepareWorkspace, sessionRoot } from './runWorkspace';

export interface RunLifecycleOptions {
  layout: StateLayout;
  backends: BackendRegistry;
  records: RunRecords;
  logs: RunLogs;
  /** `http://127.0.0.1:<port>`; a function because the port is known only after listen. */
  baseUrl: () => string;
  /** The daemon's environment as commands may see it. */
  baseEnv: Record<string, string>;
  /** false: no interactive terminals (default: where this machine makes ptys). */
  hostTerminals?: boolean | undefined;
  log: (line: string) => void;
  /** Deletes a finished Run whose ttlSecondsAfterFinished passed. */
  deleteRun: (namespace: string, name: string) => Promise<unknown>;
}

export class RunLifecycle {
  private readonly probes = new Map<string, Promise<ProbeResult>>();
  private readonly records: RunRecords;

  constructor(private readonly o: RunLifecycleOptions) {
    this.records = o.records;
  }

  probeBackend(name: string): Promise<ProbeResult> {
    let p = this.probes.get(name);
    if (!p) {
      const backend = this.o.backends.get(name);
      p = backend ? backend.probe() : Promise.resolve({ ok: false, reason: `unknown backend "${name}"` } as ProbeResult);
      this.probes.set(name, p);
    }
    return p;
  }

  private endpointUrl(run: Run): string {
    return this.o.baseUrl() + sessionEndpointPath(run.metadata.namespace ?? 'default', run.spec.runtime, run.metadata.uid ?? '');
  }

  // ---- phases -------------------------------------------------------------------------------

  /** Moves a new (or recovered, not yet Ready) Run towards Ready; any failure ends it Failed. */
  async advance(entry: RunEntry): Promise<void> {
    const backendName = entry.run.spec.runtime;
    try {
      // Steps on the way to Ready, whose durable write makes them durable too (the same record file): not waited onto
      // the disk themselves (a machine crash before Ready leaves an earlier phase, which recovery advances again).
      if (entry.run.status?.phase === 'Pending' || entry.run.status?.phase === undefined) {
        await this.records.update(entry, (r) => markScheduled(r, backendName), 'at-once', false);
      }
      if (this.cancelling(entry)) return;
      if (entry.run.status?.phase === 'Scheduled') {
        await this.records.update(entry, (r) => markRunning(r, entry), 'at-once', false);
      }
      if (this.cancelling(entry)) return;
      await this.becomeReady(entry);
    } catch (err) {
      this.o.log(`run ${uidOf(entry)}: ${(err as Error).message}`);
      await this.terminal(entry, 'Failed', 'RuntimeError', `local runtime error: ${(err as Error).message}`.slice(0, 4000)).catch(() => undefined);
    }
  }

  /** Running → Ready: the backend is there, the workspace prepared, the session open. */
  private async becomeReady(entry: RunEntry): Promise<void> {
    const backendName = entry.run.spec.runtime;
    const probe = await this.probeBackend(backendName);
    if (!probe.ok) {
      await this.terminal(entry, 'Failed', 'SessionRegister', `backend "${backendName}" is not available: ${probe.reason}`);
      return;
    }
    const prepared = await prepareWorkspace(this.o.layout, entry.run).then(
      () => true,
      async (err: unknown) => {
        await this.terminal(entry, 'Failed', 'PrepareSource', (err as Error).message.slice(0, 4000));
        return false;
      },
    );
    if (!prepared || this.cancelling(entry) || isTerminalPhase(entry.run.status?.phase)) return;
    await this.openSession(entry);
    if (!entry.session) return; // cancelled while a remote sandbox was being created
    // Seen once stored: a client that sees Ready starts commands, and a crash must not take that Ready back.
    await this.records.update(entry, (r) => markReady(r, entry, this.endpointUrl(r)), 'once-stored');
    if (entry.run.spec.termination?.mode) this.requestTermination(entry, entry.run.spec.termination.mode);
  }

  /** Immediate (or a timeout) was requested; a separate method because awaits change it. */
  private cancelling(entry: RunEntry): boolean {
    return entry.terminatingMode === 'Immediate';
  }

  private async openSession(entry: RunEntry): Promise<void> {
    if (entry.session) return;
    const run = entry.run;
    const uid = uidOf(entry);
    const layout = this.o.layout;
    const sessionMode = run.spec.mode.session ?? {};
    const opTimeout = Math.min(
      sessionMode.operationTimeout !== undefined ? (parseGoDuration(sessionMode.operationTimeout) ?? Infinity) : Infinity,
      GatewayLimits.maxOperationTimeoutMs,
    );
    await fs.mkdir(LocalSession.tmpDirFor(layout.runDir(uid)), { recursive: true, mode: 0o700 });
    const backend = this.o.backends.get(run.spec.runtime) as Backend;
    let workspace: HostWorkspace | RemoteWorkspace;
    let env: Record<string, string>;
    if (backend.remote) {
      // A remote sandbox: created (or found again) first; its commands never see the daemon's environment.
      const remote = await backend.remote.open(this.remoteContext(entry));
      if (isTerminalPhase(entry.run.status?.phase) || this.cancelling(entry)) {
        // Cancelled while the sandbox was being created: it must not outlive the Run.
        await remote.close().catch(() => undefined);
        await this.releaseRemote(entry);
        return;
      }
      workspace = remote;
      env = sessionEnv({}, run.spec.env, remote.artifactsPath);
    } else {
      workspace = new HostWorkspace({
        backend,
        sessionRoot: sessionRoot(layout, run),
        writable: [layout.workspaceDir(uid), layout.artifactsDir(uid)],
        tmpDir: LocalSession.tmpDirFor(layout.runDir(uid)),
        hide: [layout.root],
        terminals: this.o.hostTerminals !== false && (await hostTerminalProbe()).ok,
      });
      env = sessionEnv(this.o.baseEnv, run.spec.env, layout.artifactsDir(uid));
    }
    entry.session = new LocalSession({
      uid,
      backend,
      workspace,
      env,
      queueSize: Math.min(sessionMode.queueSize ?? GatewayLimits.maxQueueSize, GatewayLimits.maxQueueSize),
      operationTimeoutMs: opTimeout > 0 ? opTimeout : GatewayLimits.maxOperationTimeoutMs,
      records: new ExecRecords(layout.execDir(uid)),
      log: (line) => this.o.log(`run ${run.metadata.namespace}/${run.metadata.name}: ${line}`),
      audit: (op) => this.o.logs.writeOperation(entry, op),
    });
  }

  private remoteContext(entry: RunEntry): RemoteRunContext {
    const run = entry.run;
    return {
      run,
      runDir: this.o.layout.runDir(uidOf(entry)),
      seedDir: sessionRoot(this.o.layout, run),
      log: (line) => this.o.log(`run ${run.metadata.namespace}/${run.metadata.name}: ${line}`),
    };
  }

  /** Whether the Run's workspace lives in a remote sandbox (its backend has a remote placement). */
  private isRemote(entry: RunEntry): boolean {
    return this.o.backends.get(entry.run.spec.runtime)?.remote !== undefined;
  }

  /** Deletes the Run's remote sandbox (if its backend has one); failures are logged — the sandbox's TTL is the last resort. */
  async releaseRemote(entry: RunEntry): Promise<void> {
    const remote = this.o.backends.get(entry.run.spec.runtime)?.remote;
    if (!remote) return;
    await remote.release(this.remoteContext(entry)).catch((err: unknown) => this.o.log(`run ${uidOf(entry)}: deleting its remote sandbox: ${(err as Error).message}`));
  }

  /** Sets a terminal phase once (the first one wins); the log ends after the session closed. */
  private async terminal(entry: RunEntry, phase: RunPhase, reason: RunReason, message: string): Promise<void> {
    await this.records.update(entry, (run) => markTerminal(run, entry, phase, reason, message));
    if (isTerminalPhase(entry.run.status?.phase)) {
      // Commands cancelled while the session closes still write their lines; the log ends after them.
      const closed = (entry.session?.close() ?? Promise.resolve()).finally(() => this.o.logs.end(entry));
      // A remote sandbox is deleted once its session has closed; termination ends only after that.
      if (this.isRemote(entry)) await closed.then(() => this.releaseRemote(entry));
      else void closed;
    }
  }

  // ---- termination ----------------------------------------------------------------------------

  /** Starts Drain or Immediate for a Run (idempotent; Immediate wins over a drain in progress). */
  requestTermination(entry: RunEntry, mode: TerminationMode): void {
    if (isTerminalPhase(entry.run.status?.phase)) return;
    if (entry.terminatingMode === 'Immediate') return;
    if (entry.terminatingMode === 'Drain' && mode === 'Drain') return;
    entry.terminatingMode = mode;
    const work = mode === 'Drain' ? this.finalize(entry) : this.end(entry, 'Cancelled', 'Cancelled', RunMessages.cancelled);
    entry.terminating = work.catch((err: unknown) => this.o.log(`terminating run ${entry.run.metadata.uid}: ${(err as Error).message}`));
  }

  /** Drain: no new operations, accepted ones finish, artifacts are exported (retried), then Succeeded. */
  private async finalize(entry: RunEntry): Promise<void> {
    const phase = entry.run.status?.phase;
    if (phase !== 'Ready' && phase !== 'Finalizing') {
      // Not Ready yet: wait for the preparation to settle (bounded by its own steps).
      while (!isTerminalPhase(entry.run.status?.phase) && entry.run.status?.phase !== 'Ready') {
        if (entry.terminatingMode !== 'Drain') return;
        await new Promise((r) => setTimeout(r, 50));
      }
      if (isTerminalPhase(entry.run.status?.phase)) return;
    }
    await this.records.update(entry, markFinalizing);
    await entry.session?.drain();
    for (let attempt = 1; ; attempt++) {
      if (entry.terminatingMode !== 'Drain') return;
      if (await this.exportOnce(entry, attempt)) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** One attempt to export the Run's artifacts and end it; false when it should be tried again. */
  private async exportOnce(entry: RunEntry, attempt: number): Promise<boolean> {
    const uid = uidOf(entry);
    const layout = this.o.layout;
    try {
      const session = entry.session;
      const remote = session && this.isRemote(entry) ? (session.config.workspace as RemoteWorkspace) : undefined;
      if (remote) {
        // The artifacts are in the sandbox: fetched into the Run's (emptied) artifacts dir, then exported as local ones.
        await fs.rm(layout.artifactsDir(uid), { recursive: true, force: true });
        await fs.mkdir(layout.artifactsDir(uid), { recursive: true, mode: 0o755 });
        await remote.downloadArtifacts(layout.artifactsDir(uid));
      }
      const refs = await exportArtifacts({ artifactsDir: layout.artifactsDir(uid), storeRoot: layout.artifactStoreRoot, namespace: entry.run.metadata.namespace ?? 'default', uid });
      if (entry.terminatingMode !== 'Drain') return true;
      await this.records.update(entry, (r) => {
        const st = (r.status ??= {});
        st.artifactStore = { driver: 'filesystem', filesystem: { path: layout.artifactStoreRoot } };
        if (refs.length > 0) {
          st.artifactRefs = refs;
          r.metadata.finalizers = [...new Set([...(r.metadata.finalizers ?? []), 'kruntimes.io/artifact-cleanup'])];
        }
      });
      await entry.session?.close();
      // Drain ends with the sandbox gone: a remote one is deleted before the Run says Succeeded.
      await this.releaseRemote(entry);
      await this.terminal(entry, 'Succeeded', 'SessionCompleted', RunMessages.finalized);
      return true;
    } catch (err) {
      if (err instanceof ArtifactInvalidError) {
        await entry.session?.close();
        await this.terminal(entry, 'Failed', 'ArtifactInvalid', err.message);
        return true;
      }
      this.o.log(`exporting artifacts of run ${uid} (attempt ${attempt}): ${(err as Error).message}`);
      if (attempt < 30) return false;
      await entry.session?.close();
      await this.terminal(entry, 'Failed', 'RuntimeError', `export artifacts: ${(err as Error).message}`);
      return true;
    }
  }

  /** Immediate or timeout: the phase changes first (new calls get 409), then everything is cancelled. */
  private async end(entry: RunEntry, phase: RunPhase, reason: RunReason, message: string): Promise<void> {
    const closing = entry.session?.close();
    await this.terminal(entry, phase, reason, message);
    await closing;
  }

  // ---- clocks -------------------------------------------------------------------------------

  /** One tick: ttlSecondsAfterFinished, then the total, idle and lease timeouts of each live Run. */
  checkTimeouts(): void {
    const now = Date.now();
    for (const entry of this.records.all()) {
      const run = entry.run;
      const phase = run.status?.phase;
      if (isTerminalPhase(phase) && run.spec.ttlSecondsAfterFinished !== undefined && !entry.deleting && run.status?.completionTime) {
        if (ttlElapsed(entry, now)) {
          entry.deleting = true;
          void this.o.deleteRun(run.metadata.namespace ?? 'default', run.metadata.name ?? '').catch((err: unknown) => this.o.log(`deleting finished run ${run.metadata.name}: ${(err as Error).message}`));
        }
        continue;
      }
      if (isTerminalPhase(phase) || entry.terminatingMode === 'Immediate') continue;
      const expired = expiryOf(entry, now);
      if (expired) this.expire(entry, expired);
    }
  }

  private expire(entry: RunEntry, message: string): void {
    entry.terminatingMode = 'Immediate';
    entry.terminating = this.end(entry, 'Timeout', 'Timeout', message).catch((err: unknown) => this.o.log(`timing out run: ${(err as Error).message}`));
  }

  // ---- recovery after a restart ----------------------------------------------------------------

  /** Picks a loaded Run up where the previous daemon left it. */
  async recover(entry: RunEntry): Promise<void> {
    const run = entry.run;
    const uid = uidOf(entry);
    const phase = run.status?.phase ?? 'Pending';
    const lost = await reapLostCommands(this.o.layout.execDir(uid), uid, this.o.log);
    if (lost.length > 0) {
      const ids = lost.map((r) => r.operationId).join(', ');
      this.o.log(`run ${run.metadata.namespace}/${run.metadata.name}: ${lost.length} command(s) died with the previous gateway daemon: ${ids}`);
      await this.records.update(entry, (r) => {
        setCondition(r, 'OperationsLost', 'True', 'ExecutionLost', `${lost.length} command(s) died with the previous gateway daemon: ${ids}`.slice(0, 1024));
      });
    }
    if (isTerminalPhase(phase)) {
      // A sandbox a crash left behind after its Run ended is deleted now (the backend's record names it).
      await this.releaseRemote(entry);
      return;
    }
    const wsExists = await fs.stat(this.o.layout.workspaceDir(uid)).then((s) => s.isDirectory(), () => false);
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
      try {
        await this.openSession(entry);
      } catch (err) {
        // A remote sandbox that is gone (deleted, expired) cannot be reattached.
        await this.terminal(entry, 'Failed', 'ExecutionLost', `runtime session not found after runtimed restart: ${(err as Error).message}`.slice(0, 4000));
        return;
      }
      await this.interruptLostRemote(entry, lost);
      await this.records.update(entry, (r) => {
        if (r.status?.endpoint) r.status.endpoint.url = this.endpointUrl(r);
      });
      if (phase === 'Finalizing' || termination === 'Drain') this.requestTermination(entry, 'Drain');
      return;
    }
    void this.advance(entry);
  }

  /** Remote commands that died with the previous daemon may still run in the sandbox: interrupted there. */
  private async interruptLostRemote(entry: RunEntry, lost: ExecRecord[]): Promise<void> {
    const ws = entry.session?.config.workspace;
    for (const rec of lost) {
      if (!rec.remote || !ws?.interruptRecorded) continue;
      await ws.interruptRecorded(rec).catch((err: unknown) => this.o.log(`run ${uidOf(entry)}: interrupting ${rec.operationId}: ${(err as Error).message}`));
    }
  }
}
