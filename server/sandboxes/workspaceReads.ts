// `sandboxes/files/*`: a local sandbox's workspace read in place by the companion (the same machine and user as
// the local runtime), so its files stay readable while it is Finalizing — its gateway then refuses every call,
// as upstream kruntimes does. Confined as the local gateway confines its file API (server/local/workspacePaths.ts:
// workspace-relative, no `..`, a symbolic link followed only while it stays inside), and then, because a command
// accepted before the Drain may still be changing the workspace, the file or folder is opened without following
// a final link and, on Linux, the opened descriptor's real path is checked to be inside the workspace before a
// byte or a name is read (as server/search/hostTree.ts reads): a folder swapped for a link meanwhile leads nowhere.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { CompanionError } from '../../protocol/companion';
import { SANDBOX_FILES_UNREADABLE, type SandboxFileEntry, type SandboxFileType } from '../../protocol/companion/files';
import type { ProviderKind, SandboxRef } from '../../protocol/sandboxes';
import { SessionError } from '../local/sessionError';
import { resolveFollow } from '../local/workspacePaths';
import type { SandboxProvider } from './provider';

const canCheckFd = process.platform === 'linux';

export interface WorkspaceStat {
  type: 'file' | 'directory' | 'other';
  sizeBytes: number;
  mtimeMs: number;
}

export interface WorkspaceRead {
  contents: Buffer;
  /** The file's size when it was read. */
  size: number;
  truncated: boolean;
}

/** The three reads, on a sandbox found by its reference (the handler's service). */
export class SandboxWorkspaceReads {
  constructor(private readonly providers: ReadonlyMap<ProviderKind, SandboxProvider>) {}

  async stat(ref: SandboxRef, rel: string): Promise<WorkspaceStat> {
    return statInWorkspace(await this.root(ref), rel);
  }

  async list(ref: SandboxRef, rel: string, limit: number, pageToken: string): Promise<{ entries: SandboxFileEntry[]; nextPageToken: string }> {
    return listInWorkspace(await this.root(ref), rel, limit, pageToken);
  }

  async read(ref: SandboxRef, rel: string, offset: number, length: number): Promise<WorkspaceRead> {
    return readInWorkspace(await this.root(ref), rel, offset, length);
  }

  /** The sandbox's workspace on this machine, for reads (Ready or Finalizing), or the stable refusal. */
  async root(ref: SandboxRef): Promise<string> {
    const provider = this.providers.get(ref.provider);
    if (!provider) throw new CompanionError('unavailable', `the ${ref.provider} provider is not available in this server`);
    const dir = await provider.hostDirectory?.(ref, 'read');
    if (dir !== undefined) return dir;
    const phase = (await provider.get(ref)).sandbox.phase;
    throw new CompanionError('not_ready', unreadableText(ref.name, phase), SANDBOX_FILES_UNREADABLE);
  }
}

function unreadableText(name: string, phase: string | undefined): string {
  if (phase === 'Finalizing') {
    return `${name} is closing (Drain): its files cannot be read until it finishes exporting its artifacts. Download its artifacts once it has closed.`;
  }
  if (phase === 'Ready') return `${name}'s files are not on this machine: read them through its gateway (sandboxes/open).`;
  return `${name} is ${phase ?? 'not ready'}: its files cannot be read here.`;
}

function inside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + path.sep);
}

function escapeError(rel: string): CompanionError {
  return new CompanionError('invalid_params', `/${rel} leads outside the sandbox's workspace (through a symbolic link); nothing was read`, 'path_escape');
}

/** A path the local gateway's rules refuse, or whose folder is missing, as a companion error. */
function pathError(err: unknown, rel: string): unknown {
  // A part of the path removed or replaced while it was being resolved (a command may still be running).
  const errno = (err as NodeJS.ErrnoException | null)?.code;
  if (errno === 'ENOENT' || errno === 'ENOTDIR' || errno === 'EINVAL' || errno === 'ELOOP') {
    return new CompanionError('not_found', `no /${rel} in the sandbox (or it changed while it was looked up)`);
  }
  if (!(err instanceof SessionError)) return err;
  if (err.code === 'ParentUnresolved' || err.grpc === 'NotFound') return new CompanionError('not_found', `no /${rel} in the sandbox`);
  if (err.grpc === 'InvalidArgument') return new CompanionError('invalid_params', `${rel === '' ? 'the path' : JSON.stringify(rel)}: ${err.message}`, 'path_refused');
  return err;
}

/**
 * Opens a workspace path for reading, confined (see the top of this file). `directory` opens only a folder. The
 * caller closes the handle.
 */
async function openConfined(root: string, rel: string, directory: boolean): Promise<{ handle: fsp.FileHandle; abs: string; rel: string }> {
  const realRoot = await fsp.realpath(root);
  let resolved;
  try {
    resolved = await resolveFollow(root, rel, { allowRoot: true });
  } catch (err) {
    throw pathError(err, rel);
  }
  const flags = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK | (directory ? fs.constants.O_DIRECTORY : 0);
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(resolved.abs, flags);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CompanionError('not_found', `no /${resolved.rel} in the sandbox`);
    if (code === 'ENOTDIR') throw new CompanionError('not_found', `/${resolved.rel} is not a folder`);
    // The last part became a symbolic link after it was checked: not followed.
    if (code === 'ELOOP') throw escapeError(resolved.rel);
    if (code === 'EACCES' || code === 'ENXIO') throw new CompanionError('refused', `/${resolved.rel} cannot be opened for reading (${code})`);
    throw err;
  }
  try {
    // The descriptor's own path: a folder on the way swapped for a link after the check shows here.
    const real = canCheckFd ? await fsp.readlink(`/proc/self/fd/${handle.fd}`) : await fsp.realpath(resolved.abs);
    if (!inside(realRoot, real)) throw escapeError(resolved.rel);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return { handle, abs: resolved.abs, rel: resolved.rel };
}

function typeOf(st: fs.Stats): SandboxFileType {
  return st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';
}

/** What `rel` is (a link inside the workspace is followed). */
export async function statInWorkspace(root: string, rel: string): Promise<WorkspaceStat> {
  const { handle } = await openConfined(root, rel, false);
  try {
    const st = await handle.stat();
    const type = typeOf(st);
    return { type: type === 'symlink' ? 'other' : type, sizeBytes: st.size, mtimeMs: st.mtimeMs };
  } finally {
    await handle.close();
  }
}

/** One page of a folder's children, byte-wise by name, after `pageToken` (the last name of the previous page). */
export async function listInWorkspace(root: string, rel: string, limit: number, pageToken: string): Promise<{ entries: SandboxFileEntry[]; nextPageToken: string }> {
  const { handle, abs } = await openConfined(root, rel, true);
  try {
    // On Linux the folder is read through its descriptor, so it is the one checked above.
    const base = canCheckFd ? `/proc/self/fd/${handle.fd}` : abs;
    const after = Buffer.from(pageToken);
    const names = (await fsp.readdir(base))
      .map((name) => ({ name, key: Buffer.from(name) }))
      .filter((n) => pageToken === '' || Buffer.compare(n.key, after) > 0)
      .sort((a, b) => Buffer.compare(a.key, b.key));
    const page = names.slice(0, limit);
    const entries: SandboxFileEntry[] = [];
    for (const { name } of page) {
      const st = await fsp.lstat(path.join(base, name)).catch(() => undefined);
      if (!st) continue; // removed while listing: a listing is not a snapshot
      entries.push({ name, type: typeOf(st), sizeBytes: st.size, mtimeMs: st.mtimeMs });
    }
    return { entries, nextPageToken: names.length > limit ? (page.at(-1)?.name ?? '') : '' };
  } finally {
    await handle.close();
  }
}

/** Up to `length` bytes of a file from `offset`. */
export async function readInWorkspace(root: string, rel: string, offset: number, length: number): Promise<WorkspaceRead> {
  const { handle, rel: file } = await openConfined(root, rel, false);
  try {
    const st = await handle.stat();
    if (st.isDirectory()) throw new CompanionError('invalid_params', `/${file} is a folder, not a file`, 'is_a_directory');
    if (!st.isFile()) throw new CompanionError('refused', `/${file} is not a regular file`);
    const buffer = Buffer.alloc(Math.max(0, Math.min(length, st.size - offset)));
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, offset + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { contents: buffer.subarray(0, filled), size: st.size, truncated: offset + filled < st.size };
  } finally {
    await handle.close();
  }
}
