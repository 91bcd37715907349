// Which entries a search looks at: the workspace snapshot policy's exclusions by default
// (`.git`, `node_modules`, caches, logs, runtime scratch — the same list a saved session leaves
// out), then the caller's exclude globs, and, for files, its include globs. Folders are pruned
// as the walk reaches them, so an excluded tree is never read.
import { classifyWorkspacePath } from '../bundle/snapshotPolicy';
import { compileGlobs } from './globMatcher';

/** Folder names the default exclusions prune (for a command in the sandbox: `find -prune`, `grep --exclude-dir`). */
export const DEFAULT_EXCLUDED_FOLDERS: readonly string[] = ['.git', 'node_modules', '.cache', '.maka-cache', '.turbo', 'logs', '.logs', '.maka-runtime', '.maka-activation'];

export interface SearchFilter {
  /** Whether the walk descends into this folder (workspace-relative). */
  folder(relPath: string): boolean;
  /** Whether this file is searched. */
  file(relPath: string): boolean;
}

export function createSearchFilter(options: { includes: readonly string[]; excludes: readonly string[]; useDefaultExcludes: boolean }): SearchFilter {
  const include = compileGlobs(options.includes);
  const exclude = compileGlobs(options.excludes);
  const policyExcludes = (relPath: string, isDirectory: boolean): boolean =>
    options.useDefaultExcludes && classifyWorkspacePath(relPath.split('/'), isDirectory).verdict === 'exclude';
  return {
    folder: (relPath) => !policyExcludes(relPath, true) && !(exclude?.(relPath) ?? false),
    file: (relPath) => !policyExcludes(relPath, false) && !(exclude?.(relPath) ?? false) && (include?.(relPath) ?? true),
  };
}

/** Quick Open's kind of match: the pattern's characters appear in the path in order, ignoring case and spaces. */
export function fuzzyContains(relPath: string, pattern: string): boolean {
  const needle = pattern.replace(/\s+/g, '').toLowerCase();
  if (needle === '') return true;
  const hay = relPath.toLowerCase();
  let at = 0;
  for (const ch of needle) {
    at = hay.indexOf(ch, at);
    if (at < 0) return false;
    at++;
  }
  return true;
}
