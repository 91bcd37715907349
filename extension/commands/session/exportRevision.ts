// Export Revision as Bundle…: a retained revision's bundle written to a file, verified while it is copied.
import path from 'node:path';
import * as vscode from 'vscode';
import { type SessionContext, type RevisionTarget, message } from './context';
import { pickRevision } from './picks';

export async function exportRevision(ctx: SessionContext, target: RevisionTarget, destination?: string) {
  const { companion } = ctx;
  const picked = await pickRevision(ctx, target);
  if (!picked) return undefined;
  let dest = destination;
  if (!dest) {
    const uri = await vscode.window.showSaveDialog({
      saveLabel: 'Export Bundle',
      filters: { 'Session Bundle': ['zst'] },
      defaultUri: vscode.Uri.file(path.join(process.env.HOME ?? '/', `${picked.sessionId}-${picked.revision ?? 'head'}.tar.zst`)),
    });
    if (!uri) return undefined;
    dest = uri.fsPath;
  }
  try {
    const out = await companion.request('sessions/export', { sessionId: picked.sessionId, ...(picked.revision ? { revision: picked.revision } : {}), destination: dest });
    if (!destination) void vscode.window.showInformationMessage(`Exported ${out.revision.sessionId}@${out.revision.revision} to ${out.path} (${out.digest}).`);
    return out;
  } catch (err) {
    void vscode.window.showErrorMessage(`Could not export: ${message(err)}`);
    return undefined;
  }
}
