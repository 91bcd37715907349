// One `sandboxes/search` request from the editor: a sandbox URI's folder turned into the sandbox
// and a workspace-relative folder, results delivered batch by batch as the companion streams them
// (`$/progress` partials), VS Code's cancellation passed on (the companion stops the search at its
// source). Shared by the search providers and the fallback commands.
import type * as vscode from 'vscode';
import { parseSandboxKey, type SandboxRef } from '../../protocol/sandboxes';
import { SearchPartialSchema, type SearchLine, type SearchQueryInput, type SearchResult } from '../../protocol/search';
import type { CompanionClient } from '../companion/companionClient';

/** The sandbox and workspace-relative folder of a `sandbox:` folder URI. */
export function searchTarget(folder: vscode.Uri): { ref: SandboxRef; folder: string } | undefined {
  const ref = parseSandboxKey(folder.authority);
  if (!ref) return undefined;
  return { ref, folder: folder.path.replace(/^\/+/, '').replace(/\/+$/, '') };
}

export interface SearchSinks {
  onFiles?: (paths: string[]) => void;
  onLines?: (lines: SearchLine[]) => void;
  /** What the search is doing, in words (e.g. waiting for the sandbox's command queue). */
  onPhase?: (message: string) => void;
}

/** Runs one search; every result goes to the sinks (streamed, then the rest from the response). */
export async function runSandboxSearch(
  companion: CompanionClient,
  ref: SandboxRef,
  query: SearchQueryInput,
  sinks: SearchSinks,
  token?: vscode.CancellationToken,
): Promise<SearchResult> {
  const result = await companion.request('sandboxes/search', { ref, query }, {
    ...(token ? { token } : {}),
    onProgress: (value) => {
      if (value.partial !== undefined) {
        const partial = SearchPartialSchema.safeParse(value.partial);
        if (!partial.success) return;
        if (partial.data.files?.length) sinks.onFiles?.(partial.data.files);
        if (partial.data.lines?.length) sinks.onLines?.(partial.data.lines);
      } else if (value.message !== undefined) {
        sinks.onPhase?.(value.message);
      }
    },
  });
  if (result.files.length > 0) sinks.onFiles?.(result.files);
  if (result.lines.length > 0) sinks.onLines?.(result.lines);
  return result;
}
