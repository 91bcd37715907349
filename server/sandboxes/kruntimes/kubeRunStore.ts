// The kruntimes substrate's RunStore: Runs in one kubeconfig context's cluster, through the
// existing Kubernetes calls (clusterApi.ts: every refusal a SandboxError with the API server's
// words) and the reconnecting, 410-aware Run watch (runWatch.ts). One per context.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Run, RunMetadataPatch, TerminationMode } from '../../../protocol/kruntimes/run';
import type { Logger } from '../../log';
import type { RunStore, RunStoreWatch, RunStoreWatchHandlers } from '../runStore';
import type { ClusterApi } from './clusterApi';
import { RunWatch } from './runWatch';

export class KubeRunStore implements RunStore {
  constructor(
    private readonly config: KubeConfig,
    private readonly api: ClusterApi,
    private readonly log: Logger,
  ) {}

  get(namespace: string, name: string): Promise<Run> {
    return this.api.getRun(namespace, name);
  }

  /** A cluster lists one namespace at a time: the core passes the context's when the caller named none. */
  async list(namespace?: string): Promise<Run[]> {
    if (namespace === undefined) throw new Error('listing Runs on a cluster needs a namespace');
    return (await this.api.listRuns(namespace)).items;
  }

  create(namespace: string, body: Run): Promise<Run> {
    return this.api.createRun(namespace, body);
  }

  patchTermination(namespace: string, name: string, mode: TerminationMode): Promise<Run> {
    return this.api.patchTermination(namespace, name, mode);
  }

  patchMetadata(namespace: string, name: string, metadata: RunMetadataPatch): Promise<Run> {
    return this.api.patchMetadata(namespace, name, metadata);
  }

  delete(namespace: string, name: string): Promise<void> {
    return this.api.deleteRun(namespace, name);
  }

  /** Resolves once the first listing was reported (rejects when it fails); the stream reconnects after that. */
  async watch(query: { namespace: string; name?: string }, handlers: RunStoreWatchHandlers): Promise<RunStoreWatch> {
    const watch = new RunWatch(this.config, this.api, {
      namespace: query.namespace,
      ...(query.name !== undefined ? { name: query.name } : {}),
      log: this.log,
      ...(handlers.onError ? { onError: handlers.onError } : {}),
      onEvent: ({ type, run }) => handlers.onEvent({ type, run }),
    });
    try {
      await watch.start();
    } catch (err) {
      watch.stop();
      throw err;
    }
    return watch;
  }
}
