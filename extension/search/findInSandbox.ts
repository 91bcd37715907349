// Find in Sandbox…: text (or /regexp/) found in a sandbox folder, the matches streaming into a Quick Pick
// grouped by file; choosing one opens the file at the match. Closing the pick cancels the search.
import * as vscode from 'vscode';
import type { SearchLine, SearchResult } from '../../protocol/search';
import type { CompanionClient } from '../companion/companionClient';
import { sandboxUri } from '../fs/sandboxFileSystemProvider';
import { messageOf } from '../sandboxes/errorText';
import { groupByFile, parseFindInput } from './findResults';
import { runSandboxSearch, searchTarget } from './sandboxSearch';
import { pickSandboxFolder } from './searchFolder';

type Item = vscode.QuickPickItem & { line?: SearchLine };

export async function findInSandbox(companion: CompanionClient, initial?: string): Promise<void> {
  const folder = await pickSandboxFolder();
  if (!folder) return;
  const input = await askFindInput(folder, initial);
  if (!input) return;
  const { pattern, isRegExp, isCaseSensitive } = parseFindInput(input);
  const target = searchTarget(folder.uri);
  if (!target) return;
  const results = openResultsPick(folder, input);
  try {
    const result = await runSandboxSearch(
      companion,
      target.ref,
      { kind: 'text', folder: target.folder, pattern, isRegExp, isCaseSensitive },
      { onLines: (l) => results.add(l), onPhase: (message) => (results.pick.placeholder = message) },
      results.cancel.token,
    );
    results.finish(result);
  } catch (err) {
    if (!results.cancel.token.isCancellationRequested) {
      results.pick.hide();
      void vscode.window.showErrorMessage(`Find in Sandbox: ${messageOf(err)}`);
    }
  } finally {
    results.pick.busy = false;
  }
}

/** The text to find: given, else asked for (the selection, if one line, as the default). */
async function askFindInput(folder: vscode.WorkspaceFolder, initial: string | undefined): Promise<string | undefined> {
  if (typeof initial === 'string') return initial;
  const selected = vscode.window.activeTextEditor?.document.getText(vscode.window.activeTextEditor.selection);
  return vscode.window.showInputBox({
    title: `Find in ${folder.name}`,
    prompt: 'Text to find (write /pattern/ for a regular expression, /pattern/i to ignore case)',
    value: selected && !selected.includes('\n') ? selected : '',
  });
}

/** The Quick Pick the matches stream into (redrawn at most every 50 ms); hiding it cancels the search. */
function openResultsPick(folder: vscode.WorkspaceFolder, input: string) {
  const pick = vscode.window.createQuickPick<Item>();
  pick.title = `Find in ${folder.name}: ${input}`;
  pick.placeholder = 'Searching…';
  pick.matchOnDescription = true;
  pick.busy = true;
  const lines: SearchLine[] = [];
  const render = (): void => {
    const items: Item[] = [];
    for (const [file, matches] of groupByFile(lines)) {
      items.push({ label: file, kind: vscode.QuickPickItemKind.Separator });
      for (const m of matches) items.push({ label: m.text.trim() || ' ', description: `line ${m.line}`, line: m });
    }
    const active = pick.activeItems[0]?.line;
    pick.items = items;
    if (active) pick.activeItems = items.filter((i) => i.line === active);
  };
  let scheduled: NodeJS.Timeout | undefined;
  const cancel = new vscode.CancellationTokenSource();
  pick.onDidAccept(async () => {
    const line = pick.selectedItems[0]?.line;
    if (!line) return;
    pick.hide();
    await openMatch(folder, line);
  });
  pick.onDidHide(() => {
    cancel.cancel();
    pick.dispose();
  });
  pick.show();
  return {
    pick,
    cancel,
    add(more: SearchLine[]): void {
      lines.push(...more);
      scheduled ??= setTimeout(() => {
        scheduled = undefined;
        render();
      }, 50);
    },
    /** The search ended: every match shown, and a summary as the placeholder. */
    finish(result: SearchResult): void {
      clearTimeout(scheduled);
      render();
      pick.placeholder = summary(input, lines, result);
    },
  };
}

function summary(input: string, lines: SearchLine[], result: SearchResult): string {
  const found = groupByFile(lines);
  const count = [...found.values()].reduce((n, g) => n + g.length, 0);
  return count === 0
    ? `No results for ${input}`
    : `${count} result${count === 1 ? '' : 's'} in ${found.size} file${found.size === 1 ? '' : 's'}${result.limitHit ? ` (stopped: ${result.stopped ?? 'limit'} limit reached)` : ''} — choose one to open it`;
}

async function openMatch(folder: vscode.WorkspaceFolder, line: SearchLine): Promise<void> {
  const column = line.textOffset + (line.ranges[0]?.start ?? 0);
  const end = line.textOffset + (line.ranges[0]?.end ?? 0);
  const range = new vscode.Range(line.line - 1, column, line.line - 1, end);
  await vscode.window.showTextDocument(sandboxUri(folder.uri.authority, line.path), { selection: range, preview: false });
}
