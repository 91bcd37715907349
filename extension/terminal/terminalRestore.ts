// Sandbox terminals across window reloads and extension-host restarts. VS Code 1.139 revives
// after a reload only terminals whose process its pty host owns; an extension's Pseudoterminal
// lives in the extension host, dies with it, and is not revived (nor can an extension re-attach
// to a revived tab). So this window remembers its open Sandbox terminals in workspaceState and,
// when the extension activates again, opens each one anew, saying so: a line-based Sandbox shell
// in the same sandbox and directory (its commands ran one by one and are over), an interactive
// terminal attached to the very program it ran — the sandbox kept it running when the window's
// connection dropped — with its output replayed. A sandbox that is no longer Ready gets no
// terminal back (the log says why): a terminal is restored as itself or not at all.
import * as vscode from 'vscode';
import { z } from 'zod';
import { parseSandboxKey } from '../../protocol/sandboxes';
import type { SandboxRegistry } from '../sandboxes/registry';
import { InteractivePseudoterminal, interactiveTerminalOptions } from './interactiveTerminal';
import { SandboxPseudoterminal, sandboxTerminalOptions, type TerminalFactoryDeps } from './sandboxPseudoterminal';

const KEY = 'sandboxSessions.openTerminals';

const OpenTerminalSchema = z.union([
  z.object({ id: z.string(), key: z.string(), cwd: z.string() }),
  /** An interactive terminal, by the id of the terminal (program) the sandbox runs for it. */
  z.object({ id: z.string(), key: z.string(), terminal: z.string() }),
]);
type OpenTerminal = z.infer<typeof OpenTerminalSchema>;
type TrackedPty = SandboxPseudoterminal | InteractivePseudoterminal;

export const RECONNECTED_BANNER = 'Reconnected after the window reloaded: same sandbox and working directory; earlier output and running commands are gone.';

export class SandboxTerminalRestore implements vscode.Disposable {
  private readonly ids = new WeakMap<TrackedPty, string>();
  private readonly subscriptions: vscode.Disposable[] = [];
  private records: OpenTerminal[] = [];
  private nextId = 0;

  constructor(
    private readonly state: vscode.Memento,
    private readonly log: vscode.LogOutputChannel,
  ) {
    const parsed = z.array(OpenTerminalSchema).safeParse(state.get(KEY));
    this.records = parsed.success ? parsed.data : [];
    this.subscriptions.push(
      vscode.window.onDidOpenTerminal((t) => this.track(t)),
      vscode.window.onDidCloseTerminal((t) => {
        // A window that reloads or closes takes its terminals down with reason Shutdown: keep those.
        if (t.exitStatus?.reason === vscode.TerminalExitReason.Shutdown) return;
        const pty = ptyOf(t);
        const id = pty && this.ids.get(pty);
        if (id !== undefined) this.save(this.records.filter((r) => r.id !== id));
      }),
    );
  }

  /** Opens the terminals this window had before the extension host went away, then tracks the open ones. */
  async restore(registry: SandboxRegistry, deps: TerminalFactoryDeps): Promise<vscode.Terminal[]> {
    const previous = this.records;
    this.save([]);
    const restored: vscode.Terminal[] = [];
    for (const record of previous) {
      const connection = registry.connection(record.key);
      const phase = connection && (registry.summary(record.key)?.phase ?? (await refreshPhase(registry, record.key)));
      if (!connection || phase !== 'Ready') {
        this.log.info(`not reopening the Sandbox terminal of ${record.key}: the sandbox is ${phase ?? 'gone'}`);
        continue;
      }
      const options = 'terminal' in record ? interactiveTerminalOptions(connection, record.terminal, this.log) : sandboxTerminalOptions(connection, deps, record.cwd, RECONNECTED_BANNER);
      restored.push(vscode.window.createTerminal(options));
    }
    for (const t of vscode.window.terminals) this.track(t);
    if (restored.length > 0) {
      this.log.info(`reopened ${restored.length} Sandbox terminal(s) after a restart`);
      restored[restored.length - 1]?.show(true);
    }
    return restored;
  }

  private track(terminal: vscode.Terminal): void {
    const pty = ptyOf(terminal);
    if (!pty || this.ids.has(pty)) return;
    const id = `${Date.now().toString(36)}-${this.nextId++}`;
    this.ids.set(pty, id);
    if (pty instanceof InteractivePseudoterminal) {
      // Remembered once attached (the sandbox names its terminal then), and again after a takeover's new id.
      this.subscriptions.push(
        pty.onDidAttach((terminal) => this.save([...this.records.filter((r) => r.id !== id), { id, key: pty.key, terminal }])),
      );
      return;
    }
    this.save([...this.records, { id, key: pty.key, cwd: pty.session.workingDirectory }]);
    this.subscriptions.push(
      pty.onDidChangeWorkingDirectory((cwd) => this.save(this.records.map((r) => (r.id === id && 'cwd' in r ? { ...r, cwd } : r)))),
    );
  }

  private save(records: OpenTerminal[]): void {
    this.records = records;
    void this.state.update(KEY, records);
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}

function ptyOf(terminal: vscode.Terminal): TrackedPty | undefined {
  const options = terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>;
  return options.pty instanceof SandboxPseudoterminal || options.pty instanceof InteractivePseudoterminal ? options.pty : undefined;
}

async function refreshPhase(registry: SandboxRegistry, key: string): Promise<string | undefined> {
  const ref = parseSandboxKey(key);
  return ref ? (await registry.refresh(ref).catch(() => undefined))?.phase : undefined;
}
