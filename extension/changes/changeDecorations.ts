// The Explorer's marks for what a sandbox changed since its baseline (a revision, or since it was opened): a letter
// (A, M) and a colour on the file, a dot on the folders above it — as VS Code's git marks look, from the Source
// Control entry's list.
import * as vscode from 'vscode';
import { sinceWords } from './changeBaselines';
import type { SandboxChangesView } from './sandboxChangesView';

export function registerChangeDecorations(view: SandboxChangesView): vscode.Disposable {
  return vscode.window.registerFileDecorationProvider({
    onDidChangeFileDecorations: view.onDidChangeDecorations,
    provideFileDecoration: (uri) => {
      const change = view.status(uri);
      if (!change || change.status === 'deleted') return undefined;
      const since = sinceWords(change.baseline);
      return change.status === 'added'
        ? { badge: 'A', tooltip: `Added since ${since}`, color: new vscode.ThemeColor('sandboxSessions.addedResourceForeground'), propagate: true }
        : { badge: 'M', tooltip: `Modified since ${since}`, color: new vscode.ThemeColor('sandboxSessions.modifiedResourceForeground'), propagate: true };
    },
  });
}
