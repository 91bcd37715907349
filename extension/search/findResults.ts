// The editor-independent parts of the fallback search commands: what the user typed in Find in
// Sandbox… as a query, results grouped by file for the list, and paths ranked for Go to File.
import type { SearchLine } from '../../protocol/search';
import { fuzzyScore } from './fuzzyMatch';

/** Parses what the user typed in Find in Sandbox: `/re/` is a regular expression (`/re/i` any case), else literal text. */
export function parseFindInput(input: string): { pattern: string; isRegExp: boolean; isCaseSensitive: boolean } {
  const re = /^\/(.+)\/(i?)$/s.exec(input);
  if (re) return { pattern: re[1] as string, isRegExp: true, isCaseSensitive: re[2] !== 'i' };
  // Smart case, as VS Code's search.smartCase: an upper-case letter makes it case-sensitive.
  return { pattern: input, isRegExp: false, isCaseSensitive: /[A-Z]/.test(input) };
}

/** Groups result lines by file, in the order files first appeared (what the results Quick Pick shows). */
export function groupByFile(lines: readonly SearchLine[]): Map<string, SearchLine[]> {
  const groups = new Map<string, SearchLine[]>();
  for (const line of lines) {
    if (line.kind !== 'match') continue;
    const group = groups.get(line.path) ?? [];
    if (group.length === 0) groups.set(line.path, group);
    group.push(line);
  }
  return groups;
}

/** The best `limit` paths for a typed name, best first. */
export function rankPaths(paths: readonly string[], query: string, limit: number): string[] {
  if (query.trim() === '') return paths.slice(0, limit);
  const scored: { path: string; score: number }[] = [];
  for (const p of paths) {
    const score = fuzzyScore(p, query);
    if (score !== undefined) scored.push({ path: p, score });
  }
  scored.sort((a, b) => b.score - a.score || (a.path < b.path ? -1 : 1));
  return scored.slice(0, limit).map((s) => s.path);
}
