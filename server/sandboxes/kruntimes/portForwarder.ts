// Reaching a Pod port from a laptop as `kubectl port-forward` does: a listener on an ephemeral
// 127.0.0.1 port whose every connection becomes one port-forward WebSocket through the API
// server (`@kubernetes/client-node` PortForward). Services resolve as the kruntimes SDKs do: the
// first Ready Pod behind the selector, sorted by name, with a named or numeric targetPort.
import net from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { type KubeConfig, PortForward, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../log';
import { SandboxError } from '../provider';
import type { ClusterApi } from './clusterApi';

export interface PodPort {
  namespace: string;
  pod: string;
  port: number;
}

interface ClosableSocket {
  close(): void;
  on?(event: 'close', listener: () => void): unknown;
  addEventListener?(event: 'close', listener: () => void): unknown;
}

function onSocketClose(ws: ClosableSocket, listener: () => void): void {
  if (typeof ws.on === 'function') ws.on('close', listener);
  else ws.addEventListener?.('close', listener);
}

const podReady = (pod: V1Pod): boolean =>
  pod.status?.phase === 'Running' && (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True') && !pod.metadata?.deletionTimestamp;

/** The first Ready Pod, by name, among `pods`; `preferred` first when it is Ready. */
export function pickReadyPod(pods: V1Pod[], preferred?: string): V1Pod | undefined {
  const ready = pods.filter(podReady).sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  return ready.find((p) => p.metadata?.name === preferred) ?? ready[0];
}

/** Resolves `service:servicePort` in `namespace` to a Ready Pod and its container port. */
export async function resolveServicePort(api: ClusterApi, namespace: string, service: string, servicePort: number): Promise<PodPort & { portName?: string }> {
  const svc = await api.getService(namespace, service);
  const ports = svc.spec?.ports ?? [];
  const port = ports.find((p) => p.port === servicePort) ?? (ports.length === 1 ? ports[0] : undefined);
  if (!port) throw new SandboxError('port_forward_failed', `Service ${namespace}/${service} has no port ${servicePort}`);
  const selector = Object.entries(svc.spec?.selector ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
  if (selector === '') throw new SandboxError('port_forward_failed', `Service ${namespace}/${service} has no selector to find its Pods`);
  const pod = pickReadyPod(await api.listPods(namespace, selector));
  if (!pod?.metadata?.name) throw new SandboxError('port_forward_failed', `Service ${namespace}/${service} has no Ready Pod (selector ${selector})`);
  const target = port.targetPort ?? port.port;
  let containerPort: number | undefined;
  if (typeof target === 'number' || /^\d+$/.test(String(target))) containerPort = Number(target);
  else {
    for (const c of pod.spec?.containers ?? []) containerPort ??= c.ports?.find((p) => p.name === target)?.containerPort;
  }
  if (containerPort === undefined) throw new SandboxError('port_forward_failed', `Pod ${namespace}/${pod.metadata.name} has no container port named ${String(target)}`);
  return { namespace, pod: pod.metadata.name, port: containerPort, ...(port.name ? { portName: port.name } : {}) };
}

/** A local listener forwarding to one Pod port; `start()` proves the forward works once. */
export class PortForwarder {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private readonly forward: PortForward;
  localPort = 0;

  constructor(
    config: KubeConfig,
    readonly target: PodPort,
    private readonly log?: Logger,
  ) {
    this.forward = new PortForward(config, true);
  }

  private async open(output: Writable, input: NodeJS.ReadableStream, errors: Writable): Promise<ClosableSocket> {
    const { namespace, pod, port } = this.target;
    try {
      return (await this.forward.portForward(namespace, pod, [port], output, errors, input as never)) as unknown as ClosableSocket;
    } catch (err) {
      const e = err as { message?: string; error?: { message?: string } };
      throw new SandboxError('port_forward_failed', `cannot port-forward to ${namespace}/${pod}:${port}: ${e.message ?? e.error?.message ?? String(err)} (forwarding needs "create" on pods/portforward)`);
    }
  }

  /** Listens on 127.0.0.1:`localPort` (a free port when 0) once one forward has been opened and closed. */
  async start(localPort = 0): Promise<number> {
    // One forward opened and closed before listening: a refusal is reported here, in words.
    const probeIn = new PassThrough();
    const probe = await this.open(new PassThrough(), probeIn, new PassThrough());
    probe.close();
    const server = net.createServer((socket) => this.connect(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(localPort, '127.0.0.1', () => resolve());
    });
    this.localPort = (server.address() as net.AddressInfo).port;
    return this.localPort;
  }

  private connect(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const errors = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        // The error channel's first frame is only the port number (stripped to nothing).
        if (chunk.length > 0) {
          this.log?.warn('port-forward error', { target: `${this.target.namespace}/${this.target.pod}:${this.target.port}`, message: chunk.toString('utf8') });
          socket.destroy();
        }
        cb();
      },
    });
    this.open(socket, socket, errors).then(
      (ws) => {
        onSocketClose(ws, () => socket.destroy());
        socket.on('close', () => ws.close());
        if (socket.destroyed) ws.close();
      },
      (err: Error) => {
        this.log?.warn('port-forward failed', { message: err.message });
        socket.destroy();
      },
    );
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
