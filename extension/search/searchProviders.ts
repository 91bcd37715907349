// Quick Open, Find in Files and the Explorer's find for `sandbox:` folders: the proposed file and
// text search providers, answered by `sandboxes/search` in the companion (the search runs where the
// files are). File search lists a folder once per Quick Open session (VS Code's `session` object)
// and filters that list as the user types; VS Code ranks what it gets.
import * as vscode from 'vscode';
import { SearchGlobSchema, SearchLimits, type SearchLine } from '../../protocol/search';
import type { CompanionClient } from '../companion/companionClient';
import { SANDBOX_SCHEME, sandboxUri } from '../fs/sandboxFileSystemProvider';
import { fuzzyMatches } from './fuzzyMatch';
import type { FolderSearchOptions, ProposedSearchApi } from './proposedSearchApi';
import { runSandboxSearch, searchTarget } from './sandboxSearch';

/** Globs our search accepts, from VS Code's include/exclude options (others cannot match inside a sandbox folder). */
export function usableGlobs(globs: readonly (string | { pattern: string })[]): string[] {
  return globs.map((g) => (typeof g === 'string' ? g : g.pattern)).filter((g) => SearchGlobSchema.safeParse(g).success);
}

/**
 * A folder's file list for Quick Open, listed once per (Quick Open session, folder) and dropped with the
 * session, so typing filters one listing instead of searching again. A search without a session (e.g.
 * workspace.findFiles) lists afresh each time.
 */
function createFolderLister(companion: CompanionClient): (folder: FolderSearchOptions, session: unknown) => Promise<string[]> {
  // One listing per (Quick Open session, folder); dropped with the session.
  const listings = new WeakMap<object, Map<string, Promise<string[]>>>();

  const list = (folder: FolderSearchOptions): Promise<string[]> => {
    const target = searchTarget(folder.folder);
    if (!target) return Promise.resolve([]);
    const files: string[] = [];
    return runSandboxSearch(
      companion,
      target.ref,
      { kind: 'files', folder: target.folder, includes: usableGlobs(folder.includes), excludes: usableGlobs(folder.excludes), maxResults: SearchLimits.maxResults },
      { onFiles: (paths) => files.push(...paths) },
      // No token: the listing serves the whole Quick Open session, not the keypress that started it.
    ).then(() => files);
  };

  return (folder: FolderSearchOptions, session: unknown): Promise<string[]> => {
    if (typeof session !== 'object' || session === null) return list(folder);
    let perSession = listings.get(session);
    if (!perSession) listings.set(session, (perSession = new Map()));
    const key = folder.folder.toString();
    let listing = perSession.get(key);
    if (!listing) {
      listing = list(folder);
      perSession.set(key, listing);
      listing.catch(() => perSession?.delete(key));
    }
    return listing;
  };
}

export function registerSearchProviders(api: ProposedSearchApi, companion: CompanionClient, log: vscode.LogOutputChannel): vscode.Disposable[] {
  const listFolder = createFolderLister(companion);

  const file = api.registerFileSearchProvider2(SANDBOX_SCHEME, {
    async provideFileSearchResults(pattern, options, token) {
      const out: vscode.Uri[] = [];
      for (const folder of options.folderOptions) {
        const target = searchTarget(folder.folder);
        if (!target) continue;
        try {
          const paths = await listFolder(folder, options.session);
          for (const p of paths) {
            if (out.length >= options.maxResults) break;
            if (fuzzyMatches(p, pattern)) out.push(sandboxUri(folder.folder.authority, p));
          }
        } catch (err) {
          if (!token.isCancellationRequested) log.warn(`file search in ${folder.folder.toString()}: ${err instanceof Error ? err.message : String(err)}`);
          throw err;
        }
      }
      return out;
    },
  });

  const text = api.registerTextSearchProvider2(SANDBOX_SCHEME, {
    async provideTextSearchResults(query, options, progress, token) {
      let limitHit = false;
      for (const folder of options.folderOptions) {
        const target = searchTarget(folder.folder);
        if (!target) continue;
        const report = (lines: SearchLine[]): void => {
          for (const line of lines) progress.report(toResult(api, folder.folder.authority, line));
        };
        const result = await runSandboxSearch(
          companion,
          target.ref,
          {
            kind: 'text',
            folder: target.folder,
            pattern: query.pattern,
            isRegExp: query.isRegExp === true,
            isCaseSensitive: query.isCaseSensitive === true,
            isWordMatch: query.isWordMatch === true,
            contextLines: Math.min(options.surroundingContext ?? 0, SearchLimits.maxContextLines),
            includes: usableGlobs(folder.includes),
            excludes: usableGlobs(folder.excludes),
            maxResults: Math.max(1, Math.min(options.maxResults, SearchLimits.maxResults)),
            ...(options.maxFileSize !== undefined ? { maxFileBytes: Math.max(1, Math.min(options.maxFileSize, SearchLimits.maxFileBytes)) } : {}),
          },
          { onLines: report },
          token,
        );
        limitHit ||= result.limitHit;
      }
      return { limitHit };
    },
  });
  return [file, text];
}

/** One result line as VS Code's TextSearchMatch2 / TextSearchContext2 (0-based ranges; context lines are 1-based). */
function toResult(api: ProposedSearchApi, key: string, line: SearchLine): object {
  const uri = sandboxUri(key, line.path);
  if (line.kind === 'context') return new api.TextSearchContext2(uri, line.text, line.line);
  const ranges = line.ranges.map((r) => ({
    sourceRange: new vscode.Range(line.line - 1, line.textOffset + r.start, line.line - 1, line.textOffset + r.end),
    previewRange: new vscode.Range(0, r.start, 0, r.end),
  }));
  return new api.TextSearchMatch2(uri, ranges, line.text);
}
