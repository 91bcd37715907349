// A sandbox window opened from a `.code-workspace` file (Open Here, `npm start`) can come up with
// no folder at all: code-server loads a remote workspace file from its configuration cache first
// (empty for a new workspace) and the real file after, and under load that second step can leave
// the window with zero folders — the Explorer says "No Folder Opened" and nothing asks for
// `sandbox:` (seen in CI; the file on disk was complete). The extension activates in every window
// once start-up has finished (package.json: onStartupFinished), and here the folders the workspace
// file names are put back. A window whose folders VS Code already shows is left alone.
// (An Explorer view shown only in such a window, `sandboxSessions.restoringFolder`, says in words
// what is happening; it cannot be what activates the extension: VS Code adds an extension's views to
// the Explorer collapsed, and a collapsed view fires no `onView` event — seen in CI too.)
import * as vscode from 'vscode';
import { z } from 'zod';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';

/** The part of a `.code-workspace` file read here (VS Code's own format; other fields are kept by VS Code). */
const WorkspaceFileSchema = z.object({
  folders: z.array(z.object({ uri: z.string().optional(), name: z.string().optional() })).default([]),
});

/** The `sandbox:` folders a workspace file names: its text, parsed as VS Code does (JSON with comments is not expected in ours). */
export function sandboxFoldersOf(text: string): Array<{ uri: vscode.Uri; name?: string }> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return [];
  }
  const parsed = WorkspaceFileSchema.safeParse(json);
  if (!parsed.success) return [];
  const folders: Array<{ uri: vscode.Uri; name?: string }> = [];
  for (const f of parsed.data.folders) {
    if (!f.uri) continue;
    let uri: vscode.Uri;
    try {
      uri = vscode.Uri.parse(f.uri, true);
    } catch {
      continue;
    }
    if (uri.scheme === SANDBOX_SCHEME) folders.push({ uri, name: f.name });
  }
  return folders;
}

/**
 * When this window is a workspace with no folder but its workspace file names sandbox folders,
 * adds them back (VS Code rewrites the file with the same folders). Returns whether it did.
 */
export async function restoreLostSandboxFolders(log: vscode.LogOutputChannel): Promise<boolean> {
  const file = vscode.workspace.workspaceFile;
  if (!file || file.scheme === 'untitled' || (vscode.workspace.workspaceFolders ?? []).length > 0) return false;
  let text: string;
  try {
    text = new TextDecoder().decode(await vscode.workspace.fs.readFile(file));
  } catch (err) {
    log.warn(`this workspace has no folder and its file ${file.toString()} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
    return false;
  }
  const folders = sandboxFoldersOf(text);
  if (folders.length === 0) return false;
  log.warn(`VS Code opened ${file.path} without its folders; adding ${folders.map((f) => f.name ?? f.uri.toString()).join(', ')} again`);
  const added = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      sub.dispose();
      resolve(false);
    }, 30_000);
    const sub = vscode.workspace.onDidChangeWorkspaceFolders(() => {
      if ((vscode.workspace.workspaceFolders ?? []).length === 0) return;
      clearTimeout(timer);
      sub.dispose();
      resolve(true);
    });
  });
  if (!vscode.workspace.updateWorkspaceFolders(0, 0, ...folders)) {
    log.error(`VS Code refused to add the folders of ${file.path} again`);
    return false;
  }
  const ok = await added;
  if (!ok) log.error(`the folders of ${file.path} did not come back within 30 s`);
  return ok;
}

/** The (always empty) tree behind the `sandboxSessions.restoringFolder` view: the view exists to be seen, its text is welcome content. */
export function registerRestoringFolderView(): vscode.Disposable {
  return vscode.window.registerTreeDataProvider<vscode.TreeItem>('sandboxSessions.restoringFolder', {
    getChildren: () => [],
    getTreeItem: (item) => item,
  });
}
