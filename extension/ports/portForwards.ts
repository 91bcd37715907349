// The port forwards of this window, as the companion server holds them: forward, stop, open in a
// browser (through `asExternalUri`, so a browser-served VS Code maps the loopback address to one
// the user's browser can reach) and copy the address. A forward the server ended (its sandbox
// ended) is dropped when `ports/ended` says so, and the user is told; when the window closes the
// companion server exits, and every loopback port it opened with it.
import * as vscode from 'vscode';
import { hostPort, PortEndedSchema, type PortForward } from '../../protocol/ports';
import { parseSandboxKey } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';
import type { SandboxRegistry } from '../sandboxes/registry';

export class PortForwards implements vscode.Disposable {
  private readonly forwards = new Map<string, PortForward>();
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly companion: CompanionClient,
    registry: SandboxRegistry,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.subscriptions.push(
      companion.onNotification('ports/ended', (raw) => {
        const parsed = PortEndedSchema.safeParse(raw);
        if (!parsed.success || !this.forwards.delete(parsed.data.forward.id)) return;
        const { forward, reason } = parsed.data;
        log.info(`forward of port ${forward.sandboxPort} (${forward.ref.name}) ended: ${reason}`);
        void vscode.window.showInformationMessage(`The forward of port ${forward.sandboxPort} of ${forward.ref.name} ended: ${reason}.`);
        this.changed.fire();
      }),
      // A sandbox that ended or was deleted has no forwards left (the server closed them).
      registry.onDidChange(() => {
        let dropped = false;
        for (const [id, f] of this.forwards) {
          const phase = registry.lifecycle(f.key);
          if (phase === 'Deleted' || phase === 'Succeeded' || phase === 'Failed' || phase === 'Timeout' || phase === 'Cancelled') dropped = this.forwards.delete(id) || dropped;
        }
        if (dropped) this.changed.fire();
      }),
    );
  }

  all(): PortForward[] {
    return [...this.forwards.values()];
  }

  async forward(key: string, port: number, localPort?: number): Promise<PortForward> {
    const ref = parseSandboxKey(key);
    if (!ref) throw new Error(`not a sandbox: ${key}`);
    const { forward } = await this.companion.request('ports/forward', { ref, port, ...(localPort !== undefined ? { localPort } : {}) });
    this.forwards.set(forward.id, forward);
    this.log.info(forward.message);
    this.changed.fire();
    return forward;
  }

  async stop(forward: PortForward): Promise<void> {
    await this.companion.request('ports/stop', { id: forward.id });
    this.forwards.delete(forward.id);
    this.changed.fire();
  }

  /** The address a browser of this user reaches the forward at. */
  async externalUri(forward: PortForward): Promise<vscode.Uri> {
    return vscode.env.asExternalUri(vscode.Uri.parse(forward.url));
  }

  async openInBrowser(forward: PortForward): Promise<void> {
    await vscode.env.openExternal(await this.externalUri(forward));
  }

  async copyAddress(forward: PortForward): Promise<string> {
    const external = await this.externalUri(forward);
    // Where no mapping applies, the plain `host:port` a person types (or pastes) into a browser.
    const text = external.toString() === vscode.Uri.parse(forward.url).toString() ? hostPort(forward.localHost, forward.localPort) : external.toString();
    await vscode.env.clipboard.writeText(text);
    return text;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.changed.dispose();
  }
}
