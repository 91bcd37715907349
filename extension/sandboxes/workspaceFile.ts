// A single-sandbox window is opened through a `.code-workspace` file written to the extension's
// storage, because a folder opened by URI is named after its path and a sandbox's root path is
// `/`. The file is rewritten on every open, so it always holds just that sandbox; it is named like
// the folder because VS Code titles the window after the file (`<name> · <provider> (Workspace)`).
// A revision opened read-only gets one too, named after its session and revision. So does a window of
// one folder that a sandbox is added to: VS Code would make it an untitled workspace, and the browser
// build (code-server) reloads such a window with its first folder only, losing the sandbox.
import { createHash } from 'node:crypto';
import * as vscode from 'vscode';
import { type SandboxRef, sandboxFolderName, sandboxKey, sandboxWorkspaceFile } from '../../protocol/sandboxes';

/** The name of a window that shows one retained revision read-only: `<session> @ <revision> (read-only)`. */
export function revisionFolderName(sessionId: string, revision: string): string {
  return `${sessionId} @ ${revision} (read-only)`;
}

/** Writes `<storage>/workspaces/<dir…>/<title>.code-workspace` (the title names the window; `/` and `\\` become `_`). */
async function writeWorkspaceFile(storage: vscode.Uri, dir: string[], title: string, content: string): Promise<vscode.Uri> {
  const folder = vscode.Uri.joinPath(storage, 'workspaces', ...dir);
  await vscode.workspace.fs.createDirectory(folder);
  const file = vscode.Uri.joinPath(folder, `${title.replace(/[/\\]/g, '_')}.code-workspace`);
  await vscode.workspace.fs.writeFile(file, new TextEncoder().encode(content));
  return file;
}

const json = (content: unknown) => `${JSON.stringify(content, null, 2)}\n`;

/** A workspace file that opens a revision's folder under {@link revisionFolderName} (its root path says nothing). */
export function writeRevisionWorkspaceFile(storage: vscode.Uri, folder: vscode.Uri, sessionId: string, revision: string): Promise<vscode.Uri> {
  const name = revisionFolderName(sessionId, revision);
  return writeWorkspaceFile(storage, ['revisions', encodeURIComponent(`${sessionId}@${revision}`)], name, json({ folders: [{ uri: folder.toString(), name }] }));
}

export function writeSandboxWorkspaceFile(storage: vscode.Uri, ref: SandboxRef): Promise<vscode.Uri> {
  return writeWorkspaceFile(storage, [sandboxKey(ref)], sandboxFolderName(ref), sandboxWorkspaceFile(ref));
}

/**
 * A workspace file holding a window's one folder and then the sandbox `ref`, titled `<folder> + <sandbox>`.
 * A folder of the file's own file system is written as a path, so the file stays good when the
 * address it was reached at changes (code-server's port); any other folder by its URI.
 */
export function writeFolderAndSandboxWorkspaceFile(storage: vscode.Uri, folder: vscode.WorkspaceFolder, ref: SandboxRef): Promise<vscode.Uri> {
  const sameFileSystem = folder.uri.scheme === storage.scheme && folder.uri.authority === storage.authority;
  const first = sameFileSystem ? { path: folder.uri.path } : { uri: folder.uri.toString() };
  const id = createHash('sha256').update(folder.uri.toString()).digest('hex').slice(0, 16);
  const content = { folders: [first, { uri: `sandbox://${sandboxKey(ref)}/`, name: sandboxFolderName(ref) }] };
  return writeWorkspaceFile(storage, ['with-folder', `${id}.${sandboxKey(ref)}`], `${folder.name} + ${sandboxFolderName(ref)}`, json(content));
}
