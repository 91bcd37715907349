// The Operations view: what happened in the sandbox the user is working in — every mutation
// runtimed audited (command, write_file, create_directory, delete_file, rename_file) with its
// outcome, exit code, duration and time, newest first. It is read from the sandbox's log (the
// audit lines, which never hold command text or file contents) and followed live, so commands run
// from anywhere — this window, the CLI, an agent — show up.
import * as vscode from 'vscode';
import type { SessionAuditLine } from '../../protocol/kruntimes/runtimedLog';
import { parseSandboxKey } from '../../protocol/sandboxes';
import { activeSandboxKey } from '../sandboxes/activeSandbox';
import { messageOf } from '../sandboxes/errorText';
import type { LogFollow, SandboxLogFollows } from '../sandboxes/logFollows';
import type { WindowCommand, WindowCommands } from '../sandboxes/windowCommands';
import { formatTime, formatTimeAndAge } from './dateText';
import { auditRows, type OperationRow, operationSummary } from './operationText';

export type OperationsNode = { kind: 'operation'; row: OperationRow } | { kind: 'message'; text: string };

const MAX_ROWS = 1000;

const OUTCOME_ICONS: Record<SessionAuditLine['outcome'], vscode.ThemeIcon> = {
  succeeded: new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed')),
  failed: new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed')),
  cancelled: new vscode.ThemeIcon('circle-slash'),
  timed_out: new vscode.ThemeIcon('watch', new vscode.ThemeColor('testing.iconFailed')),
};

export class OperationsTreeProvider implements vscode.TreeDataProvider<OperationsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<OperationsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];
  private key: string | undefined;
  private rows: OperationRow[] = [];
  private following: LogFollow | undefined;
  private problem: string | undefined;

  constructor(
    private readonly follows: SandboxLogFollows,
    /** The commands run from this window: a row that is one of them can be re-run and its output opened. */
    private readonly commands?: WindowCommands,
  ) {
    this.subscriptions.push(
      // A command's output opened from this view (`sandbox-output:`), or no editor for a moment while
      // one replaces another, keeps the view on its sandbox.
      vscode.window.onDidChangeActiveTextEditor((e) => e && e.document.uri.scheme !== 'sandbox-output' && this.retarget()),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.retarget()),
    );
    this.retarget();
  }

  /** The operations shown, newest first (also for tests). */
  get operations(): readonly OperationRow[] {
    return [...this.rows].reverse();
  }

  /** The sandbox the view follows. */
  get sandboxKey(): string | undefined {
    return this.key;
  }

  /** Follows the active sandbox (or `key`), starting over when it changed. */
  retarget(key = activeSandboxKey()): void {
    if (key === this.key) return;
    this.following?.stop();
    this.following = undefined;
    this.key = key;
    this.rows = [];
    this.problem = undefined;
    const ref = key ? parseSandboxKey(key) : undefined;
    if (ref) {
      const follow = this.follows.follow(ref, { tailLines: MAX_ROWS, timestamps: true }, (lines) => {
        if (this.key !== key) return;
        this.rows.push(...auditRows(lines));
        if (this.rows.length > MAX_ROWS) this.rows.splice(0, this.rows.length - MAX_ROWS);
        this.changed.fire(undefined);
      });
      this.following = follow;
      follow.done.catch((err: unknown) => {
        if (this.key !== key) return;
        this.problem = messageOf(err);
        this.changed.fire(undefined);
      });
    }
    this.changed.fire(undefined);
  }

  getTreeItem(node: OperationsNode): vscode.TreeItem {
    if (node.kind === 'message') {
      const item = new vscode.TreeItem(node.text);
      item.iconPath = new vscode.ThemeIcon('info');
      return item;
    }
    const { audit, time } = node.row;
    const item = new vscode.TreeItem(audit.operation.replace('_', ' '));
    item.description = `${operationSummary(audit)} · ${formatTimeAndAge(time)}`;
    item.iconPath = OUTCOME_ICONS[audit.outcome];
    const ranHere = this.windowCommand(node);
    item.contextValue = `operation.${audit.outcome}${ranHere ? '.ranHere' : ''}`;
    const tooltip = new vscode.MarkdownString(`**${audit.operation}** ${operationSummary(audit)}  \n${formatTime(time)} · ${audit.run_name}`);
    if (audit.timed_out) tooltip.appendMarkdown('  \nThe command hit its timeout.');
    if (ranHere) {
      tooltip.appendMarkdown(`  \nRun from this window's ${ranHere.from}: `);
      tooltip.appendText(ranHere.command);
    }
    item.tooltip = tooltip;
    return item;
  }

  /** The command of this window a command row is (runtimed's log has no command text: only this window knows it). */
  windowCommand(node: OperationsNode): WindowCommand | undefined {
    if (node.kind !== 'operation' || node.row.audit.operation !== 'command' || !this.key) return undefined;
    const loggedAt = Date.parse(node.row.time.replace(/(\.\d{3})\d+/, '$1'));
    return Number.isFinite(loggedAt) ? this.commands?.match(this.key, loggedAt, node.row.audit.duration_milliseconds ?? 0) : undefined;
  }

  getChildren(node?: OperationsNode): OperationsNode[] {
    if (node) return [];
    if (!this.key) return [{ kind: 'message', text: 'Open a sandbox folder or one of its files to see its operations.' }];
    if (this.problem) return [{ kind: 'message', text: `The sandbox log cannot be read: ${this.problem}` }];
    return this.operations.map((row) => ({ kind: 'operation', row }));
  }

  dispose(): void {
    this.following?.stop();
    for (const s of this.subscriptions) s.dispose();
    this.changed.dispose();
  }
}
