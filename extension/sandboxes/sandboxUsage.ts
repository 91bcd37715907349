// Lets go of the leased sandboxes this window no longer uses. While a sandbox created with a lease timeout is open
// here, the companion server holds its session lease (heartbeats on `operations:ws`); once no `sandbox:` workspace
// folder, Sandbox terminal, running `sandbox` task or open document names it for a few seconds, the window drops
// its connection and `sandboxes/release` stops the heartbeats — so the sandbox expires when nobody works in it, not
// when the editor exits. Using it again (reopening the folder, a terminal, a file) opens and holds it again. Sandboxes without a
// lease are left alone: there is nothing to let go of.
import * as vscode from 'vscode';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';
import { sandboxTerminalKey } from '../terminal/sandboxPseudoterminal';
import type { SandboxRegistry } from './registry';

/** How long a sandbox must stay unused before it is released (folder swaps and reopened tabs come back sooner). */
export const RELEASE_GRACE_MS = 3000;

export class SandboxUsage implements vscode.Disposable {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly registry: SandboxRegistry,
    private readonly log: vscode.LogOutputChannel,
    private readonly graceMs = RELEASE_GRACE_MS,
  ) {
    const check = (): void => this.check();
    this.subscriptions = [
      vscode.workspace.onDidChangeWorkspaceFolders(check),
      // The closing terminal may still be listed while its event runs.
      vscode.window.onDidCloseTerminal((closing) => this.check({ closing })),
      vscode.workspace.onDidCloseTextDocument((closing) => this.check({ closing })),
      registry.onDidChangeUse(check),
    ];
  }

  /** The sandbox keys something in this window uses right now (not counting `closing`). */
  inUse(closing?: vscode.Terminal | vscode.TextDocument): Set<string> {
    const keys = new Set<string>(this.registry.heldKeys());
    for (const folder of vscode.workspace.workspaceFolders ?? []) if (folder.uri.scheme === SANDBOX_SCHEME) keys.add(folder.uri.authority);
    for (const doc of vscode.workspace.textDocuments) {
      if (doc !== closing && doc.uri.scheme === SANDBOX_SCHEME && !doc.isClosed) keys.add(doc.uri.authority);
    }
    for (const terminal of vscode.window.terminals) {
      const key = sandboxTerminalKey(terminal);
      if (terminal !== closing && key !== undefined && terminal.exitStatus === undefined) keys.add(key);
    }
    return keys;
  }

  /** Schedules the release of every leased sandbox nothing uses, and cancels it for those used again. */
  check(options: { closing?: vscode.Terminal | vscode.TextDocument } = {}): void {
    const used = this.inUse(options.closing);
    for (const key of this.registry.leasedKeys()) {
      const timer = this.timers.get(key);
      if (used.has(key)) {
        if (timer) clearTimeout(timer);
        this.timers.delete(key);
      } else if (!timer) {
        this.timers.set(key, setTimeout(() => void this.release(key), this.graceMs));
      }
    }
  }

  private async release(key: string): Promise<void> {
    this.timers.delete(key);
    if (this.inUse().has(key)) return;
    try {
      if (await this.registry.release(key)) this.log.info(`released ${key}: nothing in this window uses it, so its lease is no longer held`);
    } catch (err) {
      this.log.warn(`releasing ${key} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  dispose(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const s of this.subscriptions) s.dispose();
  }
}
