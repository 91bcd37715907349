// Search for windows where VS Code's own search cannot reach `sandbox:` folders (the proposed search
// API is not enabled, or the setting sandboxSessions.search.quickOpenAndFindInFiles is off): Go to File
// in Sandbox… (a Quick Pick ranked by fuzzy name over a cached file index, dropped when the file system
// reports files created or deleted in that sandbox) and Find in Sandbox… (matches streaming into a Quick
// Pick grouped by file; choosing one opens the file at the match). Both work in any window; the notice
// that says why they exist is shown once. The commands are in goToFile.ts and findInSandbox.ts; this
// registers them over one file index.
import * as vscode from 'vscode';
import { SearchLimits } from '../../protocol/search';
import type { CompanionClient } from '../companion/companionClient';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';
import { SandboxFileIndex } from './fileIndex';
import { findInSandbox } from './findInSandbox';
import { goToFileInSandbox } from './goToFile';
import { runSandboxSearch, searchTarget } from './sandboxSearch';

const NOTICE_SHOWN = 'sandboxSessions.search.fallbackNoticeShown';

export interface SearchCommandDeps {
  companion: CompanionClient;
  onDidChangeFile: vscode.Event<vscode.FileChangeEvent[]>;
  globalState: vscode.Memento;
}

export function registerSearchCommands(deps: SearchCommandDeps): vscode.Disposable[] {
  const index = new SandboxFileIndex();
  const listener = deps.onDidChangeFile((events) => {
    index.onChanges(
      events
        .filter((e) => e.uri.scheme === SANDBOX_SCHEME)
        .map((e) => ({
          authority: e.uri.authority,
          kind: e.type === vscode.FileChangeType.Created ? 'created' : e.type === vscode.FileChangeType.Deleted ? 'deleted' : 'changed',
        })),
    );
  });

  const filesOf = (folder: vscode.Uri): Promise<string[]> => {
    const target = searchTarget(folder);
    if (!target) return Promise.resolve([]);
    return index.filesOf(folder.toString(), folder.authority, async () => {
      const files: string[] = [];
      await runSandboxSearch(deps.companion, target.ref, { kind: 'files', folder: target.folder, maxResults: SearchLimits.maxResults }, { onFiles: (p) => files.push(...p) });
      return files;
    });
  };

  const goToFile = vscode.commands.registerCommand('sandboxSessions.goToFileInSandbox', (initial?: string) => goToFileInSandbox(filesOf, initial));
  const find = vscode.commands.registerCommand('sandboxSessions.findInSandbox', (initial?: string) => findInSandbox(deps.companion, initial));
  return [listener, goToFile, find];
}

/** Why Quick Open and Find in Files do not search sandbox folders here, and how to make them, in words. */
export interface SearchUnavailable {
  /** E.g. "the setting … is off" (a clause: follows "…in this window: "). */
  why: string;
  /** E.g. "turn that setting on" (a clause: follows "…, or "). */
  howToEnable: string;
}

/** Says once, in words, why Ctrl+P and Find in Files do not search sandbox folders here, what does and how to enable them. */
export async function explainFallbackOnce(globalState: vscode.Memento, reason: SearchUnavailable): Promise<void> {
  if (globalState.get<boolean>(NOTICE_SHOWN)) return;
  if (!(vscode.workspace.workspaceFolders ?? []).some((f) => f.uri.scheme === SANDBOX_SCHEME)) return;
  await globalState.update(NOTICE_SHOWN, true);
  const choice = await vscode.window.showInformationMessage(
    `Quick Open and Find in Files do not search sandbox folders in this window: ${reason.why}. ` +
      `Use "Sandbox Sessions: Go to File in Sandbox…" and "Find in Sandbox…", or ${reason.howToEnable}.`,
    'Go to File in Sandbox…',
    'Find in Sandbox…',
  );
  if (choice === 'Go to File in Sandbox…') await vscode.commands.executeCommand('sandboxSessions.goToFileInSandbox');
  else if (choice === 'Find in Sandbox…') await vscode.commands.executeCommand('sandboxSessions.findInSandbox');
}
