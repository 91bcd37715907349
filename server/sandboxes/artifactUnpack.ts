// The fail-closed unpacker for directory artifacts (artifactFiles.ts puts downloads on disk): a tar.gz parsed here,
// in JS, so that only regular files and directories under relative, `..`-free paths are ever created — built in a
// staging directory beside the destination and renamed into place, so a refused archive leaves nothing.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { createGunzip } from 'node:zlib';
import { nextOrAbort, release, writeAll } from './abortableIo';
import { SandboxError } from './provider';

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

/** A member's header, its pax / GNU long-name headers applied and its type and path checked. */
interface MemberHeader {
  name: string;
  size: number;
  isDir: boolean;
  parts: string[];
  /** 0755 when any execute bit is set, else 0644. */
  mode: number;
}

/** One pass over the archive's members into `root`, counting them and their bytes against the limits. */
class TarExtractor {
  private readonly seen = new Set<string>();
  private totalBytes = 0;
  private pax = new Map<string, string>();
  private longName: string | undefined;

  constructor(
    private readonly archive: string,
    private readonly root: string,
    private readonly limits: UnpackLimits,
    private readonly reader: ByteReader,
  ) {}

  async run(): Promise<void> {
    const { archive } = this;
    for (;;) {
      const block = await this.reader.read(BLOCK);
      if (block.length === 0) break; // no end-of-archive blocks: tolerated, as tar does
      if (block.length < BLOCK) throw invalid(archive, 'is truncated');
      if (block.every((b) => b === 0)) break; // end of archive
      if (!checksumOk(block)) throw invalid(archive, 'has a header with a bad checksum (not a tar archive, or corrupt)');
      const typeflag = block[156] === 0 ? '\0' : String.fromCharCode(block[156]!);
      const headerSize = numeric(block.subarray(124, 136));
      if (headerSize === undefined) throw invalid(archive, 'has a header with an invalid size');
      if (typeflag === 'x' || typeflag === 'g' || typeflag === 'L') {
        await this.readMeta(typeflag, headerSize);
        continue;
      }
      const m = this.memberOf(block, typeflag, headerSize);
      if (m.isDir) await this.makeDirectory(m);
      else await this.writeFile(m);
    }
  }

  /** A pax extended header (for the next member), a global one (refused if it renames or resizes), or a GNU long name. */
  private async readMeta(typeflag: string, headerSize: number): Promise<void> {
    const { archive } = this;
    if (headerSize > MAX_META_BYTES) throw invalid(archive, `has an extended header larger than ${MAX_META_BYTES} bytes`);
    const data = await readPadded(this.reader, headerSize, archive);
    if (typeflag === 'L') {
      this.longName = cString(data);
      return;
    }
    const records = paxRecords(data, archive);
    if (typeflag === 'x') this.pax = records;
    else if (records.has('path') || records.has('linkpath') || records.has('size')) {
      throw invalid(archive, 'has a global pax header that renames or resizes members');
    }
  }

  private memberOf(block: Buffer, typeflag: string, headerSize: number): MemberHeader {
    const { archive } = this;
    const magic = block.subarray(257, 263).toString('latin1');
    const prefix = magic === 'ustar\0' ? cString(block.subarray(345, 500)) : '';
    const headerName = cString(block.subarray(0, 100));
    const name = this.pax.get('path') ?? this.longName ?? (prefix ? `${prefix}/${headerName}` : headerName);
    const paxSize = this.pax.get('size');
    const size = paxSize !== undefined ? (/^\d{1,16}$/.test(paxSize) ? Number(paxSize) : undefined) : headerSize;
    this.pax = new Map();
    this.longName = undefined;
    if (size === undefined || !Number.isSafeInteger(size)) throw invalid(archive, `has a member ${JSON.stringify(name)} with an invalid size`);

    const isDir = typeflag === '5' || (typeflag === '\0' && name.endsWith('/'));
    const isFile = !isDir && (typeflag === '0' || typeflag === '\0' || typeflag === '7');
    if (!isDir && !isFile) {
      throw invalid(archive, `has a member ${JSON.stringify(name)} that is ${TYPE_NAMES[typeflag] ?? `of unsupported type ${JSON.stringify(typeflag)}`}; only regular files and directories are allowed`);
    }
    const parts = memberComponents(name, archive);
    if (this.seen.size >= this.limits.maxEntries) throw invalid(archive, `has more than ${this.limits.maxEntries} members`);
    return { name, size, isDir, parts, mode: isDir ? 0o755 : ((numeric(block.subarray(100, 108)) ?? 0o644) & 0o111) !== 0 ? 0o755 : 0o644 };
  }

  private async makeDirectory(m: MemberHeader): Promise<void> {
    if (m.size !== 0) throw invalid(this.archive, `has a directory member ${JSON.stringify(m.name)} with content`);
    this.seen.add(m.parts.join('/') + '/');
    if (m.parts.length) await member(this.archive, m.name, () => fsp.mkdir(path.join(this.root, ...m.parts), { recursive: true, mode: 0o755 }));
  }

  private async writeFile(m: MemberHeader): Promise<void> {
    const { archive, reader } = this;
    const { name, size, parts } = m;
    if (!parts.length || name.endsWith('/')) throw invalid(archive, `has a file member with a directory name ${JSON.stringify(name)}`);
    const rel = parts.join('/');
    if (this.seen.has(rel)) throw invalid(archive, `has the member ${JSON.stringify(name)} twice`);
    this.seen.add(rel);
    this.totalBytes += size;
    if (this.totalBytes > this.limits.maxBytes) throw invalid(archive, `unpacks to more than ${this.limits.maxBytes} bytes`);
    const dest = path.join(this.root, ...parts);
    await member(archive, name, () => fsp.mkdir(path.dirname(dest), { recursive: true, mode: 0o755 }));
    const handle = await member(archive, name, () => fsp.open(dest, 'wx', m.mode));
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
}

/** Reads the archive's members into `root` (an empty staging directory). */
async function extractInto(archive: string, root: string, limits: UnpackLimits, signal: AbortSignal | undefined): Promise<void> {
  const stream = fs.createReadStream(archive).pipe(createGunzip());
  const reader = new ByteReader(stream, signal);
  try {
    await new TarExtractor(archive, root, limits, reader).run();
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
 *
 * The archive is consumed: a folder artifact arrives once, as the folder (its archive was verified
 * against the digest before this), so `archive` is removed once the tree is in place — and also
 * when it is refused, all or nothing (issue 24: `logs/` and `logs.tar.gz` side by side).
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
    await fsp.rm(archive, { force: true });
  }
}
