// Workspace-relative paths only, with the kruntimes Runtime Server's refusals: empty,
// absolute, a `..` escape after cleaning, the root for a file operation, and any symlink on
// the way that leads outside the workspace. Everything that touches a session file goes
// through here first.
import fs from 'node:fs/promises';
import path from 'node:path';
import { GatewayMessages } from '../../protocol/kruntimes/gateway';
import { goPathError, invalidArgument, SessionError } from './sessionError';

export interface ResolvedPath {
  /** Absolute host path (parent resolved through symlinks, final component not followed). */
  abs: string;
  /** The cleaned workspace-relative path ("" for the root). */
  rel: string;
}

/** Cleans and checks the lexical form; "" means the workspace root. */
export function cleanRelative(p: string, opts: { allowRoot: boolean }): string {
  if (p === '' && !opts.allowRoot) throw invalidArgument(GatewayMessages.pathRequired);
  if (p.startsWith('/') || path.isAbsolute(p)) throw invalidArgument(GatewayMessages.pathRelative);
  const cleaned = p === '' ? '.' : path.posix.normalize(p).replace(/\/+$/, '');
  if (cleaned === '..' || cleaned.startsWith('../')) throw invalidArgument(GatewayMessages.pathEscape);
  if (cleaned === '.' || cleaned === '') {
    if (!opts.allowRoot) throw invalidArgument(GatewayMessages.pathRoot);
    return '';
  }
  return cleaned;
}

/**
 * How a message names a workspace path: from the sandbox's root (`/src/app.js`), as its terminal
 * prompt does — never the host folder the local runtime keeps the workspace in.
 */
export function sandboxPath(rel: string): string {
  return `/${rel}`;
}

function inside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + path.sep);
}

/**
 * Resolves a workspace path. The parent directory must exist (unless `createParents`, in
 * which case missing parents are created after the part that exists is checked), and every
 * symlink on the way must stay inside the workspace. The final component is not followed;
 * use `resolveFollow` when the operation reads through it.
 */
export async function resolveWorkspacePath(
  root: string,
  p: string,
  opts: { allowRoot?: boolean; createParents?: boolean } = {},
): Promise<ResolvedPath> {
  const rel = cleanRelative(p, { allowRoot: opts.allowRoot ?? false });
  const realRoot = await fs.realpath(root);
  if (rel === '') return { abs: realRoot, rel };
  const parts = rel.split('/');
  const base = parts.pop() as string;
  let dir = realRoot;
  for (let i = 0; i < parts.length; i++) {
    const next = path.join(dir, parts[i] as string);
    let real: string;
    try {
      real = await fs.realpath(next);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && opts.createParents) {
        // Either nothing exists here, or a dangling symlink does: refuse the latter.
        const st = await fs.lstat(next).catch(() => undefined);
        if (st?.isSymbolicLink()) throw invalidArgument(GatewayMessages.pathSymlinkEscape);
        await fs.mkdir(path.join(dir, ...parts.slice(i)), { recursive: true });
        dir = path.join(dir, ...parts.slice(i));
        break;
      }
      throw new SessionError('InvalidArgument', `resolve file parent: ${goPathError('lstat', sandboxPath(parts.slice(0, i + 1).join('/')), err)}`, 'ParentUnresolved');
    }
    if (!inside(realRoot, real)) throw invalidArgument(GatewayMessages.pathSymlinkEscape);
    dir = real;
  }
  return { abs: path.join(dir, base), rel };
}

/** Like resolveWorkspacePath, then follows a final symlink and checks where it lands. */
export async function resolveFollow(root: string, p: string, opts: { allowRoot?: boolean } = {}): Promise<ResolvedPath> {
  const resolved = await resolveWorkspacePath(root, p, opts);
  const st = await fs.lstat(resolved.abs).catch(() => undefined);
  if (st?.isSymbolicLink()) {
    const realRoot = await fs.realpath(root);
    let real: string;
    try {
      real = await fs.realpath(resolved.abs);
    } catch {
      // A dangling link: decide by where it points lexically.
      const target = path.resolve(path.dirname(resolved.abs), await fs.readlink(resolved.abs));
      if (!inside(realRoot, target)) throw invalidArgument(GatewayMessages.pathSymlinkEscape);
      return { abs: target, rel: resolved.rel };
    }
    if (!inside(realRoot, real)) throw invalidArgument(GatewayMessages.pathSymlinkEscape);
    return { abs: real, rel: resolved.rel };
  }
  return resolved;
}
