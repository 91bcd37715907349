// Workspace-relative paths as SandboxFiles keys them ('' is the workspace root, no leading or trailing
// slash): small helpers shared by the file system's caches, kept apart so each cache uses the same rules.
import path from 'node:path/posix';

export function normalize(p: string): string {
  return p.replace(/^\/+/, '').replace(/\/+$/, '');
}

export function parentOf(p: string): string {
  const d = path.dirname(p);
  return d === '.' ? '' : d;
}

export function depth(p: string): number {
  return p === '' ? 0 : p.split('/').length;
}

/** Whether `p` is `dir` or inside it (everything is inside the root ''). */
export function isUnder(p: string, dir: string): boolean {
  return dir === '' || p === dir || p.startsWith(`${dir}/`);
}
