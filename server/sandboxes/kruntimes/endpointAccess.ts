// From a Run's `status.endpoint` to a URL this process can call. Inside the cluster the endpoint
// is used as it is. Outside, its host is a cluster-local Service name
// (`<service>.<namespace>.svc[.cluster.local]`), so the call goes through a port-forward to the
// Service's first Ready Pod: scheme and host become `127.0.0.1:<port>`, the path stays. TLS is
// then verified against the Run's CA bundle under the Service's name; without a CA bundle the
// loopback hop is not verified, as the kruntimes SDKs do for an `https`/443 Service port.
import type { KubeConfig } from '@kubernetes/client-node';
import type { RunEndpoint } from '../../../protocol/kruntimes/run';
import { SandboxError } from '../provider';
import type { ClusterApi } from './clusterApi';
import { type PodPort, type PortForwarder, resolveServicePort } from './portForwarder';

export interface ReachedEndpoint {
  url: string;
  tls?: { servername?: string; rejectUnauthorized?: boolean };
}

export interface EndpointAccess {
  api: ClusterApi;
  config: KubeConfig;
  inCluster: boolean;
  forward: (target: PodPort) => Promise<PortForwarder>;
}

/** `<service>.<namespace>.svc[.cluster.local]` → its parts; undefined for any other host. */
export function clusterServiceOf(hostname: string): { service: string; namespace: string } | undefined {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?\.?$/.exec(hostname.toLowerCase());
  return m ? { service: m[1] as string, namespace: m[3] as string } : undefined;
}

export async function reachEndpoint(endpoint: RunEndpoint, access: EndpointAccess): Promise<ReachedEndpoint> {
  const url = new URL(endpoint.url);
  const svc = clusterServiceOf(url.hostname);
  if (access.inCluster || !svc) return { url: endpoint.url };
  const https = url.protocol === 'https:';
  const servicePort = url.port ? Number(url.port) : https ? 443 : 80;
  let target: PodPort & { portName?: string };
  try {
    target = await resolveServicePort(access.api, svc.namespace, svc.service, servicePort);
  } catch (err) {
    if (err instanceof SandboxError && err.code === 'sandbox_not_found') {
      throw new SandboxError('port_forward_failed', `cannot reach the Run's endpoint ${url.host}: ${err.message}`);
    }
    throw err;
  }
  const forwarder = await access.forward(target);
  const local = new URL(endpoint.url);
  local.hostname = '127.0.0.1';
  local.port = String(forwarder.localPort);
  if (!https) return { url: local.toString() };
  return endpoint.caBundle ? { url: local.toString(), tls: { servername: url.hostname } } : { url: local.toString(), tls: { rejectUnauthorized: false } };
}
