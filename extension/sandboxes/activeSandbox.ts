// "The sandbox the user is working in": the one of the active editor, else the first sandbox
// folder of the workspace. Palette commands act on it without asking.
import * as vscode from 'vscode';

const SANDBOX_SCHEME = 'sandbox';

export function activeSandboxKey(): string | undefined {
  const uri = vscode.window.activeTextEditor?.document.uri;
  if (uri?.scheme === SANDBOX_SCHEME) return uri.authority;
  return vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === SANDBOX_SCHEME)?.uri.authority;
}
