// The provider core: the sandbox lifecycle of every substrate whose sandboxes are Runs, written once —
// create → wait for Ready (through the store's watch) → open → terminate → artifacts → delete —
// over a RunStore (runStore.ts) and a small RunSubstrate adapter for what truly differs (where the
// store of a context is, how an endpoint is reached, where artifact bytes come from, the provider-wide
// watch). The local runtime and kruntimes are such adapters; a substrate without Run objects implements
// SandboxProvider (provider.ts) directly instead, and the editor sees no difference.
import path from 'node:path';
import {
  type ArtifactRef,
  checkTerminationTransition,
  isTerminalPhase,
  type Run,
  type RunEndpoint,
  type RunMetadataPatch,
  RunStateError,
  RunStateMessages,
  sessionEndpoint,
  type TerminationMode,
} from '../../protocol/kruntimes/run';
import { type DownloadedArtifact, type ProviderInfo, type ProviderKind, sandboxKey, type SandboxConnection, type SandboxCreateSpec, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import { type CreateOptions, type SandboxChange, SandboxError, type SandboxProvider, type WorkOptions } from './provider';
import type { RunStore } from './runStore';
import { waitForRun, waitUntilGone } from './runWait';
import { SandboxLeases } from './sandboxLeases';
import { sessionRunBody } from './sessionRunBody';
import { summarizeRun } from './summary';

/** One context of a substrate: its name (as in every SandboxRef) and the store of its Runs. */
export interface RunPlace {
  context: string;
  store: RunStore;
  /** The namespace a list without one reads; undefined: every namespace the store has. */
  defaultNamespace?: string;
}

export type ArtifactFetchOptions = WorkOptions & { unpack: boolean };

/** What differs between substrates whose sandboxes are Runs; everything else is RunProvider's. */
export interface RunSubstrate {
  readonly kind: ProviderKind;
  readonly log: Logger;
  /** How long create waits for Ready when the caller sets no bound. */
  readonly readyTimeoutMs: number;
  /**
   * What a wait reports: every phase (a cluster Run may sit in Pending for minutes), or only that it
   * started (local Runs pass their phases in milliseconds; a line per phase would be noise).
   */
  readonly waitProgress: 'each phase' | 'start only';
  info(): Promise<ProviderInfo>;
  /** The place of `context` (the default one when undefined); undefined when the substrate has no such context. */
  place(context?: string): RunPlace | undefined;
  /** The progress line of a create. */
  creatingMessage(spec: SandboxCreateSpec, place: RunPlace): string;
  /** The spec as this place can honour it (e.g. a cluster without idle timeouts); unchanged when absent. */
  fitSpec?(spec: SandboxCreateSpec, place: RunPlace): Promise<SandboxCreateSpec>;
  /** Someone listed `namespace` (a provider-wide watch may start following it). */
  onListed?(place: RunPlace, namespace: string): void;
  /** Reaches a Ready session Run's endpoint and proves it answers; the core holds the lease after. */
  connect(place: RunPlace, run: Run, endpoint: RunEndpoint): Promise<SandboxConnection>;
  /** Stores `refs` (already checked against the Run) under the absolute `destination`. */
  fetchArtifacts(place: RunPlace, run: Run, refs: ArtifactRef[], destination: string, options: ArtifactFetchOptions): Promise<DownloadedArtifact[]>;
  /** The provider-wide watch (SandboxProvider.watch). */
  watch(listener: (change: SandboxChange) => void, onGateway?: (state: { reachable: boolean; message?: string }) => void): () => void;
  dispose(): Promise<void>;
}

/** How long a delete waits for a Run that finalizers keep. */
const DELETE_SETTLE_MS = 30_000;

export class RunProvider implements SandboxProvider {
  readonly kind: ProviderKind;
  private readonly leases: SandboxLeases;

  /** A substrate's optional capabilities (SandboxProvider.hostDirectory, .logs) are its subclass's methods. */
  constructor(private readonly substrate: RunSubstrate) {
    this.kind = substrate.kind;
    this.leases = new SandboxLeases(substrate.log);
  }

  protected place(context: string | undefined): RunPlace {
    const place = this.substrate.place(context);
    if (!place) throw new SandboxError('sandbox_not_found', `the ${this.kind} provider has no context "${context}"`);
    return place;
  }

  private summarize(place: RunPlace, run: Run): SandboxSummary {
    return summarizeRun(this.kind, place.context, run);
  }

  info(): Promise<ProviderInfo> {
    return this.substrate.info();
  }

  async list(filter: { context?: string; namespace?: string }): Promise<SandboxSummary[]> {
    const place = this.substrate.place(filter.context);
    if (!place) return [];
    const namespace = filter.namespace ?? place.defaultNamespace;
    const runs = await place.store.list(namespace);
    if (namespace !== undefined) this.substrate.onListed?.(place, namespace);
    return runs.filter((r) => r.spec.mode.session !== undefined).map((r) => this.summarize(place, r));
  }

  async create(spec: SandboxCreateSpec, options: CreateOptions): Promise<SandboxSummary> {
    const place = this.place(spec.context);
    options.progress?.('creating', this.substrate.creatingMessage(spec, place));
    const fitted = this.substrate.fitSpec ? await this.substrate.fitSpec(spec, place) : spec;
    const created = await place.store.create(spec.namespace, sessionRunBody(fitted, options.annotations));
    const name = created.metadata.name ?? '';
    if (!options.waitForReady) return this.summarize(place, created);
    if (this.substrate.waitProgress === 'start only') options.progress?.('starting', `waiting for ${name} to be Ready`);
    const ready = await this.wait(place, spec.namespace, name, (r) => r.status?.phase === 'Ready', options.timeoutMs ?? this.substrate.readyTimeoutMs, options);
    if (ready.status?.phase !== 'Ready') {
      throw new SandboxError('run_state', `${RunStateMessages.terminalBeforeReady}: ${name} is ${ready.status?.phase ?? 'unknown'}${statusNote(ready)}`);
    }
    return this.summarize(place, ready);
  }

  private wait(place: RunPlace, namespace: string, name: string, done: (run: Run) => boolean, timeoutMs: number, options: WorkOptions): Promise<Run> {
    const eachPhase = this.substrate.waitProgress === 'each phase';
    return waitForRun(place.store, namespace, name, {
      done,
      timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(eachPhase && options.progress
        ? { onPhase: (run: Run) => options.progress?.('waiting', `${name}: ${run.status?.phase ?? 'Pending'}${run.status?.message ? ` — ${run.status.message}` : ''}`) }
        : {}),
    });
  }

  async get(ref: SandboxRef): Promise<{ sandbox: SandboxSummary; run: Run }> {
    const place = this.place(ref.context);
    const run = await place.store.get(ref.namespace, ref.name);
    return { sandbox: this.summarize(place, run), run };
  }

  async open(ref: SandboxRef): Promise<SandboxConnection> {
    const place = this.place(ref.context);
    const run = await place.store.get(ref.namespace, ref.name);
    const endpoint = sessionEndpoint(run); // the SDK checks: a session Run, Ready, a parseable URL, `sessions/<uid>`
    const connection = await this.substrate.connect(place, run, endpoint);
    return this.leases.hold(ref, connection, run.spec.mode.session?.leaseTimeoutSeconds);
  }

  release(ref: SandboxRef): Promise<boolean> {
    return this.leases.release(ref);
  }

  async terminate(ref: SandboxRef, mode: TerminationMode, options: WorkOptions & { wait: boolean; timeoutMs?: number }): Promise<SandboxSummary> {
    const place = this.place(ref.context);
    const run = await place.store.get(ref.namespace, ref.name);
    // Refused here before the store refuses it (the rule is the CRD's CEL rule).
    const rule = checkTerminationTransition(run.spec.termination?.mode, mode);
    if (!rule.ok) throw new RunStateError(rule.message, { namespace: ref.namespace, name: ref.name, phase: run.status?.phase });
    options.progress?.(mode === 'Drain' ? 'draining' : 'cancelling', `${mode === 'Drain' ? 'Draining' : 'Cancelling'} ${ref.name}`);
    let latest = run;
    if (run.spec.termination?.mode !== mode && !isTerminalPhase(run.status?.phase)) latest = await place.store.patchTermination(ref.namespace, ref.name, mode);
    if (!options.wait) return this.summarize(place, latest);
    const done = await this.wait(place, ref.namespace, ref.name, () => false, options.timeoutMs ?? 10 * 60_000, options);
    await this.leases.release(ref); // a lease of a Run that is no longer Ready stops by itself, too
    const expected = mode === 'Drain' ? 'Succeeded' : 'Cancelled';
    if (done.status?.phase !== expected) {
      const phase = done.status?.phase ?? 'unknown';
      throw new SandboxError('run_state', `${mode === 'Drain' ? RunStateMessages.didNotClose(phase) : RunStateMessages.didNotCancel(phase)}${statusNote(done)}`);
    }
    return this.summarize(place, done);
  }

  async patchMetadata(ref: SandboxRef, metadata: RunMetadataPatch): Promise<SandboxSummary> {
    const place = this.place(ref.context);
    return this.summarize(place, await place.store.patchMetadata(ref.namespace, ref.name, metadata));
  }

  async delete(ref: SandboxRef): Promise<void> {
    const place = this.place(ref.context);
    await place.store.get(ref.namespace, ref.name);
    await this.leases.release(ref);
    await place.store.delete(ref.namespace, ref.name);
    // Finalizers may keep a deleted Run until its controller cleaned up; wait (bounded) until it is gone.
    if (!(await waitUntilGone(place.store, ref.namespace, ref.name, DELETE_SETTLE_MS))) {
      this.substrate.log.warn('Run still present 30 s after deletion (finalizers pending)', { sandbox: sandboxKey(ref) });
    }
  }

  async downloadArtifacts(ref: SandboxRef, destination: string, options: WorkOptions & { names?: string[]; unpack: boolean }): Promise<DownloadedArtifact[]> {
    if (!path.isAbsolute(destination)) throw new SandboxError('invalid_destination', `the destination must be an absolute path: ${destination}`);
    const place = this.place(ref.context);
    const run = await place.store.get(ref.namespace, ref.name);
    const refs = (run.status?.artifactRefs ?? []).filter((a) => !options.names || options.names.includes(a.name));
    if (options.names) {
      const missing = options.names.filter((n) => !refs.some((a) => a.name === n));
      if (missing.length) throw new SandboxError('sandbox_not_found', `${ref.name} has no artifact named ${missing.join(', ')}`);
    }
    const { names: _names, ...rest } = options;
    return this.substrate.fetchArtifacts(place, run, refs, destination, rest);
  }

  watch(listener: (change: SandboxChange) => void, onGateway?: (state: { reachable: boolean; message?: string }) => void): () => void {
    return this.substrate.watch(listener, onGateway);
  }

  async dispose(): Promise<void> {
    await this.leases.dispose();
    await this.substrate.dispose();
  }
}

function statusNote(run: Run): string {
  return run.status?.message ? ` (${run.status.message})` : '';
}
