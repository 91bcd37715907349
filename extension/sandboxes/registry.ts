// The extension's view of sandboxes: summaries kept current by `sandboxes/changed`
// notifications, and one connection per sandbox key (the `sandbox:` URI authority). Keys encode
// the whole sandbox reference, so a folder opened before a reload resolves again afterwards.
import * as vscode from 'vscode';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { GatewayCapabilities } from '../../protocol/kruntimes/gateway';
import type { RunPhase } from '../../protocol/kruntimes/run';
import { parseSandboxKey, SandboxChangedSchema, sandboxKey, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';
import { GatewayChangedSchema } from '../../protocol/companion';
import type { SandboxFileReads } from '../fs/companionFileReads';
import type { LiveSandboxConnection } from './connection';
import { OwnOperations, OwnOperationsClient } from './ownOperations';
import { CLOSED_PHASES } from './errorText';

class RegistryConnection implements LiveSandboxConnection {
  private current: Promise<{ client: GatewayClient; capabilities: GatewayCapabilities | undefined }> | undefined;
  /** The client `current` resolved to (undefined while a new one is being opened). */
  private resolved: GatewayClient | undefined;
  private caps: GatewayCapabilities | undefined;
  private leased = false;

  constructor(
    readonly key: string,
    readonly ref: SandboxRef,
    private readonly registry: SandboxRegistry,
  ) {}

  get label(): string {
    return this.ref.name;
  }

  /** True while this window's connection is open and the companion server holds the sandbox's lease for it. */
  get holdsLease(): boolean {
    return this.current !== undefined && this.leased;
  }

  client(): Promise<GatewayClient> {
    if (!this.current) {
      const opening = this.registry.companion.request('sandboxes/open', { ref: this.ref }).then((c) => {
        // Reads may meet informer lag right after Ready; retry them briefly.
        // Its mutations are recorded, so this window's own lines in the sandbox's log are known (LiveSandboxChanges).
        const client = new OwnOperationsClient({ endpoint: c.endpoint, token: c.token, tls: c.tls, readRetryWindowMs: 5000 }, this.key, this.registry.ownOperations);
        if (this.current === opening) this.resolved = client;
        this.caps = c.capabilities;
        this.leased = c.lease !== undefined;
        return { client, capabilities: c.capabilities };
      });
      this.current = opening;
      opening.then(
        () => this.registry.connectionOpened(this.key),
        () => {
          if (this.current === opening) this.current = undefined;
        },
      );
    }
    return this.current.then((c) => c.client);
  }

  invalidate(failed?: GatewayClient): void {
    // Someone already reconnected (or is reconnecting) since `failed` was handed out: keep that.
    if (failed !== undefined && this.resolved !== failed) return;
    const old = this.current;
    this.current = undefined;
    this.resolved = undefined;
    void old?.then((c) => c.client.close()).catch(() => undefined);
  }

  capabilities(): GatewayCapabilities | undefined {
    return this.caps;
  }

  phase(): RunPhase | undefined {
    return this.registry.summary(this.key)?.phase;
  }

  hold(): { dispose(): void } {
    return this.registry.hold(this.key);
  }

  readonly fileReads: SandboxFileReads = {
    list: (path, pageToken) => this.registry.companion.request('sandboxes/files/list', { ref: this.ref, path, pageToken }),
    read: (path, offset, length) => this.registry.companion.request('sandboxes/files/read', { ref: this.ref, path, offset, length }),
  };

  dispose(): void {
    this.invalidate();
  }
}

export class SandboxRegistry implements vscode.Disposable {
  private readonly summaries = new Map<string, SandboxSummary>();
  private readonly connections = new Map<string, RegistryConnection>();
  private readonly changed = new vscode.EventEmitter<SandboxSummary | undefined>();
  private readonly useChanged = new vscode.EventEmitter<string>();
  private readonly holds = new Map<string, number>();
  private readonly deleted = new Set<string>();
  /** Providers whose gateway stopped answering (the local daemon exited), with why. */
  private readonly gatewaysDown = new Map<SandboxRef['provider'], string>();
  private readonly subscriptions: vscode.Disposable[] = [];
  /** The mutations this window's connections sent, to tell its own lines of a sandbox log from others'. */
  readonly ownOperations = new OwnOperations();
  /** Fires with the changed sandbox, or undefined when many may have changed. */
  readonly onDidChange = this.changed.event;
  /** Fires with a sandbox key when the companion server has opened it for this window, or a hold on it ended. */
  readonly onDidChangeUse = this.useChanged.event;

  constructor(readonly companion: CompanionClient) {
    this.subscriptions.push(
      companion.onNotification('sandboxes/changed', (raw) => {
        const parsed = SandboxChangedSchema.safeParse(raw);
        if (!parsed.success) return;
        const { sandbox, removed } = parsed.data;
        if (removed) {
          this.summaries.delete(sandbox.key);
          this.deleted.add(sandbox.key);
        } else this.update(sandbox);
        if (removed || sandbox.phase !== 'Ready') this.connections.get(sandbox.key)?.invalidate();
        this.changed.fire(sandbox);
      }),
      companion.onNotification('gateway/changed', (raw) => {
        const parsed = GatewayChangedSchema.safeParse(raw);
        if (!parsed.success) return;
        const { provider, reachable, message } = parsed.data;
        if (reachable) this.gatewaysDown.delete(provider);
        else {
          this.gatewaysDown.set(provider, message ?? 'its gateway stopped');
          // The next use asks the companion server again, which starts the daemon.
          for (const c of this.connections.values()) if (c.ref.provider === provider) c.invalidate();
        }
        this.changed.fire(undefined);
      }),
    );
  }

  /** Why the gateway of a provider does not answer now, or undefined when it does (as far as is known). */
  gatewayDown(provider: SandboxRef['provider']): string | undefined {
    return this.gatewaysDown.get(provider);
  }

  /** Opens the sandbox's connection again: the companion server starts a stopped local gateway on the way. */
  async reconnect(key: string): Promise<void> {
    const connection = this.connection(key);
    if (!connection) return;
    connection.invalidate();
    await connection.client();
  }

  update(summary: SandboxSummary): void {
    this.summaries.set(summary.key, summary);
    this.deleted.delete(summary.key);
  }

  /** Marks a sandbox the companion server no longer knows (it was deleted) and tells listeners. */
  markDeleted(ref: SandboxRef, key: string): void {
    this.summaries.delete(key);
    this.deleted.add(key);
    this.changed.fire({ ref, key, runtime: '' });
  }

  /** A sandbox's end, when it has one: a closing or closed phase, or 'Deleted'. */
  lifecycle(key: string): RunPhase | 'Deleted' | undefined {
    if (this.deleted.has(key)) return 'Deleted';
    const phase = this.summaries.get(key)?.phase;
    return phase !== undefined && CLOSED_PHASES.has(phase) ? phase : undefined;
  }

  summary(key: string): SandboxSummary | undefined {
    return this.summaries.get(key);
  }

  all(): SandboxSummary[] {
    return [...this.summaries.values()];
  }

  /** The connection for a sandbox key, or undefined when the key is not a sandbox reference. */
  connection(key: string): LiveSandboxConnection | undefined {
    let c = this.connections.get(key);
    if (!c) {
      const ref = parseSandboxKey(key);
      if (!ref) return undefined;
      c = new RegistryConnection(key, ref, this);
      this.connections.set(key, c);
    }
    return c;
  }

  /** Keys of the sandboxes whose lease the companion server holds for this window's open connections. */
  leasedKeys(): string[] {
    return [...this.connections.values()].filter((c) => c.holdsLease).map((c) => c.key);
  }

  connectionOpened(key: string): void {
    this.useChanged.fire(key);
  }

  /** Marks `key` in use until the result is disposed (see LiveSandboxConnection.hold). */
  hold(key: string): { dispose(): void } {
    this.holds.set(key, (this.holds.get(key) ?? 0) + 1);
    let held = true;
    return {
      dispose: () => {
        if (!held) return;
        held = false;
        const left = (this.holds.get(key) ?? 1) - 1;
        if (left > 0) this.holds.set(key, left);
        else this.holds.delete(key);
        this.useChanged.fire(key);
      },
    };
  }

  /** Keys something holds (running tasks). */
  heldKeys(): string[] {
    return [...this.holds.keys()];
  }

  /**
   * Closes this window's connection to a sandbox and asks the companion server to stop holding its lease; the next
   * use opens it again. Resolves to whether a lease was held.
   */
  async release(key: string): Promise<boolean> {
    const connection = this.connections.get(key);
    if (!connection) return false;
    connection.invalidate();
    const { released } = await this.companion.request('sandboxes/release', { ref: connection.ref });
    return released;
  }

  /** Lists a provider's sandboxes and updates the cache. */
  async list(provider: SandboxRef['provider'], filter: { context?: string; namespace?: string } = {}): Promise<SandboxSummary[]> {
    const { sandboxes } = await this.companion.request('sandboxes/list', { provider, ...filter });
    for (const s of sandboxes) this.update(s);
    return sandboxes;
  }

  /** Refreshes one sandbox's summary from the server (a sandbox it does not know is marked deleted). */
  async refresh(ref: SandboxRef): Promise<SandboxSummary> {
    let sandbox: SandboxSummary;
    try {
      ({ sandbox } = await this.companion.request('sandboxes/get', { ref }));
    } catch (err) {
      if (err instanceof CompanionRequestError && err.code === 'not_found') this.markDeleted(ref, sandboxKey(ref));
      throw err;
    }
    this.update(sandbox);
    this.changed.fire(sandbox);
    return sandbox;
  }

  fireChanged(summary?: SandboxSummary): void {
    if (summary) this.update(summary);
    this.changed.fire(summary);
  }

  dispose(): void {
    for (const c of this.connections.values()) c.dispose();
    for (const s of this.subscriptions) s.dispose();
    this.changed.dispose();
    this.useChanged.dispose();
  }
}
