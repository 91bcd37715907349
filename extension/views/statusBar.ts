// The status bar item for the sandbox of the active editor: its phase and what ends it — the time
// left before the idle timeout (from the gateway's last-activity time; reads do not count), its
// session lease (held while windows use it: no countdown, the tooltip says what happens when the
// last one lets go; kruntimes era-D clusters have leases instead of idle timeouts) and the time
// left before the total timeout — so a sandbox never stops without warning (and, shortly before an idle stop, a
// notification that offers to keep it: idleWarning.ts). Click → its actions.
// When the local gateway daemon stops, the item says so at once and a click starts it again. The gateway's round
// trip (of the periodic status check) is in the tooltip, and in the item when it is slow (roundTrips.ts).
import * as vscode from 'vscode';
import { parseGoDuration } from '../../protocol/kruntimes/run';
import type { SandboxSummary } from '../../protocol/sandboxes';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';
import type { SandboxRegistry } from '../sandboxes/registry';
import { formatRemaining, formatSeconds } from './durationText';
import { IdleWarnings, KEEP_WORKING_COMMAND } from './idleWarning';
import { RoundTrips, roundTripText } from './roundTrips';

const STATUS_POLL_MS = 15_000;
const RECONNECT_COMMAND = 'sandboxSessions.reconnectSandbox';
/** `sandboxSessions.latencyWarningMs`'s default (package.json). */
const DEFAULT_LATENCY_WARNING_MS = 250;

export class SandboxStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('sandboxSessions.status', vscode.StatusBarAlignment.Left, 50);
  private readonly disposables: vscode.Disposable[] = [];
  private key: string | undefined;
  private lastActivityMs: number | undefined;
  private lastPoll = 0;
  private readonly ticker: NodeJS.Timeout;
  private shown = false;
  private readonly idleWarnings: IdleWarnings;
  private readonly roundTrips = new RoundTrips();

  constructor(private readonly registry: SandboxRegistry) {
    this.item.name = 'Sandbox';
    this.idleWarnings = new IdleWarnings(registry, (key) => this.lastActivity(key));
    this.disposables.push(
      this.item,
      vscode.window.onDidChangeActiveTextEditor(() => this.pick()),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.pick()),
      registry.onDidChange(() => this.render()),
      vscode.commands.registerCommand(RECONNECT_COMMAND, (key: unknown) => this.reconnect(typeof key === 'string' ? key : this.key)),
      vscode.commands.registerCommand(KEEP_WORKING_COMMAND, (key: unknown) => this.keepWorking(typeof key === 'string' ? key : this.key)),
    );
    this.ticker = setInterval(() => this.render(), 1000);
    this.pick();
  }

  /** The sandbox of the active editor, else the first sandbox folder of the workspace. */
  private pick(): void {
    const editorUri = vscode.window.activeTextEditor?.document.uri;
    const folder = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === SANDBOX_SCHEME);
    const key = editorUri?.scheme === SANDBOX_SCHEME ? editorUri.authority : folder?.uri.authority;
    if (key !== this.key) {
      this.key = key;
      this.lastActivityMs = undefined;
      this.lastPoll = 0;
    }
    this.render();
  }

  private poll(summary: SandboxSummary): void {
    if (Date.now() - this.lastPoll < STATUS_POLL_MS || summary.phase !== 'Ready') return;
    this.lastPoll = Date.now();
    void this.lastActivity(summary.key).catch(() => undefined);
  }

  /** The gateway's last-activity time of a sandbox, asked now; the countdown of the shown one follows it. */
  private async lastActivity(key: string): Promise<number | undefined> {
    const connection = this.registry.connection(key);
    if (!connection) return undefined;
    const client = await connection.client();
    const started = performance.now();
    const status = await client.status();
    this.roundTrips.add(key, performance.now() - started);
    const ms = status.lastActivityUnixNano === undefined ? undefined : Number(status.lastActivityUnixNano / 1_000_000n);
    if (key === this.key && ms !== undefined) {
      this.lastActivityMs = ms;
      this.render();
    }
    return ms;
  }

  /** Keep Working (the idle warning's button, or the palette): a command in the sandbox, then the new countdown. */
  private async keepWorking(key: string | undefined): Promise<boolean> {
    if (!key) {
      void vscode.window.showWarningMessage('Keep Sandbox Working acts on the sandbox you are working in: open one of its files or folders first.');
      return false;
    }
    const kept = await this.idleWarnings.keepWorking(key);
    if (kept) await this.lastActivity(key).catch(() => undefined);
    return kept;
  }

  private render(): void {
    const summary = this.key ? this.registry.summary(this.key) : undefined;
    if (!this.key || !summary) {
      this.item.hide();
      this.shown = false;
      return;
    }
    const down = summary.phase === 'Ready' ? this.registry.gatewayDown(summary.ref.provider) : undefined;
    if (down !== undefined) {
      this.item.text = `$(debug-disconnect) ${summary.ref.name}: gateway stopped`;
      this.item.tooltip = `Sandbox ${summary.ref.name} cannot be reached: ${down}. Click to start it again now.`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.command = { command: RECONNECT_COMMAND, title: 'Reconnect', arguments: [this.key] };
      this.item.show();
      this.shown = true;
      return;
    }
    this.item.backgroundColor = undefined;
    this.poll(summary);
    const parts = [`$(vm) ${summary.ref.name}: ${summary.phase ?? 'Pending'}`];
    const tips = [`Sandbox ${summary.ref.name} (${summary.runtime}) is ${summary.phase ?? 'Pending'}.`];
    if (summary.phase === 'Ready') {
      const warningMs = vscode.workspace.getConfiguration('sandboxSessions').get<number>('latencyWarningMs', DEFAULT_LATENCY_WARNING_MS);
      const roundTrip = roundTripText(this.roundTrips.of(summary.key), warningMs);
      if (roundTrip.part) parts.push(roundTrip.part);
      if (roundTrip.slow) this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      tips.push(roundTrip.tip);
      if (summary.idleTimeoutSeconds !== undefined && this.lastActivityMs !== undefined) {
        const left = this.lastActivityMs + summary.idleTimeoutSeconds * 1000 - Date.now();
        parts.push(`idle ${formatRemaining(left)}`);
        tips.push(`Stops after ${summary.idleTimeoutSeconds} s without commands or changes (${formatRemaining(left)} left).`);
        this.idleWarnings.check(summary, this.lastActivityMs);
      }
      if (summary.leaseTimeoutSeconds !== undefined) {
        parts.push(`lease ${formatSeconds(summary.leaseTimeoutSeconds)}`);
        tips.push(
          `Holds a session lease: it lives while a window or process uses it and ends ${formatSeconds(summary.leaseTimeoutSeconds)} after the last one lets go (closing the last window that uses it counts).`,
        );
      }
      const total = summary.timeout ? parseGoDuration(summary.timeout) : undefined;
      if (total !== undefined && summary.startTime) {
        const left = Date.parse(summary.startTime) + total - Date.now();
        parts.push(`${formatRemaining(left)} left`);
        tips.push(`Ends at its total timeout of ${summary.timeout} (${formatRemaining(left)} left).`);
      }
      if (summary.idleTimeoutSeconds === undefined && summary.leaseTimeoutSeconds === undefined && total === undefined) {
        tips.push('No idle timeout, lease or total timeout: it keeps its runtime until you close or cancel it.');
      }
    } else if (summary.message) {
      tips.push(`${summary.reason ? `${summary.reason}: ` : ''}${summary.message}`);
    }
    this.item.text = parts.join(' · ');
    this.item.tooltip = tips.join('\n');
    this.item.command = { command: 'sandboxSessions.sandboxActions', title: 'Sandbox actions', arguments: [this.key] };
    this.item.show();
    this.shown = true;
  }

  private async reconnect(key: string | undefined): Promise<void> {
    if (!key) return;
    try {
      await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'Starting the sandbox gateway' }, () => this.registry.reconnect(key));
    } catch (err) {
      void vscode.window.showErrorMessage(`The sandbox could not be reached: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** The gateway round trips measured of a sandbox (median, count), for the support report. */
  roundTrip(key: string): { medianMs: number; count: number } | undefined {
    return this.roundTrips.of(key);
  }

  /** The last idle warning shown (for the integration tests). */
  get idleWarning(): string | undefined {
    return this.idleWarnings.lastWarning;
  }

  /** The item's text while it is shown (for the integration tests). */
  get text(): string | undefined {
    return this.shown ? this.item.text : undefined;
  }

  dispose(): void {
    clearInterval(this.ticker);
    for (const d of this.disposables) d.dispose();
  }
}
