// The strict, bounded reader of the `tar.zst` (or plain tar) a sandbox packs its session into (sandboxTarball.ts): it
// is a module of its own because the sandbox's tar is never trusted — every header is checked (USTAR, checksum, type,
// confined UTF-8 path, quotas) before anything is written, and the snapshot policy is applied on the way in. It reads
// what GNU tar (`--format=ustar`) and BusyBox's tar write: BusyBox's GNU long names (`L`, `K`, bounded by the path
// limit) and its hard links (`1`), which become copies of the file named earlier in the same tarball, as GNU tar's
// `--hard-dereference` would have written them.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import type { SessionBundleLimits, WorkspaceSnapshotReport } from '../../protocol/bundle';
import { classifyWorkspacePath } from '../bundle/snapshotPolicy';
import { TransferError } from './transfer';

const BLOCK = 512;

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

function field(header: Buffer, offset: number, length: number): Buffer {
  const raw = header.subarray(offset, offset + length);
  const nul = raw.indexOf(0);
  return nul === -1 ? raw : raw.subarray(0, nul);
}

function octal(header: Buffer, offset: number, length: number, what: string): number {
  const text = field(header, offset, length).toString('latin1').trim();
  if (!/^[0-7]+$/.test(text)) throw new TransferError('transfer_failed', `the sandbox's tarball has a bad ${what} field`);
  const n = parseInt(text, 8);
  if (!Number.isSafeInteger(n)) throw new TransferError('transfer_failed', `the sandbox's tarball has a ${what} out of range`);
  return n;
}

/** Refuses a header that is neither USTAR's nor GNU tar's (`ustar  \0`, which BusyBox writes too). */
function checkMagic(header: Buffer): void {
  const magic = header.subarray(257, 263).toString('latin1');
  if (magic !== 'ustar\u000000' && magic !== 'ustar\u0000') {
    if (header.subarray(257, 265).toString('latin1') !== 'ustar  \u0000') throw new TransferError('transfer_failed', "the sandbox's tarball is not USTAR");
  }
}

/** The entry's path: a GNU long name when one came before it, else USTAR prefix + name; see `confinedPath`. */
function entryPath(header: Buffer, longName: Buffer | undefined): { segments: string[]; text: string } {
  const prefix = field(header, 345, 155);
  const name = field(header, 0, 100);
  return confinedPath(longName ?? (prefix.length > 0 ? Buffer.concat([prefix, Buffer.from('/'), name]) : name));
}

/** A path of the tarball, UTF-8, relative, no `.`/`..`/empty segments, under state/ or workspace/. */
function confinedPath(bytes: Buffer): { segments: string[]; text: string } {
  let text: string;
  try {
    text = fatalUtf8.decode(bytes);
  } catch {
    throw new TransferError('unsafe_path', "the sandbox's tarball names a path that is not UTF-8");
  }
  const segments = text.split('/');
  if (segments[segments.length - 1] === '') segments.pop();
  if (text.startsWith('/') || segments.length === 0 || segments.some((s) => s === '' || s === '.' || s === '..') || (segments[0] !== 'state' && segments[0] !== 'workspace')) {
    throw new TransferError('unsafe_path', `the sandbox's tarball names an unsafe path ${JSON.stringify(text)}`);
  }
  return { segments, text };
}

function checksumOk(header: Buffer): boolean {
  const stored = octal(header, 148, 8, 'checksum');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] as number);
  return sum === stored;
}

const TYPE_NAMES: Record<string, string> = { '1': 'hard link', '2': 'symbolic link', '3': 'character device', '4': 'block device', '6': 'FIFO', x: 'pax header', g: 'pax header', L: 'GNU long name', K: 'GNU long link' };

/** What `readSessionTarball` wrote: the two roots under `into`, and the workspace entries the policy left out. */
export interface ReadSession {
  stateRoot: string;
  workspaceRoot: string;
  skipped: WorkspaceSnapshotReport['excludedEntries'];
}

const refuse = (message: string): TransferError => new TransferError('transfer_failed', message);

/** A checked header: its path, type, size, mode and padding; for a hard link, the path it names. */
interface EntryHeader {
  segments: string[];
  text: string;
  isDir: boolean;
  size: number;
  mode: number;
  pad: number;
  linkTarget?: { segments: string[]; text: string } | undefined;
}

/** The GNU long name (`L`) and long link name (`K`) read for the next entry. */
type LongNames = Partial<Record<'L' | 'K', Buffer>>;

/** One pass over the decompressed tar: headers checked, entries written (or read past), quotas counted. */
class TarballReader {
  readonly skipped: ReadSession['skipped'] = [];
  private readonly excludedDirs: string[] = [];
  private pending: Buffer = Buffer.alloc(0);
  private tarBytes = 0;
  private payloadBytes = 0;
  private entries = 0;
  private zeroBlocks = 0;
  /** The regular files written so far (path under `into` → size): what a hard link may name. */
  private readonly files = new Map<string, number>();
  private longNames: LongNames = {};
  ended = false;
  /**
   * The entry whose content is being read: where it goes (undefined: read past; `long`: kept as the next entry's
   * name), how much is left, and the padding.
   */
  current: { out: fs.WriteStream | undefined; long?: { type: 'L' | 'K'; chunks: Buffer[] }; left: number; pad: number } | undefined;

  constructor(
    private readonly into: string,
    private readonly limits: SessionBundleLimits,
  ) {}

  /** The stream stage that feeds decompressed bytes through `consume`. */
  sink(): Transform {
    return new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        this.tarBytes += chunk.length;
        if (this.tarBytes > this.limits.maxDecompressedTarBytes) {
          done(refuse(`the packed session unpacks to more than ${this.limits.maxDecompressedTarBytes} bytes`));
          return;
        }
        this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
        this.consume().then(() => done(), done);
      },
    });
  }

  /** Writes what the pending bytes hold of the current entry, then reads headers while whole blocks are pending. */
  private async consume(): Promise<void> {
    for (;;) {
      const current = this.current;
      if (current && current.left > 0) {
        if (this.pending.length === 0) break;
        const take = Math.min(current.left, this.pending.length);
        const piece = this.pending.subarray(0, take);
        this.pending = this.pending.subarray(take);
        current.left -= take;
        current.long?.chunks.push(Buffer.from(piece));
        const out = current.out;
        if (out && !out.write(piece)) await new Promise<void>((r) => out.once('drain', () => r()));
        continue;
      }
      if (current && current.pad > 0) {
        if (this.pending.length < current.pad) break;
        this.pending = this.pending.subarray(current.pad);
        current.pad = 0;
      }
      if (current) await this.finishEntry();
      if (this.pending.length < BLOCK) break;
      const header = Buffer.from(this.pending.subarray(0, BLOCK));
      this.pending = this.pending.subarray(BLOCK);
      if (this.ended) continue; // tar pads its end with zero blocks up to the record size
      if (header.every((b) => b === 0)) {
        if (++this.zeroBlocks === 2) this.ended = true;
        continue;
      }
      if (this.zeroBlocks > 0) throw refuse("the sandbox's tarball has a lone zero block");
      if (!checksumOk(header)) throw refuse("the sandbox's tarball has a header with a bad checksum");
      const type = String.fromCharCode(header[156] as number);
      if (type === 'L' || type === 'K') {
        this.startLongName(header, type);
        continue;
      }
      const longNames = this.longNames;
      this.longNames = {};
      await this.startEntry(checkHeader(header, this.limits, ++this.entries, longNames));
    }
  }

  /** Whether the tarball ended where an archive may end: after its end blocks, with no entry or long name pending. */
  complete(): boolean {
    return this.ended && this.current === undefined && this.longNames.L === undefined && this.longNames.K === undefined;
  }

  /** A GNU long name or link name (BusyBox writes one for a path over 100 bytes): read, bounded, for the next entry. */
  private startLongName(header: Buffer, type: 'L' | 'K'): void {
    checkMagic(header);
    if (this.longNames[type] !== undefined) throw refuse("the sandbox's tarball has two GNU long names for one entry");
    const size = octal(header, 124, 12, 'size');
    // The name and its NUL.
    if (size === 0 || size > this.limits.maxPathBytes + 1) throw refuse(`the sandbox's tarball has a GNU long name of ${size} bytes: longer than the bundle limits allow`);
    this.current = { out: undefined, long: { type, chunks: [] }, left: size, pad: (BLOCK - (size % BLOCK)) % BLOCK };
  }

  /** Whether the snapshot policy leaves this workspace entry out (recorded in `skipped`; a directory's children too). */
  private excluded(h: EntryHeader): boolean {
    const rel = h.segments.join('/');
    if (this.excludedDirs.some((d) => rel.startsWith(`${d}/`))) return true;
    if (h.segments[0] !== 'workspace' || h.segments.length <= 1) return false;
    const verdict = classifyWorkspacePath(h.segments.slice(1), h.isDir);
    if (verdict.verdict !== 'exclude') return false;
    this.skipped.push({ path: h.isDir ? `${h.segments.slice(1).join('/')}/` : h.segments.slice(1).join('/'), category: verdict.category });
    if (h.isDir) this.excludedDirs.push(rel);
    return true;
  }

  private async startEntry(h: EntryHeader): Promise<void> {
    const { segments, text, isDir, pad, mode } = h;
    const excluded = this.excluded(h);
    const target = path.join(this.into, ...segments);
    if (segments.length === 1 && !isDir) throw refuse(`${text} is not a directory`);
    if (excluded || segments.length === 1) {
      this.current = { out: undefined, left: h.size, pad };
      return;
    }
    const linked = h.linkTarget === undefined ? undefined : this.linkedFile(h.text, h.linkTarget);
    const size = linked?.size ?? h.size;
    if (size > this.limits.maxFileBytes) throw refuse(`${text} is ${size} bytes, more than the bundle limit of ${this.limits.maxFileBytes} per file`);
    this.payloadBytes += size;
    if (this.payloadBytes > this.limits.maxPayloadBytes) throw refuse(`the session holds more than ${this.limits.maxPayloadBytes} bytes`);
    if (isDir) {
      await fsp.mkdir(target, { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      this.current = { out: undefined, left: 0, pad: 0 };
      return;
    }
    this.files.set(segments.join('/'), size);
    if (linked) {
      // A copy, as `--hard-dereference` writes it; EXCL: a name that comes twice is refused, as below.
      await fsp.copyFile(linked.source, target, fs.constants.COPYFILE_EXCL);
      this.current = { out: undefined, left: 0, pad: 0 };
      return;
    }
    // `wx`: a name that comes twice, or a path through something that is not a directory, is refused by the OS.
    const out = fs.createWriteStream(target, { flags: 'wx', mode: (mode & 0o111) !== 0 ? 0o755 : 0o644 });
    this.current = { out, left: size, pad };
    await new Promise<void>((resolve, reject) => {
      out.once('open', () => resolve());
      out.once('error', reject);
    });
  }

  /** The file a hard link names: one this tarball carried (and wrote) before the link, else the link is refused. */
  private linkedFile(text: string, linkTarget: { segments: string[]; text: string }): { source: string; size: number } {
    const size = this.files.get(linkTarget.segments.join('/'));
    if (size === undefined) throw refuse(`${text} is a hard link to ${linkTarget.text}, which is not a file the tarball carried before it`);
    return { source: path.join(this.into, ...linkTarget.segments), size };
  }

  private async finishEntry(): Promise<void> {
    const long = this.current?.long;
    if (long) {
      const bytes = Buffer.concat(long.chunks);
      const nul = bytes.indexOf(0);
      const name = nul === -1 ? bytes : bytes.subarray(0, nul);
      if (name.length === 0) throw refuse("the sandbox's tarball has an empty GNU long name");
      this.longNames[long.type] = name;
    }
    const out = this.current?.out;
    this.current = undefined;
    if (out) await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
}

/**
 * The header's fields (its checksum checked already), refused unless it is a file, a directory or a hard link, with a
 * confined path (and link target) and within the limits.
 */
function checkHeader(header: Buffer, limits: SessionBundleLimits, entryNumber: number, longNames: LongNames): EntryHeader {
  checkMagic(header);
  const type = String.fromCharCode(header[156] as number);
  const { segments, text } = entryPath(header, longNames.L);
  const size = octal(header, 124, 12, 'size');
  const mode = octal(header, 100, 8, 'mode');
  const isDir = type === '5';
  const isLink = type === '1';
  if (!isDir && !isLink && type !== '0' && type !== '\u0000' && type !== '7') {
    throw refuse(`${text} is a ${TYPE_NAMES[type] ?? `tar entry of type ${JSON.stringify(type)}`}; only files and directories are carried back`);
  }
  if (isDir && size !== 0) throw refuse(`${text}: a directory entry with content`);
  if (isLink && size !== 0) throw refuse(`${text}: a hard link entry with content`);
  if (longNames.K !== undefined && !isLink) throw refuse(`${text}: a GNU long link name before an entry that is not a link`);
  const linkTarget = isLink ? confinedPath(longNames.K ?? field(header, 157, 100)) : undefined;
  if (entryNumber > limits.maxEntryCount) throw refuse(`the session has more than ${limits.maxEntryCount} entries`);
  if (Buffer.byteLength(text) > limits.maxPathBytes || segments.length - 1 > limits.maxPathDepth) throw refuse(`${text}: the path is longer or deeper than the bundle limits allow`);
  return { segments, text, isDir, size, mode, pad: (BLOCK - (size % BLOCK)) % BLOCK, linkTarget };
}

/**
 * Reads a `tar.zst` made by a sandbox — a file here, or its bytes as they arrive — into `into` (which must not exist): regular files (0644, or 0755 when any
 * execute bit is set) and directories under `state/` and `workspace/` only, a hard link to a file carried before it
 * as a copy of that file; everything else — symbolic links, devices,
 * extensions, unsafe or non-UTF-8 names, bad checksums, a truncated archive, more than the limits allow — is refused
 * with an error that names it. Workspace entries the snapshot policy excludes are read past and reported.
 */
export async function readSessionTarball(
  tarball: string | AsyncIterable<Buffer>,
  into: string,
  limits: SessionBundleLimits,
  compression: 'zstd' | 'none' = 'zstd',
): Promise<ReadSession> {
  await fsp.mkdir(into, { mode: 0o700 });
  await fsp.mkdir(path.join(into, 'state'), { mode: 0o700 });
  await fsp.mkdir(path.join(into, 'workspace'), { mode: 0o755 });
  const reader = new TarballReader(into, limits);
  try {
    // Output in 256 KiB chunks: Node's default of 16 KiB makes decompressing about three times slower.
    const source = typeof tarball === 'string' ? fs.createReadStream(tarball, { highWaterMark: 1024 * 1024 }) : Readable.from(tarball, { objectMode: false });
    if (compression === 'zstd') await pipeline(source, zlib.createZstdDecompress({ chunkSize: 256 * 1024 }), reader.sink());
    else await pipeline(source, reader.sink());
    if (!reader.complete()) throw refuse("the sandbox's tarball is truncated");
  } catch (err) {
    reader.current?.out?.destroy();
    await fsp.rm(into, { recursive: true, force: true });
    if (err instanceof TransferError) throw err;
    throw refuse(`could not read the sandbox's tarball: ${(err as Error).message}`);
  }
  return { stateRoot: path.join(into, 'state'), workspaceRoot: path.join(into, 'workspace'), skipped: reader.skipped };
}
