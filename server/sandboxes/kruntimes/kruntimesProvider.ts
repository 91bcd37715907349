// The kruntimes provider: sandboxes are session Runs on Kubernetes, reached through
// `@kubernetes/client-node` with the user's kubeconfig (contexts, namespaces, exec plugins,
// client certificates, in-cluster). It creates a Run — with the lifetime fields the cluster's Run
// CRD has (sessionLifetime.ts: no idle timeout on era D, a lease and a total timeout instead) —
// and watches it to Ready, opens it only after
// the SDK checks, reaches the Console or gateway through a port-forward that keeps the endpoint
// path, holds the session lease with `operations:ws` heartbeats, terminates with a merge patch
// of `spec.termination`, and downloads exported artifacts from runtimed's ArtifactService.
import type { KubeConfig } from '@kubernetes/client-node';
import { RUNTIMED_ARTIFACT_PORT } from '../../../protocol/kruntimes/artifactService';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import {
  checkTerminationTransition,
  isSessionRun,
  isTerminalPhase,
  type Run,
  RunStateError,
  RunStateMessages,
  sessionEndpoint,
  type TerminationMode,
} from '../../../protocol/kruntimes/run';
import type { DownloadedArtifact, ProviderInfo, SandboxConnection, SandboxCreateSpec, SandboxRef, SandboxSummary } from '../../../protocol/sandboxes';
import { sandboxKey } from '../../../protocol/sandboxes';
import type { Logger } from '../../log';
import { type SandboxChange, SandboxError, type SandboxProvider, type WorkOptions } from '../provider';
import { SandboxLeases } from '../sandboxLeases';
import { sessionRunBody } from '../sessionRunBody';
import { summarizeRun } from '../summary';
import { downloadArtifacts } from './artifactDownload';
import { ClusterApi } from './clusterApi';
import { reachEndpoint } from './endpointAccess';
import { bearerToken, configForContext, contextNamespace, kubeconfigStamp, loadKubeConfig, type LoadedKubeConfig } from './kubeconfig';
import { pickReadyPod, PortForwarder } from './portForwarder';
import { RunWatch } from './runWatch';
import { learnSessionFields, SESSION_FIELDS_CACHE_MS, type SessionFieldSupport, specForCluster } from './sessionLifetime';

export interface KruntimesProviderOptions {
  log: Logger;
  /** The environment whose KUBECONFIG / HOME / in-cluster variables are read (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Where the in-cluster service account files are mounted, below this folder (default: the root, as in a Pod). */
  serviceAccountRoot?: string;
}

interface ContextClients {
  config: KubeConfig;
  api: ClusterApi;
}

export class KruntimesSandboxProvider implements SandboxProvider {
  readonly kind = 'kruntimes' as const;
  private loaded: LoadedKubeConfig | undefined;
  private loadedStamp: string | undefined;
  private readonly clients = new Map<string, ContextClients>();
  private readonly forwarders = new Map<string, Promise<PortForwarder>>();
  private readonly watches = new Map<string, RunWatch>();
  private readonly listeners = new Set<(change: SandboxChange) => void>();
  /** Per context: which session lifetime fields its Run CRD has, and since when that is known. */
  private readonly sessionFields = new Map<string, { at: number; support: Promise<SessionFieldSupport> }>();

  private readonly leases: SandboxLeases;

  constructor(private readonly options: KruntimesProviderOptions) {
    this.leases = new SandboxLeases(options.log);
  }

  private get log(): Logger {
    return this.options.log;
  }

  private kubeconfig(): LoadedKubeConfig {
    const env = this.options.env ?? process.env;
    const stamp = kubeconfigStamp(env);
    if (stamp !== this.loadedStamp) {
      // First use, or the files changed (a context added, a token refreshed): read them again.
      this.loaded = loadKubeConfig(env, this.options.serviceAccountRoot);
      this.loadedStamp = stamp;
      this.clients.clear();
      this.sessionFields.clear();
    }
    if (!this.loaded) {
      throw new SandboxError('provider_unavailable', 'no kubeconfig found: set KUBECONFIG or create ~/.kube/config (or run inside a cluster) to use kruntimes sandboxes');
    }
    return this.loaded;
  }

  private contextName(context?: string): string {
    const kc = this.kubeconfig().config;
    const name = context ?? kc.getCurrentContext();
    if (!name) throw new SandboxError('provider_unavailable', `kubeconfig ${this.kubeconfig().source} has no current context; name one`);
    return name;
  }

  private context(context?: string): ContextClients & { name: string } {
    const name = this.contextName(context);
    let c = this.clients.get(name);
    if (!c) {
      const loaded = this.kubeconfig();
      let config: KubeConfig;
      try {
        config = loaded.inCluster ? loaded.config : configForContext(loaded.config, name);
      } catch (err) {
        throw new SandboxError('sandbox_not_found', (err as Error).message);
      }
      c = { config, api: new ClusterApi(config, name) };
      this.clients.set(name, c);
    }
    return { ...c, name };
  }

  private summarize(context: string, run: Run): SandboxSummary {
    return summarizeRun('kruntimes', context, run);
  }

  async info(): Promise<ProviderInfo> {
    let loaded: LoadedKubeConfig;
    try {
      loaded = this.kubeconfig();
    } catch (err) {
      return { kind: 'kruntimes', label: 'kruntimes', available: false, reason: (err as Error).message, contexts: [], runtimes: [] };
    }
    const names = loaded.inCluster ? [loaded.config.getCurrentContext()] : loaded.config.getContexts().map((c) => c.name);
    const contexts = await Promise.all(
      names.map(async (name) => {
        const namespace = contextNamespace(loaded.config, name);
        const base = { name, namespace, current: name === loaded.config.getCurrentContext() };
        try {
          const listed = await withTimeout(this.context(name).api.listNamespaces(), 3000);
          return { ...base, namespaces: listed.length > 0 ? listed : [namespace] };
        } catch {
          return { ...base, namespaces: [namespace] }; // no `list namespaces` right, or unreachable
        }
      }),
    );
    let runtimes: ProviderInfo['runtimes'] = [];
    let reason: string | undefined;
    try {
      const current = this.context();
      const list = await withTimeout(current.api.listRuntimes(contextNamespace(current.config, current.name)), 3000);
      runtimes = list.map((r) => ({ name: r.metadata.name, isolation: 'a kruntimes Runtime Pod', available: true }));
    } catch (err) {
      reason = (err as Error).message;
    }
    return {
      kind: 'kruntimes',
      label: `kruntimes (${loaded.source})`,
      available: reason === undefined,
      ...(reason !== undefined ? { reason } : {}),
      contexts,
      runtimes,
    };
  }

  async list(filter: { context?: string; namespace?: string }): Promise<SandboxSummary[]> {
    const ctx = this.context(filter.context);
    const namespace = filter.namespace ?? contextNamespace(ctx.config, ctx.name);
    const { items } = await ctx.api.listRuns(namespace);
    if (this.listeners.size > 0) this.follow(ctx.name, namespace);
    return items.filter(isSessionRun).map((r) => this.summarize(ctx.name, r));
  }

  async create(spec: SandboxCreateSpec, options: WorkOptions & { waitForReady: boolean; timeoutMs?: number }): Promise<SandboxSummary> {
    const ctx = this.context(spec.context);
    options.progress?.('creating', `creating a ${spec.runtime} session Run in ${ctx.name}/${spec.namespace}`);
    const support = await this.sessionFieldsOf(ctx, spec);
    const fitted = specForCluster(spec, support);
    for (const note of fitted.notes) this.log.info(note, { context: ctx.name, learnedFrom: support.learnedFrom });
    const created = await ctx.api.createRun(spec.namespace, sessionRunBody(fitted.spec));
    const name = created.metadata.name ?? '';
    if (!options.waitForReady) return this.summarize(ctx.name, created);
    const ready = await this.waitFor(ctx, spec.namespace, name, (r) => r.status?.phase === 'Ready', options.timeoutMs ?? 120_000, options);
    if (ready.status?.phase !== 'Ready') {
      throw new SandboxError('run_state', `${RunStateMessages.terminalBeforeReady}: ${name} is ${ready.status?.phase ?? 'unknown'}${ready.status?.message ? ` (${ready.status.message})` : ''}`);
    }
    return this.summarize(ctx.name, ready);
  }

  /** What the context's Run CRD has (cached; a failed answer is not kept). */
  private sessionFieldsOf(ctx: ContextClients & { name: string }, spec: SandboxCreateSpec): Promise<SessionFieldSupport> {
    const cached = this.sessionFields.get(ctx.name);
    if (cached && Date.now() - cached.at < SESSION_FIELDS_CACHE_MS) return cached.support;
    const support = learnSessionFields(ctx.api, spec.namespace, sessionRunBody(spec));
    const entry = { at: Date.now(), support };
    this.sessionFields.set(ctx.name, entry);
    support.catch(() => {
      if (this.sessionFields.get(ctx.name) === entry) this.sessionFields.delete(ctx.name);
    });
    return support;
  }

  /**
   * Follows one Run through a reconnecting watch until `done` holds or it is terminal, reporting
   * every phase it passes through.
   */
  private waitFor(ctx: ContextClients & { name: string }, namespace: string, name: string, done: (run: Run) => boolean, timeoutMs: number, options: WorkOptions): Promise<Run> {
    return new Promise<Run>((resolve, reject) => {
      let lastPhase: string | undefined;
      let lastError: Error | undefined;
      const finish = (fn: () => void): void => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        watch.stop();
        fn();
      };
      const watch = new RunWatch(ctx.config, ctx.api, {
        namespace,
        name,
        log: this.log,
        onError: (err) => (lastError = err),
        onEvent: ({ type, run }) => {
          if (type === 'DELETED') return finish(() => reject(new SandboxError('sandbox_not_found', `${namespace}/${name} was deleted while waiting for it`)));
          const phase = run.status?.phase ?? 'Pending';
          if (phase !== lastPhase) {
            lastPhase = phase;
            options.progress?.('waiting', `${name}: ${phase}${run.status?.message ? ` — ${run.status.message}` : ''}`);
          }
          if (done(run) || isTerminalPhase(run.status?.phase)) finish(() => resolve(run));
        },
      });
      const timer = setTimeout(
        () =>
          finish(() =>
            reject(new SandboxError('sandbox_wait_timeout', `${namespace}/${name} is still ${lastPhase ?? 'Pending'} after ${Math.round(timeoutMs / 1000)} s${lastError ? ` (watch: ${lastError.message})` : ''}`)),
          ),
        timeoutMs,
      );
      const onAbort = (): void => finish(() => reject(options.signal?.reason ?? new Error('aborted')));
      if (options.signal?.aborted) return onAbort();
      options.signal?.addEventListener('abort', onAbort, { once: true });
      watch.start().catch((err: unknown) => finish(() => reject(err)));
    });
  }

  async get(ref: SandboxRef): Promise<{ sandbox: SandboxSummary; run: Run }> {
    const ctx = this.context(ref.context);
    const run = await ctx.api.getRun(ref.namespace, ref.name);
    return { sandbox: this.summarize(ctx.name, run), run };
  }

  async open(ref: SandboxRef): Promise<SandboxConnection> {
    const ctx = this.context(ref.context);
    const run = await ctx.api.getRun(ref.namespace, ref.name);
    if (!isSessionRun(run)) throw new RunStateError(RunStateMessages.notSession, { namespace: ref.namespace, name: ref.name, phase: run.status?.phase });
    const endpoint = sessionEndpoint(run); // the SDK checks: Ready, a parseable URL, `sessions/<uid>`
    const token = await bearerToken(ctx.config);
    if (!token) {
      throw new SandboxError('cluster_unauthorized', `the user of context ${ctx.name} has no bearer token; the Runtime access API needs one (use a token, an exec plugin or a service account rather than a client certificate)`);
    }
    const reached = await reachEndpoint(endpoint, { api: ctx.api, config: ctx.config, inCluster: this.kubeconfig().inCluster, forward: (target) => this.forwarder(ctx, target) });
    const connection: SandboxConnection = { endpoint: { url: reached.url, ...(endpoint.caBundle ? { caBundle: endpoint.caBundle } : {}) }, token, ...(reached.tls ? { tls: reached.tls } : {}) };
    // One status call proves the token and the route (the gateway's informer may lag Ready briefly).
    const client = new GatewayClient({ endpoint: connection.endpoint, token, tls: connection.tls, readRetryWindowMs: 5000 });
    try {
      await client.status();
    } finally {
      await client.close();
    }
    return this.leases.hold(ref, connection, run.spec.mode.session?.leaseTimeoutSeconds);
  }

  /** A started forwarder to `target`, shared by every caller for the provider's lifetime. */
  private forwarder(ctx: ContextClients & { name: string }, target: { namespace: string; pod: string; port: number }): Promise<PortForwarder> {
    const key = `${ctx.name}/${target.namespace}/${target.pod}:${target.port}`;
    let f = this.forwarders.get(key);
    if (!f) {
      const pf = new PortForwarder(ctx.config, target, this.log);
      f = pf.start().then(() => pf);
      f.catch(() => this.forwarders.delete(key));
      this.forwarders.set(key, f);
    }
    return f;
  }

  release(ref: SandboxRef): Promise<boolean> {
    return this.leases.release(ref);
  }

  async terminate(ref: SandboxRef, mode: TerminationMode, options: WorkOptions & { wait: boolean; timeoutMs?: number }): Promise<SandboxSummary> {
    const ctx = this.context(ref.context);
    const run = await ctx.api.getRun(ref.namespace, ref.name);
    // Refused here before the API server refuses it (the CEL rule is the same).
    const rule = checkTerminationTransition(run.spec.termination?.mode, mode);
    if (!rule.ok) throw new RunStateError(rule.message, { namespace: ref.namespace, name: ref.name, phase: run.status?.phase });
    options.progress?.(mode === 'Drain' ? 'draining' : 'cancelling', `${mode === 'Drain' ? 'Draining' : 'Cancelling'} ${ref.name}`);
    let latest = run;
    if (run.spec.termination?.mode !== mode && !isTerminalPhase(run.status?.phase)) latest = await ctx.api.patchTermination(ref.namespace, ref.name, mode);
    if (!options.wait) return this.summarize(ctx.name, latest);
    const done = await this.waitFor(ctx, ref.namespace, ref.name, () => false, options.timeoutMs ?? 10 * 60_000, options);
    await this.leases.release(ref);
    const expected = mode === 'Drain' ? 'Succeeded' : 'Cancelled';
    if (done.status?.phase !== expected) {
      const phase = done.status?.phase ?? 'unknown';
      throw new SandboxError('run_state', `${mode === 'Drain' ? RunStateMessages.didNotClose(phase) : RunStateMessages.didNotCancel(phase)}${done.status?.message ? ` (${done.status.message})` : ''}`);
    }
    return this.summarize(ctx.name, done);
  }

  async delete(ref: SandboxRef): Promise<void> {
    const ctx = this.context(ref.context);
    await this.leases.release(ref);
    await ctx.api.deleteRun(ref.namespace, ref.name);
    // Finalizers keep a deleted Run until the controller cleaned up; wait (bounded) until it is gone.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      try {
        await ctx.api.getRun(ref.namespace, ref.name);
      } catch (err) {
        if (err instanceof SandboxError && err.code === 'sandbox_not_found') return;
        throw err;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    this.log.warn('Run still present 30 s after deletion (finalizers pending)', { sandbox: sandboxKey(ref) });
  }

  async downloadArtifacts(ref: SandboxRef, destination: string, options: WorkOptions & { names?: string[]; unpack: boolean }): Promise<DownloadedArtifact[]> {
    const ctx = this.context(ref.context);
    const run = await ctx.api.getRun(ref.namespace, ref.name);
    const refs = (run.status?.artifactRefs ?? []).filter((a) => !options.names || options.names.includes(a.name));
    if (options.names) {
      const missing = options.names.filter((n) => !refs.some((a) => a.name === n));
      if (missing.length) throw new SandboxError('sandbox_not_found', `${ref.name} has no artifact named ${missing.join(', ')}`);
    }
    if (refs.length === 0) return [];
    // As `krt artifact download`: runtimed's port 9093 on a Ready Pod of the Runtime, the assigned one first.
    const pods = await ctx.api.listPods(ref.namespace, `runtime=${run.spec.runtime}`);
    const pod = pickReadyPod(pods, run.status?.assignedPod);
    if (!pod?.metadata?.name) throw new SandboxError('provider_unavailable', `Runtime ${run.spec.runtime} has no Ready Pod in ${ref.namespace} to download artifacts from`);
    const target = { namespace: ref.namespace, pod: pod.metadata.name, port: RUNTIMED_ARTIFACT_PORT };
    const forwarder = this.kubeconfig().inCluster ? undefined : await this.forwarder(ctx, target);
    const address = forwarder ? `127.0.0.1:${forwarder.localPort}` : `${pod.status?.podIP ?? ''}:${RUNTIMED_ARTIFACT_PORT}`;
    return downloadArtifacts({
      address,
      namespace: ref.namespace,
      runName: ref.name,
      refs,
      destinationDir: destination,
      unpack: options.unpack,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.progress
        ? { onProgress: (p: { artifact: string; doneBytes: number; totalBytes: number }) => options.progress?.('downloading', `${p.artifact} (${p.doneBytes} of ${p.totalBytes} bytes)`) }
        : {}),
    });
  }

  watch(listener: (change: SandboxChange) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        for (const w of this.watches.values()) w.stop();
        this.watches.clear();
      }
    };
  }

  /** Starts (once) a watch of the session Runs of `namespace` in `context` for the listeners. */
  private follow(context: string, namespace: string): void {
    const key = `${context}/${namespace}`;
    if (this.watches.has(key)) return;
    const ctx = this.context(context);
    const w = new RunWatch(ctx.config, ctx.api, {
      namespace,
      log: this.log,
      onEvent: ({ type, run }) => {
        if (!isSessionRun(run)) return;
        for (const l of this.listeners) l({ sandbox: this.summarize(context, run), removed: type === 'DELETED' });
      },
    });
    this.watches.set(key, w);
    w.start().catch((err: unknown) => {
      this.watches.delete(key);
      this.log.warn('cannot watch Runs', { context, namespace, message: (err as Error).message });
    });
  }

  async dispose(): Promise<void> {
    for (const w of this.watches.values()) w.stop();
    this.watches.clear();
    await this.leases.dispose();
    const forwarders = await Promise.allSettled([...this.forwarders.values()]);
    this.forwarders.clear();
    await Promise.all(forwarders.map((f) => (f.status === 'fulfilled' ? f.value.close() : undefined)));
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e as Error);
      },
    );
  });
}
