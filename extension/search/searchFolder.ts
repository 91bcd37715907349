// Which sandbox folder Go to File in Sandbox… and Find in Sandbox… search: shared by both commands.
import * as vscode from 'vscode';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';

/** The sandbox folder to search: the only one of this window, else the active editor's, else the user's choice. */
export async function pickSandboxFolder(): Promise<vscode.WorkspaceFolder | undefined> {
  const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === SANDBOX_SCHEME);
  if (folders.length === 0) {
    void vscode.window.showInformationMessage('Open a sandbox folder first (Sandbox Sessions: Open Sandbox…).');
    return undefined;
  }
  if (folders.length === 1) return folders[0];
  const active = vscode.window.activeTextEditor?.document.uri;
  const mine = active ? vscode.workspace.getWorkspaceFolder(active) : undefined;
  if (mine && mine.uri.scheme === SANDBOX_SCHEME) return mine;
  const picked = await vscode.window.showQuickPick(folders.map((f) => ({ label: f.name, folder: f })), { placeHolder: 'Search which sandbox folder?' });
  return picked?.folder;
}
