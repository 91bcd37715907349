// The end of a sandbox, visible in the window that uses it: when a sandbox this window shows (a
// folder, an open file, a terminal) closes or is deleted, its open files are told to change (VS
// Code stats them again and turns their editors read-only), and a notification says why (the Run's
// own reason: idle, lease expired, timed out) and what to do — download its artifacts, open a new
// sandbox, or remove the folder of a deleted one.
// Drain started from this window reports the close itself (sandboxCommands), so it is not
// announced twice.
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../protocol/sandboxes';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';
import { sandboxTerminalKey } from '../terminal/sandboxPseudoterminal';
import { closedSandboxText } from './errorText';
import type { SandboxRegistry } from './registry';

/** Keys whose close this window started and reports itself (see sandboxCommands' terminate). */
const reportedHere = new Set<string>();

export function closeReportedHere(key: string): void {
  reportedHere.add(key);
}

export class SandboxLifecycleNotices implements vscode.Disposable {
  private readonly announced = new Map<string, string>();
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly registry: SandboxRegistry,
    private readonly files: { sandboxEnded(key: string): void },
  ) {
    this.subscription = registry.onDidChange((s) => s && this.changed(s));
  }

  private changed(s: SandboxSummary): void {
    const ended = this.registry.lifecycle(s.key);
    if (ended === undefined || this.announced.get(s.key) === ended || !this.usedHere(s.key)) return;
    this.announced.set(s.key, ended);
    this.files.sandboxEnded(s.key);
    if (ended === 'Finalizing' || reportedHere.has(s.key)) return;
    const folder = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === SANDBOX_SCHEME && f.uri.authority === s.key);
    const actions = [
      ...(ended === 'Succeeded' && (s.artifacts?.length ?? 0) > 0 ? ['Download Artifacts…'] : []),
      ...(folder ? ['Remove Folder'] : []),
      'New Sandbox…',
    ];
    const show = ended === 'Deleted' ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(closedSandboxText(s.ref.name, ended, s.message), ...actions).then((choice) => {
      if (choice === 'Download Artifacts…') void vscode.commands.executeCommand('sandboxSessions.downloadArtifacts', s.key);
      else if (choice === 'New Sandbox…') void vscode.commands.executeCommand('sandboxSessions.newSandbox');
      else if (choice === 'Remove Folder' && folder) {
        const index = vscode.workspace.workspaceFolders?.indexOf(folder) ?? -1;
        if (index >= 0) vscode.workspace.updateWorkspaceFolders(index, 1);
      }
    });
  }

  private usedHere(key: string): boolean {
    const mine = (uri: vscode.Uri) => uri.scheme === SANDBOX_SCHEME && uri.authority === key;
    return (
      (vscode.workspace.workspaceFolders ?? []).some((f) => mine(f.uri)) ||
      vscode.workspace.textDocuments.some((d) => mine(d.uri)) ||
      vscode.window.terminals.some((t) => sandboxTerminalKey(t) === key)
    );
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
