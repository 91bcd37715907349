// The local substrate's RunStore: Runs served by the local gateway daemon's Runs API (started on
// demand, found again after it restarts), and the one reconnecting reader of its Runs watch that both
// the provider core's waits and the provider-wide watch use. Kept apart from localProvider.ts so the
// daemon's finding, restarting and watching is in one place.
import type { Run, RunMetadataPatch, TerminationMode } from '../../protocol/kruntimes/run';
import { ensureGateway, type GatewayHandle } from '../gateway/daemonClient';
import { LocalApiError, LocalGatewayClient, type LocalRunEvent } from '../gateway/localClient';
import type { Logger } from '../log';
import { SandboxError } from './provider';
import type { RunStore, RunStoreWatch, RunStoreWatchHandlers } from './runStore';

/** The daemon one provider uses: found or started once at a time, found again after a restart. */
export class LocalDaemon {
  private current: GatewayHandle | undefined;
  /** One find-or-start at a time: concurrent callers (a request and the watch) share it. */
  private finding: Promise<GatewayHandle> | undefined;
  /** Cuts the provider-wide watch's retry sleep short (set while it sleeps). */
  wakeWatch: (() => void) | undefined;

  constructor(
    readonly stateDir: string,
    private readonly command: string[] | undefined,
    readonly log: Logger,
  ) {}

  /** The handle in use, if any (never starts a daemon). */
  get handle(): GatewayHandle | undefined {
    return this.current;
  }

  /** The daemon's handle, starting it when none is healthy; refreshed after a restart. */
  async gateway(fresh = false): Promise<{ handle: GatewayHandle; api: LocalGatewayClient }> {
    if (!this.current || fresh) {
      this.finding ??= ensureGateway({ stateDir: this.stateDir, ...(this.command ? { command: this.command } : {}) }).finally(() => {
        this.finding = undefined;
      });
      this.current = await this.finding;
      this.wakeWatch?.(); // a waiting Run watch follows the daemon now instead of after its backoff
    }
    return { handle: this.current, api: new LocalGatewayClient(this.current.url, this.current.token) };
  }

  /** Runs a call against the daemon; if the daemon went away (restart), finds or starts it once more. */
  async withApi<T>(fn: (api: LocalGatewayClient, handle: GatewayHandle) => Promise<T>): Promise<T> {
    const { api, handle } = await this.gateway();
    try {
      return await fn(api, handle);
    } catch (err) {
      if (err instanceof LocalApiError && err.status !== 401) throw err;
      this.log.info('local gateway unreachable or restarted; reconnecting', { error: (err as Error).message });
      const again = await this.gateway(true);
      return fn(again.api, again.handle);
    }
  }
}

export interface FollowRunsOptions {
  query: { namespace?: string; name?: string };
  signal: AbortSignal;
  /** The daemon for the next connect (`retry`: the previous stream failed or ended); undefined when none runs. */
  daemon: (retry: boolean) => Promise<GatewayHandle | undefined>;
  onEvent: (event: LocalRunEvent) => void;
  /** After each connect (the stream is open) or failed attempt. */
  onAttempt?: (err?: Error) => void;
  /** After a stream ended or failed, before the retry sleep. */
  afterStream?: () => Promise<void>;
  /** Lets a caller cut the retry sleep short (set while sleeping, unset after). */
  setWake?: (wake: (() => void) | undefined) => void;
  log: Logger;
}

/** Follows the daemon's Runs watch until `signal` aborts, reconnecting with a backoff (200 ms doubling to 5 s). */
export async function followRuns(o: FollowRunsOptions): Promise<void> {
  let delay = 200;
  let retry = false;
  while (!o.signal.aborted) {
    try {
      const handle = await o.daemon(retry);
      if (!handle) throw new Error('no local gateway is running yet');
      const events = await new LocalGatewayClient(handle.url, handle.token).watchRuns(o.query, o.signal);
      delay = 200;
      o.onAttempt?.();
      for await (const event of events) o.onEvent(event);
    } catch (err) {
      if (o.signal.aborted) return;
      o.onAttempt?.(err as Error);
      o.log.debug('local Run watch interrupted; retrying', { error: (err as Error).message, delayMs: delay });
    }
    if (o.signal.aborted) return;
    await o.afterStream?.();
    const woken = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), delay);
      o.setWake?.(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    o.setWake?.(undefined);
    delay = woken ? 200 : Math.min(delay * 2, 5000);
    retry = !woken;
  }
}

export class LocalRunStore implements RunStore {
  constructor(private readonly daemon: LocalDaemon) {}

  /** A 404 of the daemon as the provider's not-found; everything else as it came. */
  private async call<T>(namespace: string, name: string, fn: (api: LocalGatewayClient) => Promise<T>): Promise<T> {
    try {
      return await this.daemon.withApi(fn);
    } catch (err) {
      if (err instanceof LocalApiError && err.status === 404) throw new SandboxError('sandbox_not_found', `no local sandbox ${namespace}/${name}`);
      throw err;
    }
  }

  get(namespace: string, name: string): Promise<Run> {
    return this.call(namespace, name, (api) => api.getRun(namespace, name));
  }

  list(namespace?: string): Promise<Run[]> {
    return this.daemon.withApi((api) => api.listRuns(namespace));
  }

  create(namespace: string, body: Run): Promise<Run> {
    return this.daemon.withApi((api) => api.createRun(namespace, body));
  }

  patchTermination(namespace: string, name: string, mode: TerminationMode): Promise<Run> {
    return this.call(namespace, name, (api) => api.terminate(namespace, name, mode));
  }

  async patchMetadata(namespace: string, name: string, metadata: RunMetadataPatch): Promise<Run> {
    try {
      return await this.call(namespace, name, (api) => api.patchMetadata(namespace, name, metadata));
    } catch (err) {
      if (err instanceof LocalApiError && (err.status === 400 || err.status === 422)) throw new SandboxError('invalid_spec', err.message);
      throw err;
    }
  }

  async delete(namespace: string, name: string): Promise<void> {
    await this.call(namespace, name, (api) => api.deleteRun(namespace, name));
  }

  /** Resolves after the first attempt to connect (the reader keeps retrying after a failed one). */
  watch(query: { namespace: string; name?: string }, handlers: RunStoreWatchHandlers): Promise<RunStoreWatch> {
    const controller = new AbortController();
    const stop: RunStoreWatch = { stop: () => controller.abort() };
    return new Promise<RunStoreWatch>((resolve) => {
      void followRuns({
        query,
        signal: controller.signal,
        // A wait starts the daemon again when it went away, as any other call of this store does.
        daemon: async (retry) => (await this.daemon.gateway(retry)).handle,
        onEvent: (event) => handlers.onEvent({ type: event.type, run: event.object }),
        onAttempt: (err) => {
          if (err) handlers.onError?.(err);
          resolve(stop);
        },
        log: this.daemon.log,
      }).catch((err: unknown) => {
        handlers.onError?.(err as Error);
        resolve(stop);
      });
    });
  }
}
