// Ports of kruntimes sandboxes. A Run runs in its assigned Runtime Pod (`status.assignedPod`), so
// a sandbox port is a port of that Pod: forwarded as `kubectl port-forward pod/<assignedPod>`
// does, through the API server (`pods/portforward`, client-node's WebSocket), by the same
// PortForwarder the provider reaches the Console with. A 403 is said in words, with the RBAC rule
// it needs. The listing is a `cat /proc/net/tcp*` through the session (sessionPorts.ts). This is
// an adapter over the kruntimes modules' exports (ClusterApi, PortForwarder, RunWatch): the client
// config of a context is the provider's own (`clusterOf`), so a provider built with another
// environment (another KUBECONFIG) is honoured and a changed kubeconfig is read again with it.
import type { KubeConfig } from '@kubernetes/client-node';
import { CompanionError } from '../../protocol/companion';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { isTerminalPhase } from '../../protocol/kruntimes/run';
import type { PortListResult } from '../../protocol/ports';
import type { Logger } from '../log';
import { SandboxError, type SandboxProvider } from '../sandboxes/provider';
import { ClusterApi } from '../sandboxes/kruntimes/clusterApi';
import { PortForwarder } from '../sandboxes/kruntimes/portForwarder';
import { RunWatch } from '../sandboxes/kruntimes/runWatch';
import type { OpenedForward, PortSubstrate, ReadySandbox } from './portSubstrate';
import { listPortsThroughSession } from './sessionPorts';

/** What a kruntimes provider lends its neighbours: the client config and API of one of its contexts. */
export interface KubeClusters {
  clusterOf(context?: string): { config: KubeConfig; api: ClusterApi };
}

/** Whether `provider` can lend its clusters (the kruntimes provider can). */
export function lendsClusters(provider: SandboxProvider): provider is SandboxProvider & KubeClusters {
  return typeof (provider as Partial<KubeClusters>).clusterOf === 'function';
}

/** A refusal of the port-forward upgrade, in words: who may not do what, and what would allow it. */
export function portForwardRefusal(err: unknown, where: { context: string; namespace: string; pod: string; port: number; localPort?: number | undefined }): Error {
  const text = err instanceof Error ? err.message : String(err);
  if (/\b403\b|forbidden/i.test(text)) {
    return new SandboxError(
      'cluster_forbidden',
      `the user of context ${where.context} may not port-forward to Pod ${where.namespace}/${where.pod} (the API server answered 403 Forbidden): ` +
        `forwarding a sandbox port needs RBAC "create" on "pods/portforward" in namespace ${where.namespace} — ask a cluster administrator for it`,
    );
  }
  if (/\b401\b/.test(text)) {
    return new SandboxError('cluster_unauthorized', `the cluster of context ${where.context} rejected its credentials (401) when forwarding port ${where.port}; refresh the kubeconfig user's token or certificate`);
  }
  if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
    // Named, as the endpoint proxy names it: the user frees that port or picks another.
    const which = where.localPort !== undefined ? `local port ${where.localPort}` : 'that local port';
    return new CompanionError('conflict', `${which} is already in use on 127.0.0.1; choose another one or leave it empty for a free one`, 'local_port_in_use');
  }
  return err instanceof Error ? err : new Error(text);
}

export class KruntimesPortSubstrate implements PortSubstrate {
  constructor(
    private readonly provider: SandboxProvider & KubeClusters,
    private readonly log: Logger,
  ) {}

  async list(sandbox: ReadySandbox, signal?: AbortSignal): Promise<PortListResult> {
    const connection = await this.provider.open(sandbox.ref);
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls, readRetryWindowMs: 2000 });
    try {
      const ports = await listPortsThroughSession(client, sandbox.ref.name, signal ? { signal } : {});
      return { ports, note: `read from /proc/net/tcp in sandbox ${sandbox.ref.name} (Pod ${sandbox.run.status?.assignedPod ?? 'unknown'})` };
    } finally {
      await client.close();
    }
  }

  async open(sandbox: ReadySandbox, port: number, localPort?: number): Promise<OpenedForward> {
    const { ref, run } = sandbox;
    const pod = run.status?.assignedPod;
    if (!pod) throw new SandboxError('run_state', `sandbox ${ref.name} has no assigned Pod yet (phase ${run.status?.phase ?? 'Pending'}); nothing to forward to`);
    const where = { context: ref.context, namespace: ref.namespace, pod, port, localPort };
    const forwarder = new PortForwarder(this.provider.clusterOf(ref.context).config, { namespace: ref.namespace, pod, port }, this.log);
    try {
      await forwarder.start(localPort ?? 0);
    } catch (err) {
      await forwarder.close();
      throw portForwardRefusal(err, where);
    }
    return {
      via: 'port-forward',
      localHost: '127.0.0.1',
      localPort: forwarder.localPort,
      message: `port ${port} of sandbox ${ref.name} is forwarded to 127.0.0.1:${forwarder.localPort} through the API server of context ${ref.context} (Pod ${ref.namespace}/${pod})`,
      close: () => forwarder.close(),
    };
  }

  watchEnd(sandbox: ReadySandbox, onEnd: (reason: string) => void): () => void {
    const { ref } = sandbox;
    const uid = sandbox.run.metadata.uid;
    const cluster = this.provider.clusterOf(ref.context);
    let ended = false;
    const end = (reason: string) => {
      if (ended) return;
      ended = true;
      watch.stop();
      onEnd(reason);
    };
    const watch = new RunWatch(cluster.config, cluster.api, {
      namespace: ref.namespace,
      name: ref.name,
      log: this.log,
      onEvent: ({ type, run }) => {
        if (uid !== undefined && run.metadata.uid !== uid) return;
        if (type === 'DELETED') end(`sandbox ${ref.name} was deleted`);
        else if (isTerminalPhase(run.status?.phase)) end(`sandbox ${ref.name} ended (${run.status?.phase ?? ''})`);
      },
    });
    watch.start().catch((err: unknown) => this.log.warn('cannot watch the Run of a forwarded port', { sandbox: ref.name, message: (err as Error).message }));
    return () => watch.stop();
  }
}
