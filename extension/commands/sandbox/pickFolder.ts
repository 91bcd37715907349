// The folder dialog of Download Artifacts… and Save Artifact…: one local folder, starting where a person expects
// their files (downloadFolder.ts).
import * as vscode from 'vscode';
import { defaultDownloadFolder } from '../downloadFolder';

/** The folder picked (a path of this machine), or undefined when the dialog was dismissed. */
export async function pickDownloadFolder(openLabel: string): Promise<string | undefined> {
  const picked = await vscode.window.showOpenDialog({
    canSelectFolders: true,
    canSelectFiles: false,
    canSelectMany: false,
    openLabel,
    defaultUri: vscode.Uri.file(defaultDownloadFolder(vscode.workspace.workspaceFolders ?? [])),
  });
  return picked?.[0]?.fsPath;
}
