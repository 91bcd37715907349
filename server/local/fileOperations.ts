// The file half of the session API on a local workspace: write, mkdir -p, delete, rename,
// bounded (and, as a local extension, ranged) reads, and byte-wise ordered listing pages
// with the Bash runtime's cursor. Messages and gRPC codes are the Bash Runtime Server's.
import fs from 'node:fs/promises';
import path from 'node:path';
import { GatewayLimits, GatewayMessages, type FileEntry, type ListResponse, type ReadResponse } from '../../protocol/kruntimes/gateway';
import { pageStart, takePage } from './listingPage';
import { SessionError, goPathError, failedPrecondition } from './sessionError';
import { resolveFollow, resolveWorkspacePath, sandboxPath } from './workspacePaths';

export async function writeSessionFile(root: string, p: string, contents: Buffer, createParents: boolean): Promise<void> {
  if (contents.length > GatewayLimits.maxFileBytes) throw new SessionError('ResourceExhausted', GatewayMessages.contentsTooLarge);
  const target = await resolveFollow(root, p, {}).catch(async (err: unknown) => {
    if (createParents && err instanceof SessionError && err.code === 'ParentUnresolved') {
      return resolveWorkspacePath(root, p, { createParents: true });
    }
    throw err;
  });
  try {
    await fs.writeFile(target.abs, contents, { mode: 0o644 });
  } catch (err) {
    throw new SessionError('Internal', `write session file: ${goPathError('open', sandboxPath(target.rel), err)}`);
  }
}

export async function createSessionDirectory(root: string, p: string): Promise<void> {
  const target = await resolveWorkspacePath(root, p, { createParents: true });
  try {
    await fs.mkdir(target.abs, { recursive: true, mode: 0o755 });
  } catch (err) {
    throw new SessionError('Internal', `create session directory: ${goPathError('mkdir', sandboxPath(target.rel), err)}`);
  }
}

export async function deleteSessionFile(root: string, p: string, recursive: boolean): Promise<void> {
  const target = await resolveWorkspacePath(root, p);
  let st;
  try {
    st = await fs.lstat(target.abs);
  } catch (err) {
    throw new SessionError('NotFound', `delete session file: ${goPathError('lstat', sandboxPath(target.rel), err)}`);
  }
  if (st.isDirectory() && !recursive) throw failedPrecondition(GatewayMessages.recursiveRequired);
  await fs.rm(target.abs, { recursive: st.isDirectory(), force: false });
}

export async function renameSessionFile(root: string, from: string, to: string, overwrite: boolean): Promise<void> {
  const source = await resolveWorkspacePath(root, from);
  const dest = await resolveWorkspacePath(root, to);
  try {
    await fs.lstat(source.abs);
  } catch (err) {
    throw new SessionError('NotFound', `rename session file: ${goPathError('lstat', sandboxPath(source.rel), err)}`);
  }
  const exists = await fs.lstat(dest.abs).then(
    () => true,
    () => false,
  );
  if (exists && !overwrite) throw new SessionError('AlreadyExists', GatewayMessages.destinationExists);
  try {
    await fs.rename(source.abs, dest.abs);
  } catch (err) {
    throw new SessionError('Internal', `rename session file: ${goPathError('rename', sandboxPath(source.rel), err)}`);
  }
}

/** A read as the gateway answers it (ReadResponseSchema), with the contents as bytes rather than base64. */
export type ReadResult = Pick<ReadResponse, 'truncated'> & { contents: Buffer };

/** Reads up to `maxBytes` (clamped to 1 MiB) from `offset`; `truncated` when more bytes follow. */
export async function readSessionFile(root: string, p: string, maxBytes: number, offset = 0): Promise<ReadResult> {
  const target = await resolveFollow(root, p);
  const limit = Math.min(maxBytes, GatewayLimits.maxFileBytes);
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(target.abs, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SessionError('NotFound', `open session file: ${goPathError('open', sandboxPath(target.rel), err)}`);
    throw new SessionError('Internal', `open session file: ${goPathError('open', sandboxPath(target.rel), err)}`);
  }
  try {
    const st = await handle.stat();
    if (st.isDirectory()) throw new SessionError('Internal', `read session file: read ${sandboxPath(target.rel)}: is a directory`);
    const buf = Buffer.alloc(Math.max(0, Math.min(limit, st.size - offset)));
    let filled = 0;
    while (filled < buf.length) {
      const { bytesRead } = await handle.read(buf, filled, buf.length - filled, offset + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    const probe = Buffer.alloc(1);
    const { bytesRead: more } = await handle.read(probe, 0, 1, offset + filled);
    return { contents: buf.subarray(0, filled), truncated: more > 0 };
  } finally {
    await handle.close();
  }
}

/** One page of a listing: the protocol's ListResponseSchema. */
export type ListPage = Pick<ListResponse, 'entries' | 'nextPageToken'>;

/** One page of a directory's direct children, byte-wise ordered (é after z). */
export async function listSessionFiles(root: string, dir: string, limit: number, pageToken: string): Promise<ListPage> {
  const after = pageStart(dir, limit, pageToken);
  const target = await resolveFollow(root, dir, { allowRoot: true });
  let names: string[];
  try {
    names = await fs.readdir(target.abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SessionError('NotFound', `list session file: ${goPathError('open', sandboxPath(target.rel), err)}`);
    throw new SessionError('Internal', `list session file: ${goPathError('readdirent', sandboxPath(target.rel), err)}`);
  }
  const { page, nextPageToken } = takePage(names, (n) => n, dir, after, limit);
  const entries: FileEntry[] = [];
  for (const name of page) {
    const st = await fs.lstat(path.join(target.abs, name)).catch(() => undefined);
    if (!st) continue; // removed while listing: a listing is not a snapshot
    entries.push({ path: name, directory: st.isDirectory(), sizeBytes: st.size });
  }
  return { entries, nextPageToken };
}
