// Moves a directory tree into or out of a sandbox through the Runtime access API alone, so it
// works on any provider and any runtime image with a POSIX shell: files of one call go as
// writeFile/read; larger ones in parts (part files joined with a sha256 check on the way in,
// ranged reads or `dd` on the way out); executable bits are carried by one `chmod`/`find`.
// Calls are independent per file, so up to TRANSFER_CONCURRENCY of them are in flight (directories
// level by level, parents first): a call's time is mostly the two ends encoding and writing, which
// overlap when several run at once.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import posix from 'node:path/posix';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { SandboxSessionsError } from '../../protocol/errors';

export interface TransferOptions {
  signal?: AbortSignal;
  /** Bytes moved so far and the total to move. */
  progress?: (done: number, total: number) => void;
}

export interface TransferResult {
  files: number;
  directories: number;
  bytes: number;
}

export type TransferErrorCode = 'transfer_failed' | 'unsupported_entry' | 'unsafe_path';

export class TransferError extends SandboxSessionsError<TransferErrorCode> {
  override readonly name = 'TransferError';
  readonly service = 'transfer';
}

const CHUNK = 512 * 1024;
/** Argument lists stay well below ARG_MAX and the request cap. */
const ARGV_BATCH = 200;
/** Gateway calls in flight per transfer (the gateway client keeps 8 connections). */
const TRANSFER_CONCURRENCY = 8;
/** Parts of one large upload or download in flight (each holds a 512 KiB part and its base64 in memory). */
const PARTS_IN_FLIGHT = 4;

/**
 * Runs `work` on every item with at most `limit` at once. After the first failure no new item starts; the ones
 * running settle, then the first failure is thrown.
 */
export async function forEachConcurrently<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>, signal?: AbortSignal): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T;
      try {
        signal?.throwIfAborted();
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure.error;
}

/** Entries grouped by depth (number of `/` in the relative path), shallowest first. */
function byDepth<T extends { rel: string }>(entries: readonly T[]): T[][] {
  const levels: T[][] = [];
  for (const e of entries) {
    const depth = e.rel.split('/').length - 1;
    (levels[depth] ??= []).push(e);
  }
  return levels.filter((level) => level !== undefined);
}

const join = (dir: string, name: string) => (dir === '' ? name : posix.join(dir, name));

interface LocalEntry {
  rel: string;
  directory: boolean;
  size: number;
  executable: boolean;
}

async function walkLocal(root: string): Promise<LocalEntry[]> {
  const out: LocalEntry[] = [];
  const visit = async (rel: string) => {
    const entries = await fsp.readdir(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
    for (const e of entries) {
      const childRel = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) {
        out.push({ rel: childRel, directory: true, size: 0, executable: false });
        await visit(childRel);
      } else if (e.isFile()) {
        const st = await fsp.stat(path.join(root, childRel));
        out.push({ rel: childRel, directory: false, size: st.size, executable: (st.mode & 0o111) !== 0 });
      } else {
        throw new TransferError('unsupported_entry', `${childRel} is not a regular file or directory (links and devices are not transferred)`);
      }
    }
  };
  await visit('');
  return out;
}

async function runChecked(client: GatewayClient, argv: string[], what: string, signal?: AbortSignal): Promise<Buffer> {
  const out = await client.runCommand({ argv }, { signal });
  if (out.exitCode !== 0) {
    throw new TransferError('transfer_failed', `${what} failed in the sandbox (exit ${out.exitCode}): ${out.stderr.toString().trim().slice(0, 500)}`);
  }
  return out.stdout;
}

/** Copies `localDir` into the sandbox at `remoteDir` (created if missing). */
export async function uploadTree(client: GatewayClient, localDir: string, remoteDir: string, options: TransferOptions = {}): Promise<TransferResult> {
  const entries = await walkLocal(localDir);
  const files = entries.filter((e) => !e.directory);
  const directories = entries.filter((e) => e.directory);
  const total = files.reduce((n, e) => n + e.size, 0);
  let done = 0;
  const { signal } = options;
  if (remoteDir !== '') await client.createDirectory(remoteDir, { signal });
  for (const level of byDepth(directories)) {
    await forEachConcurrently(level, TRANSFER_CONCURRENCY, (e) => client.createDirectory(join(remoteDir, e.rel), { signal }), signal);
  }
  await forEachConcurrently(
    files,
    TRANSFER_CONCURRENCY,
    async (e) => {
      const remote = join(remoteDir, e.rel);
      if (e.size <= GatewayLimits.maxWriteBytes) {
        await client.writeFile(remote, await fsp.readFile(path.join(localDir, e.rel)), { createParents: false }, { signal });
      } else {
        await uploadLarge(client, path.join(localDir, e.rel), remote, signal);
      }
      done += e.size;
      options.progress?.(done, total);
    },
    signal,
  );
  const executables = files.filter((e) => e.executable).map((e) => join(remoteDir, e.rel));
  for (let i = 0; i < executables.length; i += ARGV_BATCH) {
    await runChecked(client, ['chmod', '+x', '--', ...executables.slice(i, i + ARGV_BATCH)], 'chmod', signal);
  }
  return { files: files.length, directories: directories.length, bytes: total };
}

/** Copies one local file into the sandbox at `remote` (its parent must exist): one call, or parts joined with a sha256 check. */
export async function uploadFile(client: GatewayClient, file: string, remote: string, options: { signal?: AbortSignal } = {}): Promise<void> {
  const { size } = await fsp.stat(file);
  if (size <= GatewayLimits.maxWriteBytes) await client.writeFile(remote, await fsp.readFile(file), { createParents: false }, { signal: options.signal });
  else await uploadLarge(client, file, remote, options.signal);
}

/**
 * A file of the sandbox of `size` bytes (as listed) as its bytes in order: one read when it fits one gateway call,
 * else CHUNK parts (ranged reads, or `dd` where the gateway has none) with PARTS_IN_FLIGHT of them read ahead of the
 * consumer — which works on each part while the next ones arrive, with at most that many parts held here. A part of
 * another length than the listing promised (the file changed while it was read) fails the stream.
 */
export async function* fileParts(client: GatewayClient, remote: string, size: number, options: { signal?: AbortSignal | undefined } = {}): AsyncGenerator<Buffer> {
  const { signal } = options;
  if (size <= GatewayLimits.maxReadBytes) {
    const whole = await client.read(remote, { maxBytes: GatewayLimits.maxReadBytes }, { signal });
    if (whole.truncated || whole.contents.length !== size) throw new TransferError('transfer_failed', `${remote} changed while it was copied (${whole.contents.length} of ${size} bytes)`);
    yield whole.contents;
    return;
  }
  const ranged = (await client.status({ signal })).capabilities?.rangedReads === true;
  const offsets = Array.from({ length: Math.ceil(size / CHUNK) }, (_, i) => i * CHUNK);
  const ahead: Promise<Buffer>[] = [];
  let next = 0;
  const readAhead = (): void => {
    while (ahead.length < PARTS_IN_FLIGHT && next < offsets.length) {
      const offset = offsets[next++] as number;
      const part = readPart(client, remote, offset, Math.min(CHUNK, size - offset), ranged, signal);
      part.catch(() => undefined); // awaited in order below; a consumer that stopped early leaves the rest unawaited
      ahead.push(part);
    }
  };
  readAhead();
  for (let part = ahead.shift(); part !== undefined; part = ahead.shift()) {
    const bytes = await part;
    readAhead();
    yield bytes;
  }
}

/**
 * A file over one gateway call, uploaded as parts (several in flight: each call's base64 and write on both ends, not
 * the bytes, is what a part costs through a local gateway) and joined in the sandbox, where its sha256 must match
 * the one computed here as the file is read.
 */
async function uploadLarge(client: GatewayClient, file: string, remote: string, signal?: AbortSignal): Promise<void> {
  const dir = posix.dirname(remote) === '.' ? '' : posix.dirname(remote);
  const nonce = randomBytes(6).toString('hex');
  const { size } = await fsp.stat(file);
  const parts = Array.from({ length: Math.max(1, Math.ceil(size / CHUNK)) }, (_, i) => join(dir, `.${posix.basename(remote)}.upload-${nonce}.${i}`));
  const handle = await fsp.open(file, 'r');
  try {
    const hashing = hashFile(file);
    await forEachConcurrently(
      parts.map((part, i) => ({ part, offset: i * CHUNK })),
      PARTS_IN_FLIGHT,
      async ({ part, offset }) => {
        const length = Math.min(CHUNK, size - offset);
        const buf = Buffer.alloc(length);
        const { bytesRead } = await handle.read(buf, 0, length, offset);
        if (bytesRead !== length) throw new TransferError('transfer_failed', `${file} changed while it was uploaded`);
        await client.writeFile(part, buf, { createParents: false }, { signal });
      },
      signal,
    );
    const digest = await hashing;
    const script =
      'set -e; dest="$1"; want="$2"; shift 2; tmp="$dest.joining"; cat -- "$@" > "$tmp"; ' +
      'got=$(sha256sum -- "$tmp" | cut -d" " -f1); ' +
      'if [ "$got" != "$want" ]; then rm -f -- "$tmp"; echo "checksum mismatch after join" >&2; exit 3; fi; ' +
      'mv -f -- "$tmp" "$dest"; rm -f -- "$@"';
    await runChecked(client, ['sh', '-c', script, 'sh', remote, digest, ...parts], `joining ${remote}`, signal);
  } catch (err) {
    for (const part of parts) await client.deleteFile(part).catch(() => undefined);
    throw err;
  } finally {
    await handle.close();
  }
}

async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file, { highWaterMark: CHUNK })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** What a listing through the gateway found: directories parents first, files with their listed sizes. */
export interface RemoteTree {
  directories: string[];
  files: { rel: string; size: number }[];
}

/**
 * Lists the sandbox's `remoteDir` through the gateway (reads only, a level at a time, several calls in flight),
 * without what `skip` leaves out (a skipped directory is not entered). Paths are relative to `remoteDir`.
 */
export async function listTree(
  client: GatewayClient,
  remoteDir: string,
  options: { signal?: AbortSignal | undefined; skip?: ((relPath: string, isDirectory: boolean) => boolean) | undefined } = {},
): Promise<RemoteTree> {
  const { signal } = options;
  const tree: RemoteTree = { directories: [], files: [] };
  let level = [''];
  while (level.length > 0) {
    const below: string[] = [];
    await forEachConcurrently(
      level,
      TRANSFER_CONCURRENCY,
      async (rel) => {
        for await (const e of client.list(join(remoteDir, rel), signal ? { signal } : {})) {
          if (e.path === '' || e.path === '.' || e.path === '..' || e.path.includes('/')) {
            throw new TransferError('unsafe_path', `the sandbox listed an unsafe name ${JSON.stringify(e.path)}`);
          }
          const childRel = rel === '' ? e.path : `${rel}/${e.path}`;
          if (options.skip?.(childRel, e.directory === true)) continue;
          if (e.directory) below.push(childRel);
          else tree.files.push({ rel: childRel, size: e.sizeBytes ?? 0 });
        }
      },
      signal,
    );
    tree.directories.push(...below);
    level = below;
  }
  return tree;
}

/**
 * The executable regular files and the symbolic links under the sandbox's `remoteDir` (paths relative to it), from
 * one command: the gateway's listing has no modes and no link flags (spec §2.8). Links are not followed.
 */
export async function fileFlagsIn(client: GatewayClient, remoteDir: string, signal?: AbortSignal): Promise<{ executables: Set<string>; links: Set<string> }> {
  // An empty record (two NULs in a row, or one first) separates the two lists: find never prints an empty path.
  const script = 'cd -- "$1" && find . -type f -perm -u+x -print0 && printf "\\0" && find . -type l -print0';
  const out = await runChecked(client, ['sh', '-c', script, 'sh', remoteDir === '' ? '.' : remoteDir], 'listing executable files and links', signal);
  const records = out.toString('utf8').split('\0');
  const boundary = records.indexOf('');
  if (boundary === -1) throw new TransferError('transfer_failed', 'listing executable files and links in the sandbox gave an answer without its separator');
  const relOf = (raw: string): string | undefined => (raw.startsWith('./') && !raw.slice(2).split('/').includes('..') ? raw.slice(2) : undefined);
  const setOf = (raws: string[]) => new Set(raws.map(relOf).filter((r): r is string => r !== undefined));
  return { executables: setOf(records.slice(0, boundary)), links: setOf(records.slice(boundary + 1).filter(Boolean)) };
}

/** Copies the sandbox's file `remote`, listed with `size` bytes, to `target` (which must not exist). */
async function fetchListedFile(client: GatewayClient, remote: string, target: string, size: number, ranged: () => Promise<boolean>, signal?: AbortSignal): Promise<void> {
  const first = await client.read(remote, { maxBytes: GatewayLimits.maxReadBytes }, { signal });
  if (!first.truncated) await fsp.writeFile(target, first.contents, { flag: 'wx', mode: 0o644 });
  else await downloadLarge(client, remote, target, size, await ranged(), signal);
}

/** Copies the listed files `files` of the sandbox's `remoteDir` under `localDir` (their directories must exist). */
export async function downloadListed(
  client: GatewayClient,
  remoteDir: string,
  localDir: string,
  files: readonly { rel: string; size: number }[],
  options: TransferOptions = {},
): Promise<void> {
  const { signal } = options;
  const total = files.reduce((n, f) => n + f.size, 0);
  let done = 0;
  let rangedReads: Promise<boolean> | undefined;
  const ranged = (): Promise<boolean> => (rangedReads ??= client.status({ signal }).then((s) => s.capabilities?.rangedReads === true));
  await forEachConcurrently(
    files,
    TRANSFER_CONCURRENCY,
    async (f) => {
      await fetchListedFile(client, join(remoteDir, f.rel), path.join(localDir, f.rel), f.size, ranged, signal);
      done += f.size;
      options.progress?.(done, total);
    },
    signal,
  );
}

/** Copies the sandbox's `remoteDir` into `localDir` (which must not exist yet). */
export async function downloadTree(
  client: GatewayClient,
  remoteDir: string,
  localDir: string,
  options: TransferOptions & { skip?: (relPath: string, isDirectory: boolean) => boolean } = {},
): Promise<TransferResult> {
  await fsp.mkdir(localDir, { recursive: false, mode: 0o700 });
  const { signal } = options;
  // First the listing, so progress knows the total.
  const tree = await listTree(client, remoteDir, options);
  for (const dir of tree.directories) await fsp.mkdir(path.join(localDir, dir), { mode: 0o755 });
  await downloadListed(client, remoteDir, localDir, tree.files, options);
  for (const rel of (await fileFlagsIn(client, remoteDir, signal)).executables) {
    const target = path.join(localDir, rel);
    if (target.startsWith(localDir + path.sep)) await fsp.chmod(target, 0o755).catch(() => undefined);
  }
  return { files: tree.files.length, directories: tree.directories.length, bytes: tree.files.reduce((n, f) => n + f.size, 0) };
}

/**
 * A file over one gateway call, read in 512 KiB ranges (several in flight, as uploads send their parts) and written at
 * their offsets; a range that comes back shorter than asked means the file changed while it was copied.
 */
async function downloadLarge(client: GatewayClient, remote: string, target: string, size: number, ranged: boolean, signal?: AbortSignal): Promise<void> {
  const handle = await fsp.open(target, 'wx', 0o644);
  try {
    const offsets = Array.from({ length: Math.ceil(size / CHUNK) }, (_, i) => i * CHUNK);
    await forEachConcurrently(
      offsets,
      PARTS_IN_FLIGHT,
      async (offset) => {
        const length = Math.min(CHUNK, size - offset);
        await handle.write(await readPart(client, remote, offset, length, ranged, signal), 0, length, offset);
      },
      signal,
    );
  } finally {
    await handle.close();
  }
}

/** `length` bytes of `remote` at `offset` (a multiple of 4096): a ranged read, or `dd` where the gateway has none. */
async function readPart(client: GatewayClient, remote: string, offset: number, length: number, ranged: boolean, signal?: AbortSignal): Promise<Buffer> {
  let chunk: Buffer;
  if (ranged) {
    chunk = (await client.read(remote, { maxBytes: length, offset, length }, { signal })).contents;
  } else {
    const block = 4096;
    chunk = await runChecked(client, ['dd', `if=${remote}`, `bs=${block}`, `skip=${offset / block}`, `count=${Math.ceil(length / block)}`, 'status=none'], `reading ${remote}`, signal);
  }
  if (chunk.length !== length) {
    throw new TransferError('transfer_failed', `${remote} changed while it was copied (${chunk.length} of ${length} bytes at offset ${offset})`);
  }
  return chunk;
}
