// The MCP server's data-plane clients: one GatewayClient per sandbox, opened from the provider's
// `open()` (the same endpoint, token and session lease the editor gets from `sandboxes/open`), so
// commands and file changes an agent makes go through the one session client into the sandbox's
// audit trail. Closed when the sandbox is closed or the server stops (which lets go of the lease).
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { type ProviderKind, type SandboxRef, sandboxKey } from '../../protocol/sandboxes';
import type { SandboxProvider } from '../sandboxes/provider';

export class SandboxClients {
  private readonly clients = new Map<string, Promise<GatewayClient>>();

  constructor(private readonly provider: (kind: ProviderKind) => SandboxProvider) {}

  get(ref: SandboxRef): Promise<GatewayClient> {
    const key = sandboxKey(ref);
    let client = this.clients.get(key);
    if (!client) {
      client = this.provider(ref.provider)
        .open(ref)
        .then((c) => new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls, readRetryWindowMs: 2000 }));
      client.catch(() => this.clients.delete(key));
      this.clients.set(key, client);
    }
    return client;
  }

  /** Closes the sandbox's client and lets go of its lease (after the sandbox closed, or to reopen it). */
  async forget(ref: SandboxRef): Promise<void> {
    const key = sandboxKey(ref);
    const client = this.clients.get(key);
    this.clients.delete(key);
    await (await client?.catch(() => undefined))?.close();
    await this.provider(ref.provider).release(ref).catch(() => false);
  }

  async dispose(): Promise<void> {
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(all.map(async (c) => (await c.catch(() => undefined))?.close()));
  }
}
