// Delete Sandbox, and the quick pick of a sandbox's actions (the status bar item and the view's row menu).
import * as vscode from 'vscode';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { errorText, type SandboxCommandContext } from './context';

export async function deleteSandbox(ctx: SandboxCommandContext, target: SandboxTarget) {
  const s = await ctx.resolve(target, undefined, 'Select a sandbox to delete');
  if (!s) return;
  const ok = await vscode.window.showWarningMessage(`Delete sandbox ${s.ref.name} and its workspace?`, { modal: true }, 'Delete');
  if (ok !== 'Delete') return;
  try {
    await ctx.companion.request('sandboxes/delete', { ref: s.ref });
    ctx.tree.refresh();
  } catch (err) {
    void vscode.window.showErrorMessage(`Could not delete ${s.ref.name}: ${errorText(err)}`);
  }
}

export async function sandboxActions(ctx: SandboxCommandContext, target: SandboxTarget) {
  const s = await ctx.resolve(target);
  if (!s) return;
  const actions: [string, string][] = [
    ['Open Terminal', 'sandboxSessions.openTerminal'],
    ['Close Sandbox (Drain)', 'sandboxSessions.closeSandbox'],
    ['Cancel Sandbox (Immediate)', 'sandboxSessions.cancelSandbox'],
    ['Download Artifacts…', 'sandboxSessions.downloadArtifacts'],
    ['Show Logs', 'sandboxSessions.showLogs'],
  ];
  const picked = await vscode.window.showQuickPick(actions.map(([label, command]) => ({ label, command })), { placeHolder: `${s.ref.name} (${s.phase ?? 'Pending'})` });
  if (picked) await vscode.commands.executeCommand(picked.command, s.key);
}
