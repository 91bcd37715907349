// The local provider: sandboxes are local Runs of the embedded runtime, served by the local
// gateway daemon (started on demand, found again after it restarts). Same Run shapes and same
// access API as kruntimes, so everything above this file is provider-neutral.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import { z } from 'zod';
import { CompanionError } from '../../protocol/companion';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { RunLogQuery } from '../../protocol/kruntimes/runtimedLog';
import { ndjsonLines } from '../../protocol/kruntimes/ndjsonLines';
import {
  checkTerminationTransition,
  isTerminalPhase,
  type Run,
  RunSchema,
  RunStateError,
  RunStateMessages,
  sessionEndpoint,
  type TerminationMode,
} from '../../protocol/kruntimes/run';
import {
  type DownloadedArtifact,
  LOCAL_CONTEXT,
  type ProviderInfo,
  type SandboxConnection,
  type SandboxCreateSpec,
  type SandboxRef,
  type SandboxSummary,
} from '../../protocol/sandboxes';
import { ensureGateway, findGateway, type GatewayHandle } from '../gateway/daemonClient';
import { LocalApiError, LocalGatewayClient } from '../gateway/localClient';
import { artifactFile } from '../local/artifactStore';
import { defaultBackends } from '../local/backends';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import type { Logger } from '../log';
import { copyVerified, unpackTarGz } from './artifactFiles';
import { SandboxError, type SandboxChange, type SandboxProvider, type WorkOptions } from './provider';
import { SandboxLeases } from './sandboxLeases';
import { sessionRunBody } from './sessionRunBody';
import { summarizeRun } from './summary';

/** A watch line carries one Run; far below this. */
const MAX_WATCH_LINE_BYTES = 1 << 20;
const WatchEventSchema = z.object({ type: z.enum(['ADDED', 'MODIFIED', 'DELETED']), object: RunSchema });

export interface LocalProviderOptions {
  stateDir?: string;
  /** How to start the daemon (default: this program with `gateway`). */
  gatewayCommand?: string[];
  log: Logger;
}

export class LocalSandboxProvider implements SandboxProvider {
  readonly kind = 'local' as const;
  private readonly stateDir: string;
  private handle: GatewayHandle | undefined;

  private readonly leases: SandboxLeases;

  constructor(private readonly options: LocalProviderOptions) {
    this.stateDir = options.stateDir ?? defaultStateDir();
    this.leases = new SandboxLeases(options.log);
  }

  dispose(): Promise<void> {
    return this.leases.dispose();
  }

  /** Cuts the Run watch's retry sleep short (set while it sleeps). */
  private wakeWatch: (() => void) | undefined;

  /** One find-or-start at a time: concurrent callers (a request and the watch) share it. */
  private finding: Promise<GatewayHandle> | undefined;

  /** The daemon's handle, starting it when none is healthy; refreshed after a restart. */
  private async gateway(fresh = false): Promise<{ handle: GatewayHandle; api: LocalGatewayClient }> {
    if (!this.handle || fresh) {
      this.finding ??= ensureGateway({ stateDir: this.stateDir, ...(this.options.gatewayCommand ? { command: this.options.gatewayCommand } : {}) }).finally(() => {
        this.finding = undefined;
      });
      this.handle = await this.finding;
      this.wakeWatch?.(); // a waiting Run watch follows the daemon now instead of after its backoff
    }
    return { handle: this.handle, api: new LocalGatewayClient(this.handle.url, this.handle.token) };
  }

  /** Runs a call against the daemon; if the daemon went away (restart), finds or starts it once more. */
  private async withApi<T>(fn: (api: LocalGatewayClient, handle: GatewayHandle) => Promise<T>): Promise<T> {
    const { api, handle } = await this.gateway();
    try {
      return await fn(api, handle);
    } catch (err) {
      if (err instanceof LocalApiError && err.status !== 401) throw err;
      this.options.log.info('local gateway unreachable or restarted; reconnecting', { error: (err as Error).message });
      const again = await this.gateway(true);
      return fn(again.api, again.handle);
    }
  }

  async info(): Promise<ProviderInfo> {
    const runtimes = await Promise.all(
      [...defaultBackends().values()].map(async (b) => {
        const probe = await b.probe();
        return {
          name: b.name,
          isolation: b.description,
          available: probe.ok,
          ...(probe.ok ? {} : { reason: probe.reason }),
        };
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
      const runs = await this.withApi((api) => api.listRuns());
      return [...new Set(['default', ...runs.map((r) => r.metadata.namespace ?? 'default')])].sort();
    } catch {
      return ['default'];
    }
  }

  async list(filter: { context?: string; namespace?: string }): Promise<SandboxSummary[]> {
    if (filter.context !== undefined && filter.context !== LOCAL_CONTEXT) return [];
    const runs = await this.withApi((api) => api.listRuns(filter.namespace));
    return runs.filter((r) => r.spec.mode.session !== undefined).map((r) => summarizeRun('local', LOCAL_CONTEXT, r));
  }

  async create(spec: SandboxCreateSpec, options: WorkOptions & { waitForReady: boolean; timeoutMs?: number }): Promise<SandboxSummary> {
    const body = sessionRunBody(spec);
    options.progress?.('creating', `creating a ${spec.runtime} sandbox`);
    const run = await this.withApi((api) => api.createRun(spec.namespace, body));
    const name = run.metadata.name ?? '';
    if (!options.waitForReady) return summarizeRun('local', LOCAL_CONTEXT, run);
    options.progress?.('starting', `waiting for ${name} to be Ready`);
    const ready = await this.waitFor(spec.namespace, name, ['Ready'], options.timeoutMs ?? 60_000, options.signal);
    if (ready.status?.phase !== 'Ready') {
      throw new SandboxError(
        'run_state',
        `${RunStateMessages.terminalBeforeReady}: ${name} is ${ready.status?.phase ?? 'unknown'}${ready.status?.message ? ` (${ready.status.message})` : ''}`,
      );
    }
    return summarizeRun('local', LOCAL_CONTEXT, ready);
  }

  private async waitFor(ns: string, name: string, phases: NonNullable<Run['status']>['phase'][], timeoutMs: number, signal?: AbortSignal): Promise<Run> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      signal?.throwIfAborted();
      const run = await this.withApi((api) => api.getRun(ns, name));
      const phase = run.status?.phase;
      if (phase && (phases.includes(phase) || isTerminalPhase(phase))) return run;
      if (Date.now() > deadline) {
        throw new SandboxError('sandbox_wait_timeout', `${ns}/${name} is still ${phase ?? 'Pending'} after ${Math.round(timeoutMs / 1000)} s`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private async getRun(ref: SandboxRef): Promise<Run> {
    if (ref.context !== LOCAL_CONTEXT) throw new SandboxError('sandbox_not_found', `the local provider has no context "${ref.context}"`);
    try {
      return await this.withApi((api) => api.getRun(ref.namespace, ref.name));
    } catch (err) {
      if (err instanceof LocalApiError && err.status === 404) {
        throw new SandboxError('sandbox_not_found', `no local sandbox ${ref.namespace}/${ref.name}`);
      }
      throw err;
    }
  }

  /** The daemon's log API; a follow is never retried (lines already delivered would come again). */
  async logs(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
    if (ref.context !== LOCAL_CONTEXT) throw new SandboxError('sandbox_not_found', `the local provider has no context "${ref.context}"`);
    const { api } = await this.gateway();
    try {
      await api.logs(ref.namespace, ref.name, query, onLine, signal);
    } catch (err) {
      if (err instanceof LocalApiError && err.status === 404) throw new SandboxError('sandbox_not_found', `no local sandbox ${ref.namespace}/${ref.name}`);
      if (err instanceof LocalApiError && (err.status === 400 || err.status === 422)) throw new CompanionError('invalid_params', err.message);
      throw err;
    }
  }

  async get(ref: SandboxRef): Promise<{ sandbox: SandboxSummary; run: Run }> {
    const run = await this.getRun(ref);
    return { sandbox: summarizeRun('local', LOCAL_CONTEXT, run), run };
  }

  async open(ref: SandboxRef): Promise<SandboxConnection> {
    const run = await this.getRun(ref);
    const endpoint = sessionEndpoint(run); // the SDK checks: session Run, Ready, sessions/<uid>
    const { handle } = await this.gateway();
    const client = new GatewayClient({ endpoint: { url: endpoint.url }, token: handle.token });
    try {
      const status = await client.status();
      const connection: SandboxConnection = { endpoint: { url: endpoint.url }, token: handle.token, ...(status.capabilities ? { capabilities: status.capabilities } : {}) };
      return this.leases.hold(ref, connection, run.spec.mode.session?.leaseTimeoutSeconds);
    } finally {
      await client.close();
    }
  }

  /** The Run's workspace directory under the daemon's state root, while the Run is Ready and the directory is ours. */
  async hostDirectory(ref: SandboxRef): Promise<string | undefined> {
    const run = await this.getRun(ref);
    const uid = run.metadata.uid;
    if (run.status?.phase !== 'Ready' || uid === undefined) return undefined;
    const dir = new StateLayout(this.stateDir).workspaceDir(uid);
    const st = await fsp.lstat(dir).catch(() => undefined);
    return st?.isDirectory() === true && st.uid === process.getuid?.() ? dir : undefined;
  }

  release(ref: SandboxRef): Promise<boolean> {
    return this.leases.release(ref);
  }

  async terminate(ref: SandboxRef, mode: TerminationMode, options: WorkOptions & { wait: boolean; timeoutMs?: number }): Promise<SandboxSummary> {
    const run = await this.getRun(ref);
    const rule = checkTerminationTransition(run.spec.termination?.mode, mode);
    if (!rule.ok) throw new RunStateError(rule.message, { namespace: ref.namespace, name: ref.name, phase: run.status?.phase });
    options.progress?.(mode === 'Drain' ? 'draining' : 'cancelling', `${mode === 'Drain' ? 'Draining' : 'Cancelling'} ${ref.name}`);
    if (!isTerminalPhase(run.status?.phase)) await this.withApi((api) => api.terminate(ref.namespace, ref.name, mode));
    if (!options.wait) return summarizeRun('local', LOCAL_CONTEXT, await this.getRun(ref));
    const done = await this.waitFor(ref.namespace, ref.name, [], options.timeoutMs ?? 10 * 60_000, options.signal);
    await this.leases.release(ref); // a lease of a Run that is no longer Ready stops by itself, too
    const expected = mode === 'Drain' ? 'Succeeded' : 'Cancelled';
    if (done.status?.phase !== expected) {
      const phase = done.status?.phase ?? 'unknown';
      throw new SandboxError(
        'run_state',
        `${mode === 'Drain' ? RunStateMessages.didNotClose(phase) : RunStateMessages.didNotCancel(phase)}${done.status?.message ? ` (${done.status.message})` : ''}`,
      );
    }
    return summarizeRun('local', LOCAL_CONTEXT, done);
  }

  async delete(ref: SandboxRef): Promise<void> {
    await this.getRun(ref);
    await this.leases.release(ref);
    await this.withApi((api) => api.deleteRun(ref.namespace, ref.name));
  }

  async downloadArtifacts(
    ref: SandboxRef,
    destination: string,
    options: WorkOptions & { names?: string[]; unpack: boolean },
  ): Promise<DownloadedArtifact[]> {
    if (!path.isAbsolute(destination)) throw new SandboxError('invalid_destination', `the destination must be an absolute path: ${destination}`);
    const run = await this.getRun(ref);
    const refs = (run.status?.artifactRefs ?? []).filter((a) => !options.names || options.names.includes(a.name));
    if (options.names) {
      const missing = options.names.filter((n) => !refs.some((a) => a.name === n));
      if (missing.length) throw new SandboxError('sandbox_not_found', `${ref.name} has no artifact named ${missing.join(', ')}`);
    }
    await fsp.mkdir(destination, { recursive: true });
    const storeRoot = new StateLayout(this.stateDir).artifactStoreRoot;
    const total = refs.reduce((n, a) => n + a.sizeBytes, 0);
    let done = 0;
    const results: DownloadedArtifact[] = [];
    for (const artifact of refs) {
      options.signal?.throwIfAborted();
      const source = artifactFile(storeRoot, artifact);
      const fileName = artifact.type === 'directory' ? `${artifact.name}.tar.gz` : artifact.name;
      const target = path.join(destination, fileName);
      if (path.dirname(target) !== path.resolve(destination)) {
        throw new SandboxError('artifact_invalid', `artifact name ${JSON.stringify(artifact.name)} is not a plain file name`);
      }
      options.progress?.('downloading', `${artifact.name} (${done} of ${total} bytes)`);
      await copyVerified(source, target, { digest: artifact.digest, sizeBytes: artifact.sizeBytes }, options.signal);
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
    const loop = async () => {
      let delay = 200;
      while (!controller.signal.aborted) {
        try {
          // Watching never starts a daemon (an editor that never uses sandboxes must not spawn
          // one): it follows the daemon this provider uses, or one another process started.
          const handle = (delay === 200 ? this.handle : undefined) ?? (await findGateway(this.stateDir));
          if (!handle) throw new Error('no local gateway is running yet');
          const res = await request(`${handle.url}/local/v1/runs?watch=true&timeoutSeconds=1800`, {
            headers: { authorization: `Bearer ${handle.token}` },
            signal: controller.signal,
            bodyTimeout: 0,
          });
          if (res.statusCode !== 200) throw new Error(`watch answered HTTP ${res.statusCode}`);
          delay = 200;
          report(true);
          for await (const line of ndjsonLines(res.body as AsyncIterable<Buffer>, MAX_WATCH_LINE_BYTES)) {
            const event = WatchEventSchema.safeParse(JSON.parse(line));
            if (event.success && event.data.object.spec.mode.session !== undefined) {
              listener({ sandbox: summarizeRun('local', LOCAL_CONTEXT, event.data.object), removed: event.data.type === 'DELETED' });
            }
          }
        } catch (err) {
          if (controller.signal.aborted) return;
          this.options.log.debug('local Run watch interrupted; retrying', { error: (err as Error).message, delayMs: delay });
        }
        if (controller.signal.aborted) return;
        if (reachable === true && !(await findGateway(this.stateDir).catch(() => undefined))) report(false);
        const woken = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), delay);
          this.wakeWatch = () => {
            clearTimeout(timer);
            resolve(true);
          };
        });
        this.wakeWatch = undefined;
        delay = woken ? 200 : Math.min(delay * 2, 5000);
      }
    };
    void loop();
    return () => controller.abort();
  }
}
