// A warning before the sandbox you are working in stops for want of use, with a way to keep it. A sandbox's idle
// clock counts only commands and file changes — not reading code, not typing into an editor before a save — so a
// person can lose it while working; users of comparable tools ask to be told first and to extend it from the
// editor. The warning comes once per quiet spell, when the time left falls within the last quarter of the idle
// timeout (at most 5 minutes), and only after the gateway confirmed that nothing happened meanwhile. **Keep
// Working** runs `true` in the sandbox: a command is what the idle clock counts (it shows in the Operations view
// like any other).
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../protocol/sandboxes';
import type { SandboxRegistry } from '../sandboxes/registry';
import { durationInWords } from './durationText';
import { idleWarningDue } from './idleWarningDue';

export const KEEP_WORKING_COMMAND = 'sandboxSessions.keepSandboxWorking';
const KEEP_WORKING = 'Keep Working';
const CLOSE = 'Close Sandbox (Drain)';

export class IdleWarnings {
  /** The last activity each sandbox was warned about: one warning per quiet spell. */
  private readonly warnedAt = new Map<string, number>();
  /** Sandboxes whose last activity is being asked (the answer re-renders the status bar, which checks again). */
  private readonly asking = new Set<string>();
  private shownText: string | undefined;

  constructor(
    private readonly registry: SandboxRegistry,
    /** The gateway's last-activity time of a sandbox, asked now (undefined when it cannot be read). */
    private readonly freshActivity: (key: string) => Promise<number | undefined>,
  ) {}

  /** Called with what the status bar knows (every second): warns when the sandbox is about to stop for want of use. */
  check(summary: SandboxSummary, lastActivityMs: number | undefined): void {
    const idle = summary.idleTimeoutSeconds;
    if (summary.phase !== 'Ready' || idle === undefined || lastActivityMs === undefined) return;
    if (this.asking.has(summary.key) || this.warnedAt.get(summary.key) === lastActivityMs) return;
    if (idleWarningDue(idle, lastActivityMs, Date.now()) === undefined) return;
    this.asking.add(summary.key);
    void this.confirmAndWarn(summary, idle, lastActivityMs).finally(() => this.asking.delete(summary.key));
  }

  private async confirmAndWarn(summary: SandboxSummary, idle: number, known: number): Promise<void> {
    // Something may have run since the last poll (a command from the CLI or an agent): ask before warning.
    const fresh = await this.freshActivity(summary.key).catch(() => undefined);
    if (fresh === undefined) {
      this.warnedAt.set(summary.key, known); // not asked again every second: this spell goes unwarned
      return;
    }
    const left = idleWarningDue(idle, fresh, Date.now());
    if (left === undefined || this.registry.summary(summary.key)?.phase !== 'Ready') return; // used meanwhile
    this.warnedAt.set(summary.key, fresh);
    this.shownText = `${summary.ref.name} stops in ${durationInWords(left)} for want of use: its idle timeout is ${durationInWords(idle * 1000)}, and only commands and file changes count as use.`;
    const choice = await vscode.window.showWarningMessage(this.shownText, KEEP_WORKING, CLOSE);
    if (choice === KEEP_WORKING) await vscode.commands.executeCommand(KEEP_WORKING_COMMAND, summary.key);
    else if (choice === CLOSE) await vscode.commands.executeCommand('sandboxSessions.closeSandbox', summary.key);
  }

  /** Keep Working: one command (`true`) in the sandbox, which the idle clock counts. Resolves once it ran. */
  async keepWorking(key: string): Promise<boolean> {
    const connection = this.registry.connection(key);
    const summary = this.registry.summary(key);
    if (!connection || summary?.phase !== 'Ready') {
      void vscode.window.showWarningMessage(`${summary?.ref.name ?? key} is ${summary?.phase ?? 'gone'}, not Ready: there is nothing to keep running.`);
      return false;
    }
    try {
      await (await connection.client()).execute({ command: { argv: ['true'], timeoutMillis: 30_000 } });
      return true;
    } catch (err) {
      void vscode.window.showErrorMessage(`Could not keep ${summary.ref.name} working: ${err instanceof Error ? err.message : String(err)}`);
      return false;
    }
  }

  /** The last warning shown (for the integration tests). */
  get lastWarning(): string | undefined {
    return this.shownText;
  }
}
