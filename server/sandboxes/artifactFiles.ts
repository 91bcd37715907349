// Putting downloaded artifacts on disk, for every provider: a verified writer (bytes land in a
// `*.partial` file beside the target and are published by one rename only when size and sha256
// match) and a fail-closed unpacker for directory artifacts (tar.gz parsed here, in JS: only
// regular files and directories under relative, `..`-free paths; everything is built in a staging
// directory beside the destination and renamed into place, so a refused archive leaves nothing).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { createGunzip } from 'node:zlib';
import { SandboxError } from './provider';

export interface ExpectedContent {
  /** `sha256:<hex>` of the bytes. */
  digest: string;
  sizeBytes: number;
}

/** Ends an iteration early (abort, error): a pending `next()` may never settle, so never await `return()`. */
function release(iterator: AsyncIterator<unknown>): void {
  const done = iterator.return?.();
  if (done) done.then(undefined, () => undefined);
}

/** `iterator.next()`, or the abort reason as soon as `signal` fires (a stalled source cannot hold it up). */
function nextOrAbort<T>(iterator: AsyncIterator<T>, signal: AbortSignal | undefined): Promise<IteratorResult<T>> {
  if (!signal) return iterator.next();
  signal.throwIfAborted();
  return new Promise<IteratorResult<T>>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    iterator.next().then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

async function writeAll(handle: fsp.FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/**
 * Writes `source` to `target` through `<target>.<random>.partial` (created exclusively), hashing on
 * the way. Publishes with one rename only when the byte count and digest match `expected`; stops
 * before writing a chunk that would exceed `expected.sizeBytes`. The temp file is removed on every
 * failure (mismatch, source error, abort), so `target` is either the verified bytes or untouched.
 */
export async function writeVerified(source: AsyncIterable<Uint8Array>, target: string, expected: ExpectedContent, signal?: AbortSignal): Promise<void> {
  const name = path.basename(target);
  const tmp = `${target}.${randomBytes(6).toString('hex')}.partial`;
  const hash = createHash('sha256');
  let bytes = 0;
  let handle: fsp.FileHandle | undefined;
  const iterator = source[Symbol.asyncIterator]();
  try {
    handle = await fsp.open(tmp, 'wx', 0o644);
    for (;;) {
      const step = await nextOrAbort(iterator, signal);
      if (step.done) break;
      const chunk = step.value;
      if (bytes + chunk.length > expected.sizeBytes) {
        throw new SandboxError(
          'artifact_invalid',
          `artifact ${name} sent more than its announced ${expected.sizeBytes} bytes; the download was stopped and nothing was kept`,
        );
      }
      hash.update(chunk);
      bytes += chunk.length;
      await writeAll(handle, chunk);
    }
    signal?.throwIfAborted();
    const actual = `sha256:${hash.digest('hex')}`;
    if (bytes !== expected.sizeBytes || actual !== expected.digest) {
      throw new SandboxError(
        'artifact_invalid',
        `artifact ${name} does not match its digest (${actual}, ${bytes} bytes; expected ${expected.digest}, ${expected.sizeBytes} bytes); nothing was kept`,
      );
    }
    await handle.sync();
    await handle.close();
    handle = undefined;
    try {
      await fsp.rename(tmp, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EISDIR' || code === 'ENOTDIR' || code === 'ENOTEMPTY') {
        throw new SandboxError('invalid_destination', `cannot save artifact ${name}: ${target} exists and is a directory; move it away or choose another folder`);
      }
      throw err;
    }
  } finally {
    release(iterator);
    await handle?.close().catch(() => undefined);
    await fsp.rm(tmp, { force: true });
  }
}

/** {@link writeVerified} from a local file (the local artifact store). */
export async function copyVerified(source: string, target: string, expected: ExpectedContent, signal?: AbortSignal): Promise<void> {
  const stream = fs.createReadStream(source, signal ? { signal } : {});
  try {
    await writeVerified(stream, target, expected, signal);
  } finally {
    stream.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Directory artifacts: tar.gz → a directory tree.

export interface UnpackLimits {
  /** Most bytes of file content to create (a small tar.gz can inflate enormously). */
  maxBytes: number;
  /** Most members (files and directories). */
  maxEntries: number;
}

export const DEFAULT_UNPACK_LIMITS: UnpackLimits = { maxBytes: 8 * 1024 ** 3, maxEntries: 200_000 };

const BLOCK = 512;
/** Longest pax extended header / GNU long name this reader accepts. */
const MAX_META_BYTES = 1024 * 1024;

function invalid(archive: string, detail: string): SandboxError {
  return new SandboxError('artifact_invalid', `directory artifact ${path.basename(archive)} ${detail}; nothing was unpacked`);
}

/** Exact-length reads over the gunzipped stream. */
class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private ended = false;
  private readonly iterator: AsyncIterator<Buffer>;

  constructor(
    source: AsyncIterable<Buffer>,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.iterator = source[Symbol.asyncIterator]();
  }

  /** Up to `n` bytes (fewer only at the end of the stream). */
  async read(n: number): Promise<Buffer> {
    while (this.length < n && !this.ended) {
      const step = await nextOrAbort(this.iterator, this.signal);
      if (step.done) this.ended = true;
      else if (step.value.length) {
        this.buffered.push(step.value);
        this.length += step.value.length;
      }
    }
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered, this.length);
    const out = all.subarray(0, Math.min(n, all.length));
    const rest = all.subarray(out.length);
    this.buffered = rest.length ? [rest] : [];
    this.length = rest.length;
    return out;
  }

  close(): void {
    release(this.iterator);
  }
}

/** A numeric header field: octal text (NUL/space padded) or GNU base-256 (high bit set). */
function numeric(field: Buffer): number | undefined {
  if (field.length && (field[0]! & 0x80) !== 0) {
    if (field[0] === 0xff) return undefined; // negative
    let value = field[0]! & 0x7f;
    for (const byte of field.subarray(1)) value = value * 256 + byte;
    return Number.isSafeInteger(value) ? value : undefined;
  }
  const text = field.toString('latin1').replace(/[\0 ]+$/, '').replace(/^ +/, '');
  if (text === '') return 0;
  return /^[0-7]+$/.test(text) ? parseInt(text, 8) : undefined;
}

function cString(field: Buffer): string {
  const nul = field.indexOf(0);
  return (nul === -1 ? field : field.subarray(0, nul)).toString('utf8');
}

function checksumOk(block: Buffer): boolean {
  const stored = numeric(block.subarray(148, 156));
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return stored === unsigned || stored === signed;
}

/** pax records `"<len> <key>=<value>\n"`; only `path`, `linkpath` and `size` matter here. */
function paxRecords(data: Buffer, archive: string): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    if (data[at] === 0) break;
    const space = data.indexOf(0x20, at);
    const len = space === -1 ? NaN : Number(data.subarray(at, space).toString('latin1'));
    if (!Number.isSafeInteger(len) || len <= space - at || at + len > data.length || data[at + len - 1] !== 0x0a) {
      throw invalid(archive, 'has a malformed pax extended header');
    }
    const record = data.subarray(space + 1, at + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq <= 0) throw invalid(archive, 'has a malformed pax extended header');
    records.set(record.slice(0, eq), record.slice(eq + 1));
    at += len;
  }
  return records;
}

const TYPE_NAMES: Record<string, string> = {
  '1': 'a hard link',
  '2': 'a symbolic link',
  '3': 'a character device',
  '4': 'a block device',
  '6': 'a FIFO',
  K: 'a long link name',
  S: 'a sparse file',
  V: 'a volume label',
  M: 'a multi-volume continuation',
  D: 'a directory dump',
};

/** The member's path split into safe components, or a refusal naming it. */
function memberComponents(name: string, archive: string): string[] {
  const shown = JSON.stringify(name);
  if (name === '' || name.includes('\0')) throw invalid(archive, `has a member with an empty or NUL-containing name ${shown}`);
  if (name.startsWith('/') || name.startsWith('\\') || /^[A-Za-z]:/.test(name)) throw invalid(archive, `has an absolute member ${shown}`);
  const parts = name.split(/[/\\]/).filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw invalid(archive, `has a member that leaves the directory (${shown})`);
  return parts;
}

async function readPadded(reader: ByteReader, size: number, archive: string): Promise<Buffer> {
  const data = await reader.read(size);
  const padding = (BLOCK - (size % BLOCK)) % BLOCK;
  if (data.length < size || (await reader.read(padding)).length < padding) throw invalid(archive, 'is truncated');
  return data;
}

const TOLERATED_FS_ERRORS = new Set(['EEXIST', 'ENOTDIR', 'EISDIR', 'ENAMETOOLONG']);

/** Runs a file-system step of unpacking; conflicts caused by the archive's own members are refusals. */
async function member<T>(archive: string, name: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code && TOLERATED_FS_ERRORS.has(code)) throw invalid(archive, `has a member ${JSON.stringify(name)} that cannot be created (${code})`);
    throw err;
  }
}

/** Reads the archive's members into `root` (an empty staging directory). */
async function extractInto(archive: string, root: string, limits: UnpackLimits, signal: AbortSignal | undefined): Promise<void> {
  const stream = fs.createReadStream(archive).pipe(createGunzip());
  const reader = new ByteReader(stream, signal);
  const seen = new Set<string>();
  let totalBytes = 0;
  let pax = new Map<string, string>();
  let longName: string | undefined;
  try {
    for (;;) {
      const block = await reader.read(BLOCK);
      if (block.length === 0) break; // no end-of-archive blocks: tolerated, as tar does
      if (block.length < BLOCK) throw invalid(archive, 'is truncated');
      if (block.every((b) => b === 0)) break; // end of archive
      if (!checksumOk(block)) throw invalid(archive, 'has a header with a bad checksum (not a tar archive, or corrupt)');
      const typeflag = block[156] === 0 ? '\0' : String.fromCharCode(block[156]!);
      const headerSize = numeric(block.subarray(124, 136));
      if (headerSize === undefined) throw invalid(archive, 'has a header with an invalid size');

      if (typeflag === 'x' || typeflag === 'g' || typeflag === 'L') {
        if (headerSize > MAX_META_BYTES) throw invalid(archive, `has an extended header larger than ${MAX_META_BYTES} bytes`);
        const data = await readPadded(reader, headerSize, archive);
        if (typeflag === 'L') longName = cString(data);
        else {
          const records = paxRecords(data, archive);
          if (typeflag === 'x') pax = records;
          else if (records.has('path') || records.has('linkpath') || records.has('size')) {
            throw invalid(archive, 'has a global pax header that renames or resizes members');
          }
        }
        continue;
      }

      const magic = block.subarray(257, 263).toString('latin1');
      const prefix = magic === 'ustar\0' ? cString(block.subarray(345, 500)) : '';
      const headerName = cString(block.subarray(0, 100));
      const name = pax.get('path') ?? longName ?? (prefix ? `${prefix}/${headerName}` : headerName);
      const paxSize = pax.get('size');
      const size = paxSize !== undefined ? (/^\d{1,16}$/.test(paxSize) ? Number(paxSize) : undefined) : headerSize;
      pax = new Map();
      longName = undefined;
      if (size === undefined || !Number.isSafeInteger(size)) throw invalid(archive, `has a member ${JSON.stringify(name)} with an invalid size`);

      const isDir = typeflag === '5' || (typeflag === '\0' && name.endsWith('/'));
      const isFile = !isDir && (typeflag === '0' || typeflag === '\0' || typeflag === '7');
      if (!isDir && !isFile) {
        throw invalid(archive, `has a member ${JSON.stringify(name)} that is ${TYPE_NAMES[typeflag] ?? `of unsupported type ${JSON.stringify(typeflag)}`}; only regular files and directories are allowed`);
      }
      const parts = memberComponents(name, archive);
      if (seen.size >= limits.maxEntries) throw invalid(archive, `has more than ${limits.maxEntries} members`);
      const rel = parts.join('/');
      const dest = path.join(root, ...parts);

      if (isDir) {
        if (size !== 0) throw invalid(archive, `has a directory member ${JSON.stringify(name)} with content`);
        seen.add(rel + '/');
        if (parts.length) await member(archive, name, () => fsp.mkdir(dest, { recursive: true, mode: 0o755 }));
        continue;
      }
      if (!parts.length || name.endsWith('/')) throw invalid(archive, `has a file member with a directory name ${JSON.stringify(name)}`);
      if (seen.has(rel)) throw invalid(archive, `has the member ${JSON.stringify(name)} twice`);
      seen.add(rel);
      totalBytes += size;
      if (totalBytes > limits.maxBytes) throw invalid(archive, `unpacks to more than ${limits.maxBytes} bytes`);
      const mode = ((numeric(block.subarray(100, 108)) ?? 0o644) & 0o111) !== 0 ? 0o755 : 0o644;
      await member(archive, name, () => fsp.mkdir(path.dirname(dest), { recursive: true, mode: 0o755 }));
      const handle = await member(archive, name, () => fsp.open(dest, 'wx', mode));
      try {
        let left = size;
        while (left > 0) {
          const chunk = await reader.read(Math.min(left, 1024 * 1024));
          if (chunk.length === 0) throw invalid(archive, 'is truncated');
          await writeAll(handle, chunk);
          left -= chunk.length;
        }
      } finally {
        await handle.close();
      }
      const padding = (BLOCK - (size % BLOCK)) % BLOCK;
      if ((await reader.read(padding)).length < padding) throw invalid(archive, 'is truncated');
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' || (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR') {
      throw invalid(archive, `is not valid gzip (${(err as Error).message})`);
    }
    throw err;
  } finally {
    reader.close();
    stream.destroy();
  }
}

/**
 * Unpacks a directory artifact (tar.gz) to `dir`. Refuses (`artifact_invalid`) absolute members,
 * members with `..`, and anything but regular files and directories (symlinks, hard links,
 * devices, FIFOs); file modes become 0644, or 0755 when any execute bit is set. The tree is built in
 * `.<name>.<random>.unpacking` beside `dir` and renamed into place only when complete; an existing
 * `dir` (an earlier download of the same artifact) is replaced only then.
 */
export async function unpackTarGz(archive: string, dir: string, signal?: AbortSignal, limits: UnpackLimits = DEFAULT_UNPACK_LIMITS): Promise<void> {
  const parent = path.dirname(dir);
  const suffix = randomBytes(6).toString('hex');
  const staging = path.join(parent, `.${path.basename(dir)}.${suffix}.unpacking`);
  const previous = path.join(parent, `.${path.basename(dir)}.${suffix}.previous`);
  await fsp.mkdir(parent, { recursive: true });
  await fsp.mkdir(staging, { mode: 0o700 });
  try {
    await extractInto(archive, staging, limits, signal);
    signal?.throwIfAborted();
    await fsp.chmod(staging, 0o755);
    let movedAside = false;
    try {
      await fsp.rename(dir, previous);
      movedAside = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      await fsp.rename(staging, dir);
    } catch (err) {
      if (movedAside) await fsp.rename(previous, dir).catch(() => undefined);
      throw err;
    }
    if (movedAside) await fsp.rm(previous, { recursive: true, force: true });
  } finally {
    await fsp.rm(staging, { recursive: true, force: true });
  }
}
