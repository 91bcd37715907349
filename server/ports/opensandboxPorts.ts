// Ports of local Runs on the OpenSandbox backend. Their sandbox is a container somewhere else,
// reached per port through OpenSandbox's endpoint for it (`GET /sandboxes/{id}/endpoints/{port}`,
// spec §2.5) with the headers the endpoint requires. The local gateway daemon resolves it — it
// holds the OpenSandbox connection and API key (connectionFile.ts); this process never reads them
// and gets only the endpoint's URL and headers — and this process serves it on 127.0.0.1 behind a
// loopback proxy (endpointProxy.ts), so the forward lives exactly as long as its client, as every
// other forward does. Listing is a `cat /proc/net/tcp*` through the session (sessionPorts.ts): the
// container's network is not this machine's.
import { CompanionError } from '../../protocol/companion';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { Run } from '../../protocol/kruntimes/run';
import type { PortListResult } from '../../protocol/ports';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { type EndpointTarget, startEndpointProxy } from './endpointProxy';
import type { OpenedForward, ReadySandbox } from './portSubstrate';
import { listPortsThroughSession } from './sessionPorts';

/** What the local provider lends for this: the daemon's resolution of a port's endpoint. */
export interface ResolvesPortEndpoints {
  portEndpoint(run: Run, port: number): Promise<EndpointTarget>;
}

export function resolvesPortEndpoints(provider: SandboxProvider): provider is SandboxProvider & ResolvesPortEndpoints {
  return typeof (provider as Partial<ResolvesPortEndpoints>).portEndpoint === 'function';
}

export class OpenSandboxPorts {
  constructor(
    private readonly provider: SandboxProvider,
    private readonly log: Logger,
  ) {}

  async list(sandbox: ReadySandbox, signal?: AbortSignal): Promise<PortListResult> {
    const connection = await this.provider.open(sandbox.ref);
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
    try {
      const ports = await listPortsThroughSession(client, sandbox.ref.name, signal ? { signal } : {});
      return { ports, note: `read from /proc/net/tcp in the OpenSandbox sandbox of ${sandbox.ref.name} (its own network, not this machine's)` };
    } finally {
      await client.close();
    }
  }

  async open(sandbox: ReadySandbox, port: number, localPort?: number): Promise<OpenedForward> {
    const { provider } = this;
    if (!resolvesPortEndpoints(provider)) throw new CompanionError('unavailable', `this server cannot resolve OpenSandbox endpoints, so port ${port} of sandbox ${sandbox.ref.name} cannot be forwarded`);
    const endpoint = await provider.portEndpoint(sandbox.run, port);
    const what = `port ${port} of sandbox ${sandbox.ref.name} through its OpenSandbox endpoint`;
    const proxy = await startEndpointProxy({ target: endpoint, ...(localPort !== undefined ? { localPort } : {}), what, log: this.log });
    return {
      via: 'proxy',
      localHost: proxy.host,
      localPort: proxy.port,
      message:
        `port ${port} of sandbox ${sandbox.ref.name} is forwarded to 127.0.0.1:${proxy.port} by a proxy on this machine to its OpenSandbox endpoint, ` +
        `which adds the headers the endpoint requires (HTTP and WebSocket; other TCP protocols do not pass)`,
      close: () => proxy.close(),
    };
  }
}
