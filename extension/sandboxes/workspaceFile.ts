// A single-sandbox window is opened through a `.code-workspace` file written to the extension's
// storage, because a folder opened by URI is named after its path and a sandbox's root path is
// `/`. The file is rewritten on every open, so it always holds just that sandbox; it is named like
// the folder because VS Code titles the window after the file (`<name> · <provider> (Workspace)`).
import * as vscode from 'vscode';
import { type SandboxRef, sandboxFolderName, sandboxKey, sandboxWorkspaceFile } from '../../protocol/sandboxes';

export async function writeSandboxWorkspaceFile(storage: vscode.Uri, ref: SandboxRef): Promise<vscode.Uri> {
  const dir = vscode.Uri.joinPath(storage, 'workspaces', sandboxKey(ref));
  await vscode.workspace.fs.createDirectory(dir);
  const file = vscode.Uri.joinPath(dir, `${sandboxFolderName(ref)}.code-workspace`);
  await vscode.workspace.fs.writeFile(file, new TextEncoder().encode(sandboxWorkspaceFile(ref)));
  return file;
}
