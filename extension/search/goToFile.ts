// Go to File in Sandbox…: a Quick Pick of a sandbox folder's files ranked by fuzzy name (this ranking, not
// VS Code's filter, decides what shows), over the folder's file list from the cached index.
import * as vscode from 'vscode';
import { sandboxUri } from '../fs/sandboxFileSystemProvider';
import { messageOf } from '../sandboxes/errorText';
import { rankPaths } from './findResults';
import { pickSandboxFolder } from './searchFolder';

/** Paths shown at once in Go to File (ranked); more would only slow the list down. */
const SHOWN_FILES = 200;

/** Runs the command; `filesOf` lists a sandbox folder's files (cached). */
export async function goToFileInSandbox(filesOf: (folder: vscode.Uri) => Promise<string[]>, initial?: string): Promise<void> {
  const folder = await pickSandboxFolder();
  if (!folder) return;
  const pick = vscode.window.createQuickPick<vscode.QuickPickItem & { path: string }>();
  pick.placeholder = `Search files by name in ${folder.name}`;
  pick.matchOnDescription = true;
  pick.busy = true;
  let paths: string[] = [];
  const show = (): void => {
    pick.items = rankPaths(paths, pick.value, SHOWN_FILES).map((p) => ({
      label: p.slice(p.lastIndexOf('/') + 1),
      description: p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '',
      path: p,
      // Ranked here: VS Code's own filter must not hide what this ranking chose.
      alwaysShow: true,
    }));
  };
  pick.onDidChangeValue(show);
  pick.onDidAccept(async () => {
    const chosen = pick.selectedItems[0];
    pick.hide();
    if (chosen) await vscode.window.showTextDocument(sandboxUri(folder.uri.authority, chosen.path), { preview: false });
  });
  pick.onDidHide(() => pick.dispose());
  if (typeof initial === 'string') pick.value = initial;
  pick.show();
  try {
    paths = await filesOf(folder.uri);
    show();
  } catch (err) {
    pick.hide();
    void vscode.window.showErrorMessage(`Go to File in Sandbox: ${messageOf(err)}`);
  } finally {
    pick.busy = false;
  }
}
