// Which sandboxes this window shows: those of its workspace folders and of its editor tabs (a diff's two sides
// included). What follows a sandbox while it is shown (live changes, the changes since a revision) asks here.
import * as vscode from 'vscode';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';

/** The sandboxes of this window's workspace folders and editor tabs. */
export function shownSandboxes(): Set<string> {
  const keys = new Set<string>();
  const add = (uri: vscode.Uri | undefined) => {
    if (uri?.scheme === SANDBOX_SCHEME) keys.add(uri.authority);
  };
  for (const folder of vscode.workspace.workspaceFolders ?? []) add(folder.uri);
  for (const group of vscode.window.tabGroups.all) {
    for (const tab of group.tabs) {
      const input = tab.input;
      if (input instanceof vscode.TabInputText || input instanceof vscode.TabInputCustom || input instanceof vscode.TabInputNotebook) add(input.uri);
      else if (input instanceof vscode.TabInputTextDiff || input instanceof vscode.TabInputNotebookDiff) {
        add(input.original);
        add(input.modified);
      }
    }
  }
  return keys;
}
