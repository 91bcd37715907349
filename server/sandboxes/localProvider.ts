// The local provider: sandboxes are local Runs of the embedded runtime, served by the local
// gateway daemon (started on demand, found again after it restarts). Same Run shapes and same
// access API as kruntimes, so the lifecycle is the provider core's (runProvider.ts) over the
// daemon's Runs API (localRunStore.ts); this file keeps only what is local: the one context,
// the backends, the daemon's token, artifacts copied from the state root, the workspace as a
// host directory, runtimed's log, and the watch that notices the daemon stopping.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { CompanionError } from '../../protocol/companion';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { RunLogQuery } from '../../protocol/kruntimes/runtimedLog';
import type { ArtifactRef, Run, RunEndpoint } from '../../protocol/kruntimes/run';
import { type DownloadedArtifact, LOCAL_CONTEXT, type ProviderInfo, type SandboxConnection, type SandboxCreateSpec, type SandboxRef } from '../../protocol/sandboxes';
import { findGateway } from '../gateway/daemonClient';
import { LocalApiError, type RunPortEndpoint } from '../gateway/localClient';
import { artifactFile } from '../local/artifactStore';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import type { Logger } from '../log';
import { copyVerified, unpackTarGz } from './artifactFiles';
import { localBackends } from './localBackends';
import { followRuns, LocalDaemon, LocalRunStore } from './localRunStore';
import { writeConnectionFile } from './opensandbox/connectionFile';
import { OPENSANDBOX_BACKEND } from './opensandbox/runSettings';
import { credentialEnvVar } from '../../protocol/opensandboxCredentials';
import { SandboxError, type SandboxChange } from './provider';
import { type ArtifactFetchOptions, RunProvider, type RunPlace, type RunSubstrate } from './runProvider';
import { summarizeRun } from './summary';

export interface LocalProviderOptions {
  stateDir?: string;
  /** How to start the daemon (default: this program with `gateway`). */
  gatewayCommand?: string[];
  log: Logger;
  /** Where a CLI finds OpenSandbox credential values (SANDBOX_SESSIONS_CREDENTIAL_<NAME>; default process.env). */
  credentialEnv?: NodeJS.ProcessEnv;
}

class LocalSubstrate implements RunSubstrate {
  readonly kind = 'local' as const;
  readonly readyTimeoutMs = 60_000;
  readonly waitProgress = 'start only' as const;
  readonly log: Logger;
  private readonly daemon: LocalDaemon;
  private readonly local: RunPlace;
  private readonly credentialEnv: NodeJS.ProcessEnv;
  /** OpenSandbox credential values the editor handed over (its secret storage): memory only. */
  private credentialValues = new Map<string, string>();

  constructor(options: LocalProviderOptions) {
    this.log = options.log;
    this.credentialEnv = options.credentialEnv ?? process.env;
    this.daemon = new LocalDaemon(options.stateDir ?? defaultStateDir(), options.gatewayCommand, options.log);
    this.local = { context: LOCAL_CONTEXT, store: new LocalRunStore(this.daemon) };
  }

  place(context?: string): RunPlace | undefined {
    return context === undefined || context === LOCAL_CONTEXT ? this.local : undefined;
  }

  /**
   * An OpenSandbox Run with credential bindings: the values of its secrets that this process has (the editor's, else
   * SANDBOX_SESSIONS_CREDENTIAL_<NAME>) go to the daemon in memory first (secretsRoute.ts). A secret nobody has is
   * refused at admission by the daemon, which may still find it in its own environment.
   */
  async fitSpec(spec: SandboxCreateSpec): Promise<SandboxCreateSpec> {
    const bindings = spec.runtime === OPENSANDBOX_BACKEND ? (spec.opensandbox?.credentialBindings ?? []) : [];
    const values: Record<string, string> = {};
    for (const b of bindings) {
      const value = this.credentialValues.get(b.secret) ?? this.credentialEnv[credentialEnvVar(b.secret)];
      if (value) values[b.secret] = value;
    }
    if (Object.keys(values).length > 0) await (await this.daemon.gateway()).api.putSecrets(values);
    return spec;
  }

  creatingMessage(spec: SandboxCreateSpec): string {
    return `creating a ${spec.runtime} sandbox`;
  }

  async info(): Promise<ProviderInfo> {
    const runtimes = await Promise.all(
      [...localBackends(this.daemon.stateDir).values()].map(async (b) => {
        const probe = await b.probe();
        return { name: b.name, isolation: b.description, available: probe.ok, ...(probe.ok ? {} : { reason: probe.reason }) };
      }),
    );
    return {
      kind: 'local',
      label: 'Local',
      available: runtimes.some((r) => r.available),
      contexts: [{ name: LOCAL_CONTEXT, namespaces: await this.namespaces() }],
      runtimes,
    };
  }

  private async namespaces(): Promise<string[]> {
    try {
      const runs = await this.local.store.list();
      return [...new Set(['default', ...runs.map((r) => r.metadata.namespace ?? 'default')])].sort();
    } catch {
      return ['default'];
    }
  }

  /** The daemon's token; one status call proves the route and learns the gateway's capabilities. */
  async connect(_place: RunPlace, _run: Run, endpoint: RunEndpoint): Promise<SandboxConnection> {
    const { handle } = await this.daemon.gateway();
    const client = new GatewayClient({ endpoint: { url: endpoint.url }, token: handle.token });
    try {
      const status = await client.status();
      return { endpoint: { url: endpoint.url }, token: handle.token, ...(status.capabilities ? { capabilities: status.capabilities } : {}) };
    } finally {
      await client.close();
    }
  }

  /** Whether the backend `runtime` keeps its sandboxes on this machine (not a remote one such as OpenSandbox). */
  keepsHere(runtime: string): boolean {
    return !localBackends(this.daemon.stateDir).get(runtime)?.remote;
  }

  /** The Run's workspace directory under the daemon's state root, while the Run is Ready (or Finalizing, to read) and the directory is ours. */
  async hostDirectory(run: Run, access: 'read' | 'write' = 'write'): Promise<string | undefined> {
    const uid = run.metadata.uid;
    const phase = run.status?.phase;
    if (!(phase === 'Ready' || (access === 'read' && phase === 'Finalizing')) || uid === undefined) return undefined;
    // A remote backend's workspace lives in its sandbox; the Run's host directory is only its seed.
    if (!this.keepsHere(run.spec.runtime)) return undefined;
    const dir = new StateLayout(this.daemon.stateDir).workspaceDir(uid);
    const st = await fsp.lstat(dir).catch(() => undefined);
    return st?.isDirectory() === true && st.uid === process.getuid?.() ? dir : undefined;
  }

  keptSessionTreesDirectory(): string {
    return new StateLayout(this.daemon.stateDir).keptSessionTreesDir;
  }

  /** The daemon's log API; a follow is never retried (lines already delivered would come again). */
  async logs(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
    const { api } = await this.daemon.gateway();
    try {
      await api.logs(ref.namespace, ref.name, query, onLine, signal);
    } catch (err) {
      if (err instanceof LocalApiError && err.status === 404) throw new SandboxError('sandbox_not_found', `no local sandbox ${ref.namespace}/${ref.name}`);
      if (err instanceof LocalApiError && (err.status === 400 || err.status === 422)) throw new CompanionError('invalid_params', err.message);
      throw err;
    }
  }

  /** Copies each exported artifact out of the daemon's artifact store, verifying its digest and size. */
  async fetchArtifacts(_place: RunPlace, _run: Run, refs: ArtifactRef[], destination: string, options: ArtifactFetchOptions): Promise<DownloadedArtifact[]> {
    await fsp.mkdir(destination, { recursive: true });
    const storeRoot = new StateLayout(this.daemon.stateDir).artifactStoreRoot;
    const total = refs.reduce((n, a) => n + a.sizeBytes, 0);
    let done = 0;
    const results: DownloadedArtifact[] = [];
    for (const artifact of refs) {
      options.signal?.throwIfAborted();
      const fileName = artifact.type === 'directory' ? `${artifact.name}.tar.gz` : artifact.name;
      const target = path.join(destination, fileName);
      if (path.dirname(target) !== path.resolve(destination)) {
        throw new SandboxError('artifact_invalid', `artifact name ${JSON.stringify(artifact.name)} is not a plain file name`);
      }
      options.progress?.('downloading', `${artifact.name} (${done} of ${total} bytes)`);
      await copyVerified(artifactFile(storeRoot, artifact), target, { digest: artifact.digest, sizeBytes: artifact.sizeBytes }, options.signal);
      done += artifact.sizeBytes;
      const result: DownloadedArtifact = { name: artifact.name, path: target, type: artifact.type, sizeBytes: artifact.sizeBytes, digest: artifact.digest };
      if (options.unpack && artifact.type === 'directory') {
        const dir = path.join(destination, artifact.name);
        await unpackTarGz(target, dir, options.signal);
        result.unpackedTo = dir;
      }
      results.push(result);
    }
    return results;
  }

  watch(listener: (change: SandboxChange) => void, onGateway?: (state: { reachable: boolean; message?: string }) => void): () => void {
    const controller = new AbortController();
    // The watch is a long-lived connection to the daemon: when it ends and no healthy daemon is
    // there, the daemon has stopped — told at once (not on the next command), and once.
    let reachable: boolean | undefined;
    const report = (now: boolean) => {
      if (reachable === now || (reachable === undefined && !now)) return;
      reachable = now;
      onGateway?.(now ? { reachable } : { reachable, message: 'the local gateway daemon stopped; the next command or file operation starts it again' });
    };
    void followRuns({
      query: {},
      signal: controller.signal,
      // Watching never starts a daemon (an editor that never uses sandboxes must not spawn
      // one): it follows the daemon this provider uses, or one another process started.
      daemon: async (retry) => (retry ? undefined : this.daemon.handle) ?? (await findGateway(this.daemon.stateDir)),
      onEvent: (event) => {
        if (event.object.spec.mode.session !== undefined) {
          listener({ sandbox: summarizeRun('local', LOCAL_CONTEXT, event.object), removed: event.type === 'DELETED' });
        }
      },
      onAttempt: (err) => err === undefined && report(true),
      afterStream: async () => {
        if (reachable === true && !(await findGateway(this.daemon.stateDir).catch(() => undefined))) report(false);
      },
      setWake: (wake) => (this.daemon.wakeWatch = wake),
      log: this.log,
    });
    return () => controller.abort();
  }

  /** Where a port of a remote (OpenSandbox) Run's sandbox is reached, resolved by the daemon, which holds the connection. */
  async portEndpoint(run: Run, port: number): Promise<RunPortEndpoint> {
    const ns = run.metadata.namespace ?? 'default';
    const name = run.metadata.name ?? '';
    try {
      return await this.daemon.withApi((api) => api.portEndpoint(ns, name, port));
    } catch (err) {
      if (!(err instanceof LocalApiError)) throw err;
      if (err.status === 404) throw new SandboxError('sandbox_not_found', `no local sandbox ${ns}/${name}: ${err.message}`);
      if (err.status === 409) throw new CompanionError('not_ready', err.message, 'run_state');
      throw new CompanionError('unavailable', `cannot resolve where port ${port} of sandbox ${name} is reached: ${err.message}`, 'endpoint_unavailable');
    }
  }

  /** Where the daemon finds OpenSandbox (connectionFile.ts): written 0600 in its state root; no domain removes it. */
  async configureOpenSandbox(conn: { domain?: string; apiKey?: string; credentials?: Record<string, string> }): Promise<void> {
    // Credentials alone (an editor without a domain setting, the daemon using its environment) leave the file be.
    if (conn.domain !== undefined || conn.apiKey !== undefined || conn.credentials === undefined) await writeConnectionFile(this.daemon.stateDir, { domain: conn.domain, apiKey: conn.apiKey });
    // Credential values stay in memory (never in that file): sent to the daemon with each create that needs them.
    if (conn.credentials) this.credentialValues = new Map(Object.entries(conn.credentials));
  }

  async dispose(): Promise<void> {
    // Nothing kept running besides the leases (the core's) and the watches (stopped by their callers).
  }
}

export class LocalSandboxProvider extends RunProvider {
  private readonly local: LocalSubstrate;

  constructor(options: LocalProviderOptions) {
    const local = new LocalSubstrate(options);
    super(local);
    this.local = local;
  }

  /** The Run's workspace directory under the daemon's state root, while the Run is Ready (or Finalizing, for `access` 'read') and the directory is ours. */
  async hostDirectory(ref: SandboxRef, access: 'read' | 'write' = 'write'): Promise<string | undefined> {
    return this.local.hostDirectory((await this.get(ref)).run, access);
  }

  /** The process and bubblewrap backends keep their sandboxes here; a remote backend (OpenSandbox) does not. */
  keepsHere(spec: Pick<SandboxCreateSpec, 'runtime'>): boolean {
    return this.local.keepsHere(spec.runtime);
  }

  /** The process and bubblewrap backends run commands in the Run's workspace directory (bubblewrap binds it at that path). */
  readonly hostDirectoryIsCommandRoot = true;

  /** Beside the Runs' directories, under the daemon's state root (SandboxProvider.keptSessionTreesDirectory). */
  keptSessionTreesDirectory(): string {
    return this.local.keptSessionTreesDirectory();
  }

  /** Where the local gateway daemon finds OpenSandbox (its connection file; the API key never goes elsewhere). */
  configureOpenSandbox(conn: { domain?: string; apiKey?: string; credentials?: Record<string, string> }): Promise<void> {
    return this.local.configureOpenSandbox(conn);
  }

  /** Where a port of a remote (OpenSandbox) sandbox is reached (`…/runs/{name}/endpoints/{port}` of the daemon). */
  portEndpoint(run: Run, port: number): Promise<RunPortEndpoint> {
    return this.local.portEndpoint(run, port);
  }

  /** runtimed's log of the sandbox's Run, read like `kubectl logs` (SandboxProvider.logs). */
  async logs(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
    this.place(ref.context); // a context the local provider does not have is `sandbox_not_found`
    return this.local.logs(ref, query, onLine, signal);
  }
}
