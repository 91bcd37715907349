// A local sandbox's workspace as a search tree, read in place by the companion (the same machine
// and user as the local runtime). Confined as the backends confine commands: paths are only ever
// root + names from listings, symbolic links are reported as neither file nor folder (never
// followed), a file is opened with O_NOFOLLOW and, on Linux, the opened file's real path is checked
// to be inside the workspace (so a folder swapped for a link while the search runs leads nowhere).
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { ReadOutcome, TreeEntry, TreeSource } from './treeSearch';
import { SandboxSessionsError } from '../../protocol/errors';

export class SearchPathError extends SandboxSessionsError<'search_path'> {
  override readonly name = 'SearchPathError';
  readonly service = 'search';
  constructor(message: string) {
    super('search_path', message);
  }
}

/** The folder to search, checked: relative, no `..`, and no symbolic link on the way. */
export async function resolveSearchFolder(realRoot: string, folder: string): Promise<string> {
  const cleaned = folder === '' ? '' : path.posix.normalize(folder).replace(/^\.\/?/, '').replace(/\/+$/, '');
  if (folder.startsWith('/') || cleaned === '..' || cleaned.startsWith('../')) {
    throw new SearchPathError(`the folder to search must be inside the sandbox's workspace: ${folder}`);
  }
  let at = realRoot;
  for (const part of cleaned === '' ? [] : cleaned.split('/')) {
    at = path.join(at, part);
    const st = await fsp.lstat(at).catch(() => undefined);
    if (st === undefined) throw new SearchPathError(`no folder /${cleaned} in the sandbox`);
    if (st.isSymbolicLink()) throw new SearchPathError(`/${cleaned} is reached through a symbolic link; search its target folder instead`);
    if (!st.isDirectory()) throw new SearchPathError(`/${cleaned} is not a folder`);
  }
  return cleaned;
}

const canCheckFd = process.platform === 'linux';

export function hostTree(realRoot: string): TreeSource {
  const abs = (rel: string): string => (rel === '' ? realRoot : path.join(realRoot, rel));
  return {
    async list(rel): Promise<TreeEntry[]> {
      const dirents = await fsp.readdir(abs(rel), { withFileTypes: true });
      return dirents.map((d) => ({ name: d.name, kind: d.isFile() ? 'file' : d.isDirectory() ? 'directory' : 'other' }));
    },
    async read(rel, maxBytes): Promise<ReadOutcome> {
      let fd: number;
      try {
        fd = await new Promise<number>((resolve, reject) =>
          fs.open(abs(rel), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK, (err, f) => (err ? reject(err) : resolve(f))),
        );
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES') return { skipped: code === 'ELOOP' ? 'not-a-file' : 'gone' };
        throw err;
      }
      try {
        // Both asked at once (one trip through the thread pool fewer before the bytes are read).
        const [st, real] = await Promise.all([
          new Promise<fs.Stats>((resolve, reject) => fs.fstat(fd, (err, s) => (err ? reject(err) : resolve(s)))),
          canCheckFd ? fsp.readlink(`/proc/self/fd/${fd}`) : undefined,
        ]);
        if (!st.isFile()) return { skipped: 'not-a-file' };
        if (real !== undefined && !real.startsWith(realRoot + path.sep)) return { skipped: 'not-a-file' };
        if (st.size > maxBytes) return { skipped: 'large' };
        const buffer = Buffer.allocUnsafe(st.size);
        let filled = 0;
        while (filled < st.size) {
          const n = await new Promise<number>((resolve, reject) =>
            fs.read(fd, buffer, filled, st.size - filled, filled, (err, bytes) => (err ? reject(err) : resolve(bytes))),
          );
          if (n === 0) break;
          filled += n;
        }
        return { contents: filled === st.size ? buffer : buffer.subarray(0, filled) };
      } finally {
        fs.close(fd, () => undefined);
      }
    },
  };
}
