// The two proposed VS Code APIs that let Quick Open and Find in Files search an extension's file
// system — `fileSearchProvider2` and `textSearchProvider2` (names without a version suffix; checked
// against code-server 4.139.1 = VS Code 1.139.1). @types/vscode does not declare proposals, so the
// part this extension uses is written out here as our own types; the functions exist only when the
// host enables the proposals for this extension (`enabledApiProposals` in package.json plus
// `--enable-proposed-api sandbox-sessions.sandbox-sessions`), and otherwise throw when called.
import * as vscode from 'vscode';

export const FILE_SEARCH_PROPOSAL = 'fileSearchProvider2';
export const TEXT_SEARCH_PROPOSAL = 'textSearchProvider2';

export interface FolderSearchOptions {
  folder: vscode.Uri;
  includes: string[];
  excludes: (string | vscode.RelativePattern)[];
  followSymlinks: boolean;
  useIgnoreFiles: { local: boolean; parent: boolean; global: boolean };
}

export interface FileSearchOptions2 {
  folderOptions: FolderSearchOptions[];
  /** Identifies a Quick Open session (for caching); absent for other searches, e.g. workspace.findFiles. */
  session?: unknown;
  maxResults: number;
}

export interface FileSearchProvider2 {
  provideFileSearchResults(pattern: string, options: FileSearchOptions2, token: vscode.CancellationToken): vscode.ProviderResult<vscode.Uri[]>;
}

export interface TextSearchQuery2 {
  pattern: string;
  isMultiline?: boolean;
  isRegExp?: boolean;
  isCaseSensitive?: boolean;
  isWordMatch?: boolean;
}

export interface TextSearchOptions2 {
  folderOptions: (FolderSearchOptions & { encoding: string })[];
  maxResults: number;
  previewOptions: { matchLines: number; charsPerLine: number };
  maxFileSize: number | undefined;
  surroundingContext: number;
}

/** A match or a context line, made with the host's own classes (its search service checks `instanceof`). */
export type TextSearchResult2 = object;

export interface TextSearchProvider2 {
  provideTextSearchResults(
    query: TextSearchQuery2,
    options: TextSearchOptions2,
    progress: vscode.Progress<TextSearchResult2>,
    token: vscode.CancellationToken,
  ): vscode.ProviderResult<{ limitHit?: boolean }>;
}

interface ProposedWorkspace {
  registerFileSearchProvider2?: (scheme: string, provider: FileSearchProvider2) => vscode.Disposable;
  registerTextSearchProvider2?: (scheme: string, provider: TextSearchProvider2) => vscode.Disposable;
}

type MatchConstructor = new (uri: vscode.Uri, ranges: { sourceRange: vscode.Range; previewRange: vscode.Range }[], previewText: string) => object;
type ContextConstructor = new (uri: vscode.Uri, text: string, lineNumber: number) => object;

export interface ProposedSearchApi {
  registerFileSearchProvider2(scheme: string, provider: FileSearchProvider2): vscode.Disposable;
  registerTextSearchProvider2(scheme: string, provider: TextSearchProvider2): vscode.Disposable;
  TextSearchMatch2: MatchConstructor;
  TextSearchContext2: ContextConstructor;
}

/** The proposed search API when this host has it enabled for this extension; else why not. */
export function proposedSearchApi(): { api: ProposedSearchApi } | { reason: string } {
  const workspace = vscode.workspace as unknown as ProposedWorkspace;
  const types = vscode as unknown as { TextSearchMatch2?: MatchConstructor; TextSearchContext2?: ContextConstructor };
  const file = workspace.registerFileSearchProvider2;
  const text = workspace.registerTextSearchProvider2;
  if (typeof file !== 'function' || typeof text !== 'function' || !types.TextSearchMatch2 || !types.TextSearchContext2) {
    return { reason: `this VS Code (${vscode.version}) has no ${FILE_SEARCH_PROPOSAL}/${TEXT_SEARCH_PROPOSAL} API` };
  }
  return {
    api: {
      registerFileSearchProvider2: (scheme, provider) => file.call(vscode.workspace, scheme, provider),
      registerTextSearchProvider2: (scheme, provider) => text.call(vscode.workspace, scheme, provider),
      TextSearchMatch2: types.TextSearchMatch2,
      TextSearchContext2: types.TextSearchContext2,
    },
  };
}
