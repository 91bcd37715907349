// A sandbox's files as a file system, over the Runtime access API, without VS Code types:
// stat and readDirectory come from paged listings with a short-lived cache and request
// coalescing (no stat storms: a stat is answered from its parent's listing, including "not
// found"); reads and writes larger than one call are chunked; mtimes only move forward.
// The VS Code FileSystemProvider is a thin adapter over this.
import { randomBytes, createHash } from 'node:crypto';
import path from 'node:path/posix';
import type { FileEntry } from '../../protocol/kruntimes/gateway';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import type { SandboxConnection } from '../sandboxes/connection';
import { describeGatewayFailure, neverSent } from '../sandboxes/errorText';

export type FsErrorKind = 'FileNotFound' | 'FileExists' | 'FileNotADirectory' | 'FileIsADirectory' | 'NoPermissions' | 'Unavailable';

/** A file system failure in VS Code's vocabulary; the adapter turns it into a FileSystemError. */
export class FsError extends Error {
  override readonly name = 'FsError';
  constructor(
    readonly kind: FsErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export interface FileInfo {
  type: 'file' | 'directory';
  size: number;
  mtime: number;
  ctime: number;
  readonly: boolean;
}

export interface FileChange {
  type: 'created' | 'changed' | 'deleted';
  path: string;
}

export interface SandboxFilesOptions {
  /** How long a directory listing answers stats and readDirectory (ms). */
  listingTtlMs?: number;
  /** Chunk size for reads and writes larger than one gateway call. */
  chunkBytes?: number;
}

interface Listing {
  entries: Map<string, FileEntry>;
  at: number;
}

/** Counters a test (or a diagnostics command) can read. */
export interface FilesCounters {
  listPages: number;
  reads: number;
  mutations: number;
}

/** At most this many listed folders are listed again after a command. */
const MAX_FOLDERS_RECHECKED = 64;

const READ_ONLY_PHASES = new Set(['Finalizing', 'Succeeded', 'Failed', 'Timeout', 'Cancelled']);

export class SandboxFiles {
  readonly counters: FilesCounters = { listPages: 0, reads: 0, mutations: 0 };
  private readonly listings = new Map<string, Listing>();
  /**
   * The entries last seen in each folder this window listed (kept after the listing's TTL), to
   * tell what a command created or deleted there.
   */
  private readonly known = new Map<string, Map<string, FileEntry>>();
  private readonly missingDirs = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<Listing>>();
  private readonly times = new Map<string, { mtime: number; ctime: number; size: number }>();
  private readonly listeners = new Set<(changes: FileChange[]) => void>();
  private readonly ttl: number;
  private readonly chunkBytes: number;
  private clock = 0;

  constructor(
    private readonly connection: SandboxConnection,
    options: SandboxFilesOptions = {},
  ) {
    this.ttl = options.listingTtlMs ?? 3000;
    this.chunkBytes = options.chunkBytes ?? 512 * 1024;
  }

  onDidChange(listener: (changes: FileChange[]) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  // ---- reads ---------------------------------------------------------------------------------

  async stat(p: string): Promise<FileInfo> {
    p = normalize(p);
    if (p === '') return { type: 'directory', size: 0, mtime: 0, ctime: 0, readonly: this.readonly() };
    const listing = await this.listing(path.dirname(p) === '.' ? '' : path.dirname(p));
    const entry = listing.entries.get(path.basename(p));
    if (!entry) throw new FsError('FileNotFound', `${p} does not exist in ${this.connection.label}`);
    return this.info(p, entry);
  }

  async readDirectory(p: string): Promise<[string, 'file' | 'directory'][]> {
    p = normalize(p);
    const listing = await this.listing(p);
    return [...listing.entries.values()].map((e) => [e.path, e.directory ? 'directory' : 'file']);
  }

  async readFile(p: string): Promise<Uint8Array> {
    p = normalize(p);
    const info = await this.stat(p);
    if (info.type === 'directory') throw new FsError('FileIsADirectory', `${p} is a directory`);
    const client = await this.client();
    if (info.size <= GatewayLimits.maxReadBytes) {
      this.counters.reads += 1;
      const r = await this.call((c) => c.read(p, { maxBytes: GatewayLimits.maxReadBytes }), p);
      if (!r.truncated) return r.contents;
    }
    return this.readChunked(client, p, info.size);
  }

  private async readChunked(client: GatewayClient, p: string, size: number): Promise<Uint8Array> {
    const parts: Buffer[] = [];
    let offset = 0;
    const ranged = this.connection.capabilities()?.rangedReads === true;
    while (offset < size) {
      const length = Math.min(this.chunkBytes, GatewayLimits.maxReadBytes, size - offset);
      this.counters.reads += 1;
      let chunk: Buffer;
      if (ranged) {
        chunk = (await this.call((c) => c.read(p, { maxBytes: length, offset, length }), p)).contents;
      } else {
        const block = 4096;
        const out = await this.call(
          (c) =>
            c.runCommand({
              argv: ['dd', `if=${p}`, `bs=${block}`, `skip=${offset / block}`, `count=${Math.ceil(length / block)}`, 'status=none'],
            }),
          p,
        );
        if (out.exitCode !== 0) {
          throw new FsError('Unavailable', `${p} is larger than one gateway call and reading it in parts failed: ${out.stderr.toString().trim() || `exit ${out.exitCode}`}`);
        }
        chunk = out.stdout;
      }
      if (chunk.length === 0) break;
      parts.push(chunk);
      offset += chunk.length;
    }
    const data = Buffer.concat(parts);
    if (data.length !== size) throw new FsError('Unavailable', `${p} changed while it was read in parts (${data.length} of ${size} bytes)`);
    return data;
  }

  // ---- mutations -----------------------------------------------------------------------------

  async writeFile(p: string, data: Uint8Array, options: { create: boolean; overwrite: boolean }): Promise<void> {
    p = normalize(p);
    this.assertWritable(p);
    const existing = await this.statOrUndefined(p);
    if (existing?.type === 'directory') throw new FsError('FileIsADirectory', `${p} is a directory`);
    if (existing && !options.overwrite) throw new FsError('FileExists', `${p} already exists`);
    if (!existing && !options.create) throw new FsError('FileNotFound', `${p} does not exist`);
    await this.requireDirectory(parentOf(p));
    const client = await this.client();
    if (data.byteLength <= GatewayLimits.maxWriteBytes) {
      this.counters.mutations += 1;
      await this.call((c) => c.writeFile(p, data, { createParents: false }), p);
    } else {
      await this.writeChunked(client, p, data);
    }
    this.recordWrite(p, data.byteLength, existing ? 'changed' : 'created');
  }

  /** Writes part files of ≤ one call each, then joins them in the sandbox, checking the SHA-256. */
  private async writeChunked(client: GatewayClient, p: string, data: Uint8Array): Promise<void> {
    const dir = parentOf(p);
    const nonce = randomBytes(6).toString('hex');
    const partName = (i: number) => path.join(dir, `.${path.basename(p)}.sandbox-upload-${nonce}.${i}`);
    const parts: string[] = [];
    const chunk = Math.min(this.chunkBytes, GatewayLimits.maxWriteBytes);
    try {
      for (let offset = 0, i = 0; offset < data.byteLength; offset += chunk, i++) {
        const name = partName(i);
        this.counters.mutations += 1;
        await this.call((c) => c.writeFile(name, data.subarray(offset, offset + chunk), { createParents: false }), p);
        parts.push(name);
      }
      const digest = createHash('sha256').update(data).digest('hex');
      const tmp = partName(parts.length);
      const script =
        'set -e; dest="$1"; tmp="$2"; want="$3"; shift 3; cat -- "$@" > "$tmp"; ' +
        'got=$(sha256sum -- "$tmp" | cut -d" " -f1); ' +
        'if [ "$got" != "$want" ]; then rm -f -- "$tmp"; echo "checksum mismatch" >&2; exit 3; fi; ' +
        'mv -f -- "$tmp" "$dest"; rm -f -- "$@"';
      this.counters.mutations += 1;
      const out = await this.call((c) => c.runCommand({ argv: ['sh', '-c', script, 'sh', p, tmp, digest, ...parts] }), p);
      if (out.exitCode !== 0) {
        throw new FsError(
          'Unavailable',
          `${p} is larger than one gateway call (${GatewayLimits.maxWriteBytes} bytes) and joining its parts in the sandbox failed ` +
            `(the runtime image needs sh, cat and sha256sum): ${out.stderr.toString().trim() || `exit ${out.exitCode}`}`,
        );
      }
    } catch (err) {
      for (const part of parts) await client.deleteFile(part).catch(() => undefined);
      throw err;
    }
  }

  async createDirectory(p: string): Promise<void> {
    p = normalize(p);
    this.assertWritable(p);
    if (await this.statOrUndefined(p)) throw new FsError('FileExists', `${p} already exists`);
    await this.requireDirectory(parentOf(p));
    this.counters.mutations += 1;
    await this.call((c) => c.createDirectory(p), p);
    this.invalidateListing(parentOf(p));
    this.known.get(parentOf(p))?.set(path.basename(p), { path: path.basename(p), directory: true });
    this.emit([{ type: 'created', path: p }]);
  }

  async delete(p: string, options: { recursive: boolean }): Promise<void> {
    p = normalize(p);
    this.assertWritable(p);
    const info = await this.stat(p);
    if (info.type === 'directory' && !options.recursive && (await this.readDirectory(p)).length > 0) {
      throw new FsError('NoPermissions', `${p} is a directory that is not empty`);
    }
    this.counters.mutations += 1;
    // kruntimes refuses any directory without recursive=true, even an empty one (checked above).
    await this.call((c) => c.deleteFile(p, { recursive: info.type === 'directory' }), p);
    this.forget(p);
    this.emit([{ type: 'deleted', path: p }]);
  }

  async rename(from: string, to: string, options: { overwrite: boolean }): Promise<void> {
    from = normalize(from);
    to = normalize(to);
    this.assertWritable(from);
    await this.stat(from);
    const target = await this.statOrUndefined(to);
    if (target && !options.overwrite) throw new FsError('FileExists', `${to} already exists`);
    await this.requireDirectory(parentOf(to));
    this.counters.mutations += 1;
    await this.call((c) => c.renameFile(from, to, { overwrite: options.overwrite }), to);
    const moved = this.known.get(parentOf(from))?.get(path.basename(from));
    this.forget(from);
    this.invalidateListing(parentOf(to));
    if (moved) this.known.get(parentOf(to))?.set(path.basename(to), { ...moved, path: path.basename(to) });
    this.bump(to);
    this.emit([
      { type: 'deleted', path: from },
      { type: target ? 'changed' : 'created', path: to },
    ]);
  }

  /**
   * After a command ran in `dir`: what it may have changed is announced as VS Code needs it — the
   * Explorer adds a row only for a `created` event and drops one only for `deleted` (a `changed`
   * folder is not re-read), and an open editor re-reads its file on `changed`. So the folders this
   * window has listed that the command may have touched (the workspace root, `dir`, the folders
   * on the way and below it) are listed again and compared with what was known: new entries are
   * `created`, vanished ones `deleted`, files `changed` (with a later mtime: contents may differ
   * at the same size). Resolves when the events are out.
   */
  async commandRanIn(dir: string): Promise<void> {
    dir = normalize(dir);
    this.missingDirs.clear();
    const affected = [...this.known.keys()]
      .filter((d) => d === '' || isUnder(d, dir) || isUnder(dir, d))
      .sort((a, b) => depth(a) - depth(b) || a.localeCompare(b))
      .slice(0, MAX_FOLDERS_RECHECKED);
    const changes: FileChange[] = [];
    for (const d of affected) {
      const before = this.known.get(d);
      if (!before) continue; // dropped meanwhile (its parent was deleted below)
      this.listings.delete(d);
      let after: Map<string, FileEntry>;
      try {
        after = (await this.listing(d)).entries;
      } catch (err) {
        if (err instanceof FsError && err.kind === 'FileNotFound') this.forgetKnown(d);
        continue; // its parent's comparison reports it gone; an unreachable sandbox reports nothing
      }
      for (const [name, entry] of after) {
        const p = d === '' ? name : `${d}/${name}`;
        const was = before.get(name);
        if (!was || Boolean(was.directory) !== Boolean(entry.directory)) changes.push({ type: 'created', path: p });
        else if (!entry.directory) {
          this.bump(p);
          changes.push({ type: 'changed', path: p });
        }
      }
      for (const name of before.keys()) {
        if (after.has(name)) continue;
        const p = d === '' ? name : `${d}/${name}`;
        this.forgetKnown(p);
        for (const key of [...this.times.keys()]) if (isUnder(key, p)) this.times.delete(key);
        changes.push({ type: 'deleted', path: p });
      }
    }
    if (changes.length > 0) this.emit(changes);
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private readonly(): boolean {
    const phase = this.connection.phase();
    return phase !== undefined && READ_ONLY_PHASES.has(phase);
  }

  private assertWritable(p: string): void {
    if (this.readonly()) {
      const phase = this.connection.phase();
      throw new FsError(
        'NoPermissions',
        phase === 'Finalizing'
          ? `${this.connection.label} is closing (Drain) and accepts no changes; ${p} was not changed`
          : `${this.connection.label} is ${phase}; ${p} cannot be changed`,
      );
    }
  }

  private async client(): Promise<GatewayClient> {
    return this.connection.client();
  }

  private async listing(dir: string): Promise<Listing> {
    const cached = this.listings.get(dir);
    // A closed sandbox's files no longer change (nor can they be listed): the last listing stands.
    if (cached && (Date.now() - cached.at < this.ttl || this.readonly())) return cached;
    const missingAt = this.missingDirs.get(dir);
    if (missingAt !== undefined && Date.now() - missingAt < this.ttl) {
      throw new FsError('FileNotFound', `${dir} does not exist in ${this.connection.label}`);
    }
    // A directory whose parent listing is fresh and lacks it does not exist: no call needed.
    if (dir !== '') {
      const parent = this.listings.get(parentOf(dir));
      if (parent && Date.now() - parent.at < this.ttl) {
        const entry = parent.entries.get(path.basename(dir));
        if (!entry) throw new FsError('FileNotFound', `${dir} does not exist in ${this.connection.label}`);
        if (!entry.directory) throw new FsError('FileNotADirectory', `${dir} is not a directory`);
      }
    }
    const running = this.inflight.get(dir);
    if (running) return running;
    const load = this.loadListing(dir).finally(() => this.inflight.delete(dir));
    this.inflight.set(dir, load);
    return load;
  }

  private async loadListing(dir: string): Promise<Listing> {
    const entries = new Map<string, FileEntry>();
    let pageToken = '';
    try {
      do {
        this.counters.listPages += 1;
        const page = await this.call((c) => c.listPage({ path: dir, limit: GatewayLimits.listMaxLimit, pageToken }), dir || '/');
        for (const e of page.entries) entries.set(e.path, e);
        pageToken = page.nextPageToken;
      } while (pageToken !== '');
    } catch (err) {
      if (err instanceof FsError && err.kind === 'FileNotFound') this.missingDirs.set(dir, Date.now());
      throw err;
    }
    const listing = { entries, at: Date.now() };
    this.listings.set(dir, listing);
    this.known.set(dir, new Map(entries));
    this.missingDirs.delete(dir);
    for (const e of entries.values()) this.observe(dir === '' ? e.path : `${dir}/${e.path}`, e);
    return listing;
  }

  private observe(p: string, entry: FileEntry): void {
    const size = entry.sizeBytes ?? 0;
    const known = this.times.get(p);
    if (!known) {
      const now = this.now();
      this.times.set(p, { mtime: now, ctime: now, size });
    } else if (known.size !== size) {
      known.mtime = this.now(known.mtime);
      known.size = size;
    }
  }

  private info(p: string, entry: FileEntry): FileInfo {
    const t = this.times.get(p) ?? { mtime: 0, ctime: 0, size: entry.sizeBytes ?? 0 };
    return {
      type: entry.directory ? 'directory' : 'file',
      size: entry.directory ? 0 : (entry.sizeBytes ?? 0),
      mtime: t.mtime,
      ctime: t.ctime,
      readonly: this.readonly(),
    };
  }

  /** A millisecond clock that never repeats or goes back, so every change gets a later mtime. */
  private now(after = 0): number {
    this.clock = Math.max(Date.now(), this.clock + 1, after + 1);
    return this.clock;
  }

  private bump(p: string): void {
    const t = this.times.get(p);
    if (t) t.mtime = this.now(t.mtime);
  }

  private recordWrite(p: string, size: number, type: 'created' | 'changed'): void {
    const entry = { path: path.basename(p), directory: false, sizeBytes: size };
    this.listings.get(parentOf(p))?.entries.set(entry.path, entry);
    this.known.get(parentOf(p))?.set(entry.path, entry);
    const t = this.times.get(p);
    if (t) {
      t.mtime = this.now(t.mtime);
      t.size = size;
    } else {
      const now = this.now();
      this.times.set(p, { mtime: now, ctime: now, size });
    }
    this.emit([{ type, path: p }]);
  }

  private forget(p: string): void {
    this.invalidateListing(parentOf(p));
    this.forgetKnown(p);
    for (const key of [...this.listings.keys()]) if (isUnder(key, p)) this.listings.delete(key);
    for (const key of [...this.times.keys()]) if (isUnder(key, p)) this.times.delete(key);
  }

  /** Drops `p` from its parent's known entries, and what is known of folders under it. */
  private forgetKnown(p: string): void {
    this.known.get(parentOf(p))?.delete(path.basename(p));
    for (const key of [...this.known.keys()]) if (isUnder(key, p) && p !== '') this.known.delete(key);
  }

  private invalidateListing(dir: string): void {
    this.listings.delete(dir);
    this.missingDirs.delete(dir);
  }

  private async statOrUndefined(p: string): Promise<FileInfo | undefined> {
    try {
      return await this.stat(p);
    } catch (err) {
      if (err instanceof FsError && err.kind === 'FileNotFound') return undefined;
      throw err;
    }
  }

  private async requireDirectory(dir: string): Promise<void> {
    if (dir === '') return;
    const info = await this.statOrUndefined(dir);
    if (!info) throw new FsError('FileNotFound', `the folder ${dir} does not exist`);
    if (info.type !== 'directory') throw new FsError('FileNotADirectory', `${dir} is not a directory`);
  }

  private emit(changes: FileChange[]): void {
    for (const l of this.listeners) l(changes);
  }

  /**
   * Runs a gateway call with the sandbox's client and maps its failure to an FsError. A call the
   * gateway never received (it did not answer: the local daemon stopped, or the endpoint moved) is
   * sent once more over a new connection — the companion server starts the daemon on the way.
   */
  private async call<T>(fn: (client: GatewayClient) => Promise<T>, p: string): Promise<T> {
    let client: GatewayClient | undefined;
    try {
      client = await this.client();
      try {
        return await fn(client);
      } catch (err) {
        if (!neverSent(err)) throw err;
        this.connection.invalidate(client);
        client = await this.client();
        return await fn(client);
      }
    } catch (err) {
      // A new endpoint or token may fix these: the next call connects again (unless another already did).
      if ((err instanceof GatewayError && err.status === 401) || err instanceof GatewayTransportError) this.connection.invalidate(client);
      throw this.mapError(err, p);
    }
  }

  private mapError(err: unknown, p: string): FsError {
    if (err instanceof FsError) return err;
    const text = describeGatewayFailure(err, this.connection.label);
    if (err instanceof GatewayError) {
      const m = err.message;
      if (err.status === 404) return new FsError('FileNotFound', `${p}: ${m}`);
      if (err.status === 400 && /resolve file parent|no such file/.test(m)) return new FsError('FileNotFound', `${p}: ${m}`);
      if (err.status === 500 && /destination already exists/.test(m)) return new FsError('FileExists', `${p} already exists`);
      if (err.status === 500 && /is a directory/.test(m)) return new FsError('FileIsADirectory', `${p} is a directory`);
      if (err.status === 500 && /not a directory/.test(m)) return new FsError('FileNotADirectory', `${p}: ${m}`);
      if (err.status === 401 || err.status === 403 || err.status === 409 || err.status === 400) return new FsError('NoPermissions', text);
      return new FsError('Unavailable', text);
    }
    if (err instanceof GatewayTransportError) return new FsError('Unavailable', text);
    return new FsError('Unavailable', text);
  }
}

function normalize(p: string): string {
  return p.replace(/^\/+/, '').replace(/\/+$/, '');
}

function parentOf(p: string): string {
  const d = path.dirname(p);
  return d === '.' ? '' : d;
}

function depth(p: string): number {
  return p === '' ? 0 : p.split('/').length;
}

function isUnder(p: string, dir: string): boolean {
  return dir === '' || p === dir || p.startsWith(`${dir}/`);
}
