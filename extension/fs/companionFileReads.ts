// Reading a sandbox's files through the companion server (`sandboxes/files/*`) instead of its gateway: what
// SandboxFiles falls back to while a sandbox is Finalizing, when the gateway refuses every call but a local
// sandbox's workspace can still be read in place by the companion. Listings come back in the gateway's shape
// (FileEntry) so SandboxFiles caches them like any other; failures become FsErrors.
import type { FileEntry } from '../../protocol/kruntimes/gateway';
import type { SandboxFileEntry } from '../../protocol/companion/files';
import { SANDBOX_FILES_MAX_READ_BYTES } from '../../protocol/companion/files';
import { FsError } from './fsError';

/**
 * The companion's `sandboxes/files/list` and `sandboxes/files/read` for one sandbox (the registry binds its
 * reference). A failure carries the protocol's stable `code` (and `causeCode`), as CompanionRequestError does.
 */
export interface SandboxFileReads {
  list(path: string, pageToken: string): Promise<{ entries: SandboxFileEntry[]; nextPageToken: string }>;
  read(path: string, offset: number, length: number): Promise<{ contents: string; size: number; truncated: boolean }>;
}

/** Every entry of a folder, paged, as the gateway would list them. */
export async function listThroughCompanion(reads: SandboxFileReads, dir: string, counters: { listPages: number }): Promise<FileEntry[]> {
  const entries: FileEntry[] = [];
  let pageToken = '';
  do {
    counters.listPages += 1;
    const page = await call(() => reads.list(dir, pageToken), dir || '/');
    // As the gateway lists them: only a folder is a directory (a symbolic link is listed, not followed).
    for (const e of page.entries) entries.push({ path: e.name, directory: e.type === 'directory', sizeBytes: e.sizeBytes });
    pageToken = page.nextPageToken;
  } while (pageToken !== '');
  return entries;
}

/** A whole file of `size` bytes (as listed), in bounded ranges. */
export async function readThroughCompanion(reads: SandboxFileReads, p: string, size: number, counters: { reads: number }): Promise<Uint8Array> {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    counters.reads += 1;
    const r = await call(() => reads.read(p, offset, SANDBOX_FILES_MAX_READ_BYTES), p);
    const chunk = Buffer.from(r.contents, 'base64');
    parts.push(chunk);
    offset += chunk.length;
    if (!r.truncated || chunk.length === 0) break;
  }
  const data = Buffer.concat(parts);
  // The listing's size is what VS Code was told (stat); contents of another length are not what it listed.
  if (parts.length > 1 && data.length !== size) throw new FsError('Unavailable', `${p} changed while it was read in parts (${data.length} of ${size} bytes)`);
  return data;
}

async function call<T>(fn: () => Promise<T>, p: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw fsErrorFromCompanion(err, p);
  }
}

function fsErrorFromCompanion(err: unknown, p: string): FsError {
  const { code, causeCode } = err as { code?: unknown; causeCode?: unknown };
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'not_found') return new FsError('FileNotFound', `${p}: ${message}`);
  if (code === 'invalid_params' && causeCode === 'is_a_directory') return new FsError('FileIsADirectory', `${p} is a directory`);
  if (code === 'invalid_params' || code === 'refused') return new FsError('NoPermissions', message);
  // not_ready (a sandbox whose files are not on the companion's machine, or that has ended), unavailable, transport.
  return new FsError('Unavailable', message);
}
