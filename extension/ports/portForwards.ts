// The port forwards of this window, as the companion server holds them: forward, stop, open in a
// browser (through `asExternalUri`, so a browser-served VS Code maps the loopback address to one
// the user's browser can reach) and copy the address. A forward the server ended (its sandbox
// ended) is dropped when `ports/ended` says so, and the user is told; when the window closes the
// companion server exits, and every loopback port it opened with it. A window that reloads (or whose extension
// host restarts) loses them the same way, so this window remembers its forwards in workspaceState and, when the
// extension activates again, forwards them again (restore), on the same local port when it is still free, as
// VS Code's own port forwarding does; a sandbox that ended gets none back.
import * as vscode from 'vscode';
import { z } from 'zod';
import { hostPort, PortEndedSchema, type PortForward, PortNumberSchema } from '../../protocol/ports';
import { parseSandboxKey } from '../../protocol/sandboxes';
import type { CompanionClient, CompanionRequestError } from '../companion/companionClient';
import { messageOf } from '../sandboxes/errorText';
import type { SandboxRegistry } from '../sandboxes/registry';

const REMEMBERED_KEY = 'sandboxSessions.portForwards';

/** A forward as this window remembers it across a reload: which port of which sandbox, and where it listened. */
const RememberedSchema = z.object({ key: z.string(), sandboxPort: PortNumberSchema, localPort: PortNumberSchema, via: z.string() });
type Remembered = z.infer<typeof RememberedSchema>;

export class PortForwards implements vscode.Disposable {
  private readonly forwards = new Map<string, PortForward>();
  private remembered: Remembered[];
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly companion: CompanionClient,
    registry: SandboxRegistry,
    private readonly log: vscode.LogOutputChannel,
    private readonly state?: vscode.Memento,
  ) {
    const saved = z.array(RememberedSchema).safeParse(state?.get(REMEMBERED_KEY));
    this.remembered = saved.success ? saved.data : [];
    this.subscriptions.push(
      companion.onNotification('ports/ended', (raw) => {
        const parsed = PortEndedSchema.safeParse(raw);
        if (!parsed.success || !this.forwards.delete(parsed.data.forward.id)) return;
        const { forward, reason } = parsed.data;
        this.forget(forward);
        log.info(`forward of port ${forward.sandboxPort} (${forward.ref.name}) ended: ${reason}`);
        void vscode.window.showInformationMessage(`The forward of port ${forward.sandboxPort} of ${forward.ref.name} ended: ${reason}.`);
        this.changed.fire();
      }),
      // A sandbox that ended or was deleted has no forwards left (the server closed them).
      registry.onDidChange(() => {
        let dropped = false;
        for (const [id, f] of this.forwards) {
          const phase = registry.lifecycle(f.key);
          if (phase === 'Deleted' || phase === 'Succeeded' || phase === 'Failed' || phase === 'Timeout' || phase === 'Cancelled') {
            dropped = this.forwards.delete(id) || dropped;
            this.forget(f);
          }
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
    this.remember(forward);
    this.log.info(forward.message);
    this.changed.fire();
    return forward;
  }

  async stop(forward: PortForward): Promise<void> {
    await this.companion.request('ports/stop', { id: forward.id });
    this.forwards.delete(forward.id);
    this.forget(forward);
    this.changed.fire();
  }

  /**
   * Forwards again what this window forwarded before it reloaded: on the same local port when it is free (a
   * local sandbox's server listens on its own port, so that one is simply taken again), else on a free one, said
   * in the log; a forward whose sandbox has ended or is gone is dropped. Answers the forwards it made.
   */
  async restore(): Promise<PortForward[]> {
    const previous = this.remembered;
    this.save([]);
    const restored: PortForward[] = [];
    for (const r of previous) {
      const again = async (localPort?: number) => this.forward(r.key, r.sandboxPort, localPort);
      try {
        restored.push(await (r.via === 'host' ? again() : again(r.localPort).catch(async (err: unknown) => {
          // Taken meanwhile by something else: any free port will do.
          if (causeOf(err) !== 'local_port_in_use') throw err;
          const moved = await again();
          this.log.info(`port ${r.sandboxPort} of ${r.key}: local port ${r.localPort} is taken now; forwarded on ${moved.localPort}`);
          return moved;
        })));
      } catch (err) {
        this.log.info(`not forwarding port ${r.sandboxPort} of ${r.key} again: ${messageOf(err)}`);
      }
    }
    if (restored.length > 0) this.log.info(`forwarded ${restored.length} port(s) again after the window reloaded`);
    return restored;
  }

  private remember(f: PortForward): void {
    const kept = this.remembered.filter((r) => r.key !== f.key || r.sandboxPort !== f.sandboxPort);
    this.save([...kept, { key: f.key, sandboxPort: f.sandboxPort, localPort: f.localPort, via: f.via }]);
  }

  private forget(f: PortForward): void {
    if (this.remembered.some((r) => r.key === f.key && r.sandboxPort === f.sandboxPort)) {
      this.save(this.remembered.filter((r) => r.key !== f.key || r.sandboxPort !== f.sandboxPort));
    }
  }

  private save(records: Remembered[]): void {
    this.remembered = records;
    void this.state?.update(REMEMBERED_KEY, records);
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

  /** What restore would forward again (the tests read it). */
  rememberedForwards(): readonly Remembered[] {
    return this.remembered;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.changed.dispose();
  }
}

/** The server's own code behind a refusal (`error.data.cause`): read by shape, as any bundle's CompanionRequestError has it. */
function causeOf(err: unknown): CompanionRequestError['causeCode'] {
  const cause = typeof err === 'object' && err !== null ? (err as { causeCode?: unknown }).causeCode : undefined;
  return typeof cause === 'string' ? cause : undefined;
}
