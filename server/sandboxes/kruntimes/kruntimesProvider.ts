// The kruntimes provider: sandboxes are session Runs on Kubernetes, reached through
// `@kubernetes/client-node` with the user's kubeconfig (contexts, namespaces, exec plugins,
// client certificates, in-cluster). The lifecycle is the provider core's (runProvider.ts) over one
// Kubernetes RunStore per context (kubeRunStore.ts); this file keeps what is the cluster's: it
// creates Runs of a Runtime the namespace has (runtimeCheck.ts) with the lifetime fields the
// cluster's Run CRD has (sessionLifetime.ts: no idle timeout on era D, a lease and a total timeout
// instead), reaches the Console or gateway through a port-forward that keeps the endpoint path,
// and downloads exported artifacts from runtimed's ArtifactService, and reads runtimed's log of a
// Run from its assigned Pod (runLogs.ts); the core holds the session lease and terminates with a
// merge patch.
import type { KubeConfig } from '@kubernetes/client-node';
import { RUNTIMED_ARTIFACT_PORT } from '../../../protocol/kruntimes/artifactService';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { type ArtifactRef, isSessionRun, type Run, type RunEndpoint } from '../../../protocol/kruntimes/run';
import type { RunLogQuery } from '../../../protocol/kruntimes/runtimedLog';
import type { DownloadedArtifact, ProviderInfo, SandboxConnection, SandboxCreateSpec, SandboxRef } from '../../../protocol/sandboxes';
import type { Logger } from '../../log';
import { type SandboxChange, SandboxError } from '../provider';
import { type ArtifactFetchOptions, RunProvider, type RunPlace, type RunSubstrate } from '../runProvider';
import { sessionRunBody } from '../sessionRunBody';
import { summarizeRun } from '../summary';
import { downloadArtifacts } from './artifactDownload';
import { ClusterApi } from './clusterApi';
import { reachEndpoint } from './endpointAccess';
import { KubeRunStore } from './kubeRunStore';
import { bearerToken, configForContext, contextNamespace, kubeconfigStamp, loadKubeConfig, type LoadedKubeConfig } from './kubeconfig';
import { pickReadyPod, PortForwarder } from './portForwarder';
import { readRunLog } from './runLogs';
import { RunWatch } from './runWatch';
import { checkRuntimeExists } from './runtimeCheck';
import { learnSessionFields, SESSION_FIELDS_CACHE_MS, type SessionFieldSupport, specForCluster } from './sessionLifetime';

export interface KruntimesProviderOptions {
  log: Logger;
  /** The environment whose KUBECONFIG / HOME / in-cluster variables are read (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Where the in-cluster service account files are mounted, below this folder (default: the root, as in a Pod). */
  serviceAccountRoot?: string;
}

/** One kubeconfig context: its client config, its API and the store of its Runs. */
interface ContextPlace extends RunPlace {
  config: KubeConfig;
  api: ClusterApi;
  defaultNamespace: string;
}

class KruntimesSubstrate implements RunSubstrate {
  readonly kind = 'kruntimes' as const;
  readonly readyTimeoutMs = 120_000;
  readonly waitProgress = 'each phase' as const;
  private loaded: LoadedKubeConfig | undefined;
  private loadedStamp: string | undefined;
  private readonly contexts = new Map<string, ContextPlace>();
  private readonly forwarders = new Map<string, Promise<PortForwarder>>();
  private readonly watches = new Map<string, RunWatch>();
  private readonly listeners = new Set<(change: SandboxChange) => void>();
  /** Per context: which session lifetime fields its Run CRD has, and since when that is known. */
  private readonly sessionFields = new Map<string, { at: number; support: Promise<SessionFieldSupport> }>();

  constructor(private readonly options: KruntimesProviderOptions) {}

  get log(): Logger {
    return this.options.log;
  }

  private kubeconfig(): LoadedKubeConfig {
    const env = this.options.env ?? process.env;
    const stamp = kubeconfigStamp(env);
    if (stamp !== this.loadedStamp) {
      // First use, or the files changed (a context added, a token refreshed): read them again.
      this.loaded = loadKubeConfig(env, this.options.serviceAccountRoot);
      this.loadedStamp = stamp;
      this.contexts.clear();
      this.sessionFields.clear();
    }
    if (!this.loaded) {
      throw new SandboxError('provider_unavailable', 'no kubeconfig found: set KUBECONFIG or create ~/.kube/config (or run inside a cluster) to use kruntimes sandboxes');
    }
    return this.loaded;
  }

  /** The place of `context` (the kubeconfig's current one when undefined); an unknown context is `sandbox_not_found`. */
  place(context?: string): ContextPlace {
    const loaded = this.kubeconfig();
    const name = context ?? loaded.config.getCurrentContext();
    if (!name) throw new SandboxError('provider_unavailable', `kubeconfig ${loaded.source} has no current context; name one`);
    let c = this.contexts.get(name);
    if (!c) {
      let config: KubeConfig;
      try {
        config = loaded.inCluster ? loaded.config : configForContext(loaded.config, name);
      } catch (err) {
        throw new SandboxError('sandbox_not_found', (err as Error).message);
      }
      const api = new ClusterApi(config, name);
      c = { context: name, config, api, store: new KubeRunStore(config, api, this.log), defaultNamespace: contextNamespace(config, name) };
      this.contexts.set(name, c);
    }
    return c;
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
          const listed = await withTimeout(this.place(name).api.listNamespaces(), 3000);
          return { ...base, namespaces: listed.length > 0 ? listed : [namespace] };
        } catch {
          return { ...base, namespaces: [namespace] }; // no `list namespaces` right, or unreachable
        }
      }),
    );
    let runtimes: ProviderInfo['runtimes'] = [];
    let reason: string | undefined;
    try {
      const current = this.place();
      const list = await withTimeout(current.api.listRuntimes(current.defaultNamespace), 3000);
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

  creatingMessage(spec: SandboxCreateSpec, place: RunPlace): string {
    return `creating a ${spec.runtime} session Run in ${place.context}/${spec.namespace}`;
  }

  /**
   * A Runtime the namespace lacks is refused before anything is created (runtimeCheck.ts); without idle
   * timeouts on this cluster (era D), a lease and a total timeout instead (sessionLifetime.ts).
   */
  async fitSpec(spec: SandboxCreateSpec, place: RunPlace): Promise<SandboxCreateSpec> {
    const ctx = this.place(place.context);
    await checkRuntimeExists(ctx.api, spec.namespace, spec.runtime, this.log);
    const support = await this.sessionFieldsOf(ctx, spec);
    const fitted = specForCluster(spec, support);
    for (const note of fitted.notes) this.log.info(note, { context: place.context, learnedFrom: support.learnedFrom });
    return fitted.spec;
  }

  /** What the context's Run CRD has (cached; a failed answer is not kept). */
  private sessionFieldsOf(ctx: ContextPlace, spec: SandboxCreateSpec): Promise<SessionFieldSupport> {
    const cached = this.sessionFields.get(ctx.context);
    if (cached && Date.now() - cached.at < SESSION_FIELDS_CACHE_MS) return cached.support;
    const support = learnSessionFields(ctx.api, spec.namespace, sessionRunBody(spec));
    const entry = { at: Date.now(), support };
    this.sessionFields.set(ctx.context, entry);
    support.catch(() => {
      if (this.sessionFields.get(ctx.context) === entry) this.sessionFields.delete(ctx.context);
    });
    return support;
  }

  /** The user's bearer token, the endpoint reached (directly in-cluster, else a port-forward), one status call. */
  async connect(place: RunPlace, _run: Run, endpoint: RunEndpoint): Promise<SandboxConnection> {
    const ctx = this.place(place.context);
    const token = await bearerToken(ctx.config);
    if (!token) {
      throw new SandboxError('cluster_unauthorized', `the user of context ${ctx.context} has no bearer token; the Runtime access API needs one (use a token, an exec plugin or a service account rather than a client certificate)`);
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
    return connection;
  }

  /** A started forwarder to `target`, shared by every caller for the provider's lifetime. */
  private forwarder(ctx: ContextPlace, target: { namespace: string; pod: string; port: number }): Promise<PortForwarder> {
    const key = `${ctx.context}/${target.namespace}/${target.pod}:${target.port}`;
    let f = this.forwarders.get(key);
    if (!f) {
      const pf = new PortForwarder(ctx.config, target, this.log);
      f = pf.start().then(() => pf);
      f.catch(() => this.forwarders.delete(key));
      this.forwarders.set(key, f);
    }
    return f;
  }

  /** As `krt artifact download`: runtimed's port 9093 on a Ready Pod of the Runtime, the assigned one first. */
  async fetchArtifacts(place: RunPlace, run: Run, refs: ArtifactRef[], destination: string, options: ArtifactFetchOptions): Promise<DownloadedArtifact[]> {
    if (refs.length === 0) return [];
    const ctx = this.place(place.context);
    const namespace = run.metadata.namespace ?? ctx.defaultNamespace;
    const pods = await ctx.api.listPods(namespace, `runtime=${run.spec.runtime}`);
    const pod = pickReadyPod(pods, run.status?.assignedPod);
    if (!pod?.metadata?.name) throw new SandboxError('provider_unavailable', `Runtime ${run.spec.runtime} has no Ready Pod in ${namespace} to download artifacts from`);
    const target = { namespace, pod: pod.metadata.name, port: RUNTIMED_ARTIFACT_PORT };
    const forwarder = this.kubeconfig().inCluster ? undefined : await this.forwarder(ctx, target);
    const address = forwarder ? `127.0.0.1:${forwarder.localPort}` : `${pod.status?.podIP ?? ''}:${RUNTIMED_ARTIFACT_PORT}`;
    return downloadArtifacts({
      address,
      namespace,
      runName: run.metadata.name ?? '',
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

  /** While someone watches, a namespace someone listed is followed (one watch per context and namespace). */
  onListed(place: RunPlace, namespace: string): void {
    if (this.listeners.size > 0) this.follow(place.context, namespace);
  }

  /** Starts (once) a watch of the session Runs of `namespace` in `context` for the listeners. */
  private follow(context: string, namespace: string): void {
    const key = `${context}/${namespace}`;
    if (this.watches.has(key)) return;
    const ctx = this.place(context);
    const w = new RunWatch(ctx.config, ctx.api, {
      namespace,
      log: this.log,
      onEvent: ({ type, run }) => {
        if (!isSessionRun(run)) return;
        for (const l of this.listeners) l({ sandbox: summarizeRun('kruntimes', context, run), removed: type === 'DELETED' });
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
    const forwarders = await Promise.allSettled([...this.forwarders.values()]);
    this.forwarders.clear();
    await Promise.all(forwarders.map((f) => (f.status === 'fulfilled' ? f.value.close() : undefined)));
  }
}

export class KruntimesSandboxProvider extends RunProvider {
  private readonly cluster: KruntimesSubstrate;

  constructor(options: KruntimesProviderOptions) {
    const cluster = new KruntimesSubstrate(options);
    super(cluster);
    this.cluster = cluster;
  }

  /**
   * The client config and API of `context` (the kubeconfig's current one when undefined), from the
   * kubeconfig this provider reads (its `env`), for what reaches the cluster beside it (port forwarding).
   */
  clusterOf(context?: string): { config: KubeConfig; api: ClusterApi } {
    const { config, api } = this.cluster.place(context);
    return { config, api };
  }

  /** runtimed's log of the sandbox's Run, from its assigned Pod, filtered to it (runLogs.ts; SandboxProvider.logs). */
  logs(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
    return readRunLog(this.cluster.place(ref.context), ref, query, onLine, signal);
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
