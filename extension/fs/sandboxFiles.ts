// A sandbox's files as a file system, over the Runtime access API, without VS Code types: stat and
// readDirectory come from paged listings with a short-lived cache and request coalescing (no stat storms: a
// stat is answered from its parent's listing, including "not found"); large transfers are chunked
// (chunkedTransfer.ts), mtimes only move forward (fileTimes.ts), a save over a change this window has not seen is
// refused (saveGuard.ts), and a closed sandbox's files are read as this window last had them (keptContents.ts).
// While a sandbox is Finalizing its gateway refuses every call, so what this window has not cached yet is read
// through the companion server (companionFileReads.ts: a local sandbox's workspace, in place; phaseAccess.ts).
// The VS Code FileSystemProvider is a thin adapter over this.
import path from 'node:path/posix';
import type { FileEntry } from '../../protocol/kruntimes/gateway';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { LiveSandboxConnection } from '../sandboxes/connection';
import { readChunked, writeChunked, type ChunkedIo } from './chunkedTransfer';
import { listThroughCompanion, readThroughCompanion } from './companionFileReads';
import { callForFile, FsError } from './fsError';
import { FileTimes } from './fileTimes';
import { SaveGuard } from './saveGuard';
import { KeptContents } from './keptContents';
import { assertWritable, isReadOnly, readThrough } from './phaseAccess';
import { depth, isUnder, normalize, parentOf } from './sandboxPaths';

export { FsError, type FsErrorKind } from './fsError';

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
  /**
   * True while this window holds unsaved edits of `p`. Those edits build on the version the editor read, and VS Code
   * does not load a file again under them: a read then is another reader's (Compare with Saved, a chat's context)
   * and must not become the version a save is checked against (saveGuard.ts), or the save would overwrite unseen.
   */
  holdsUnsavedEdits?: (p: string) => boolean;
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
  private readonly times = new FileTimes();
  private readonly listeners = new Set<(changes: FileChange[]) => void>();
  private readonly folderListeners = new Set<() => void>();
  /** The contents last read or written per file (answers reads once the sandbox has closed). */
  private readonly kept = new KeptContents();
  /** What this window last read or wrote of each file: a save over anything else is refused. */
  private readonly guard = new SaveGuard();
  private readonly ttl: number;
  private readonly chunkBytes: number;
  private readonly holdsUnsavedEdits: (p: string) => boolean;
  /** The last read of each file while the editor held unsaved edits of it (see editorShows). */
  private readonly readUnderEdits = new Map<string, Uint8Array>();

  constructor(
    private readonly connection: LiveSandboxConnection,
    options: SandboxFilesOptions = {},
  ) {
    this.ttl = options.listingTtlMs ?? 3000;
    this.chunkBytes = options.chunkBytes ?? 512 * 1024;
    this.holdsUnsavedEdits = options.holdsUnsavedEdits ?? (() => false);
  }

  onDidChange(listener: (changes: FileChange[]) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** The folders this window has listed (and not seen vanish): what a watch of the sandbox watches. */
  knownFolders(): string[] {
    return [...this.known.keys()];
  }

  /** Hears that `knownFolders()` gained or lost a folder. */
  onDidChangeKnownFolders(listener: () => void): { dispose(): void } {
    this.folderListeners.add(listener);
    return { dispose: () => this.folderListeners.delete(listener) };
  }

  private knownFoldersChanged(): void {
    for (const l of this.folderListeners) l();
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
    // A closed sandbox's files no longer change (nor can they be read): what this window last had stands.
    const kept = this.readonly() ? this.kept.get(p) : undefined;
    if (kept && kept.byteLength === info.size) return this.kept.keep(p, kept);
    const data = await readThrough(
      this.connection,
      () => this.readFromGateway(p, info.size),
      (reads) => readThroughCompanion(reads, p, info.size, this.counters),
    );
    if (this.holdsUnsavedEdits(p)) this.readUnderEdits.set(p, data);
    else this.guard.seen(p, data);
    return this.kept.keep(p, data);
  }

  private async readFromGateway(p: string, size: number): Promise<Uint8Array> {
    await this.client();
    if (size <= GatewayLimits.maxReadBytes) {
      this.counters.reads += 1;
      const r = await this.call((c) => c.read(p, { maxBytes: GatewayLimits.maxReadBytes }), p);
      if (!r.truncated) return r.contents;
    }
    return readChunked(this.chunkedIo(), p, size, this.connection.capabilities()?.rangedReads === true);
  }

  // ---- mutations -----------------------------------------------------------------------------

  async writeFile(p: string, data: Uint8Array, options: { create: boolean; overwrite: boolean }): Promise<void> {
    p = normalize(p);
    assertWritable(this.connection, p);
    const existing = await this.statOrUndefined(p);
    if (existing?.type === 'directory') throw new FsError('FileIsADirectory', `${p} is a directory`);
    if (existing && !options.overwrite) throw new FsError('FileExists', `${p} already exists`);
    if (!existing && !options.create) throw new FsError('FileNotFound', `${p} does not exist`);
    await this.requireDirectory(parentOf(p));
    if (existing) await this.refuseUnseenChange(p, existing.size);
    const client = await this.client();
    if (data.byteLength <= GatewayLimits.maxWriteBytes) {
      this.counters.mutations += 1;
      await this.call((c) => c.writeFile(p, data, { createParents: false }), p);
    } else {
      await writeChunked(this.chunkedIo(), client, p, data);
    }
    // A copy: VS Code may reuse the buffer it handed over.
    this.kept.keep(p, Uint8Array.from(data));
    this.guard.seen(p, data);
    this.readUnderEdits.delete(p);
    this.recordWrite(p, data.byteLength, existing ? 'changed' : 'created');
  }

  /**
   * Refuses to overwrite `p` with a change VS Code's own check could not see (saveGuard.ts): the first refusal makes the
   * change known (a later mtime, a fresh listing, an event). Not checked: a file this window never read, one over one
   * gateway read, and a change in the one gateway call between the check and the write.
   */
  private async refuseUnseenChange(p: string, listedSize: number): Promise<void> {
    const found = await this.guard.check(p, listedSize, GatewayLimits.maxReadBytes, () => {
      this.counters.reads += 1;
      return this.call((c) => c.read(p, { maxBytes: GatewayLimits.maxReadBytes }), p);
    });
    if (found.kind !== 'changed') return;
    if (found.first) {
      if (found.theirs !== undefined) this.kept.keep(p, found.theirs);
      this.invalidateListing(parentOf(p));
      this.times.bump(p);
      this.emit([{ type: 'changed', path: p }]);
    }
    throw new FsError('ChangedElsewhere', `${path.basename(p)} was changed in ${this.connection.label} after this window read it, so your version was not saved.`);
  }

  /**
   * The editor of `p` has no unsaved edits now and shows `text`. When that is what a read under unsaved edits brought,
   * the editor took it (Revert: VS Code drops the edits and reads the file, and this window may hear of the dropped
   * edits after the read): it is the base now.
   */
  editorShows(p: string, text: () => string): void {
    p = normalize(p);
    const read = this.readUnderEdits.get(p);
    if (read === undefined) return; // the common case (a reload, a save): the text is not even asked for
    this.readUnderEdits.delete(p);
    if (new TextDecoder().decode(read) === text()) this.guard.seen(p, read);
  }

  /** The sandbox's version of a file whose save was refused (undefined: no refusal, or too large to keep). */
  conflictOf(p: string): Uint8Array | undefined {
    return this.guard.theirs(normalize(p));
  }

  /** The user chose to save over the refused version of `p`: the next save goes through while the sandbox still holds it. */
  overwriteConflict(p: string): void {
    this.guard.overwrite(normalize(p));
  }

  async createDirectory(p: string): Promise<void> {
    p = normalize(p);
    assertWritable(this.connection, p);
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
    assertWritable(this.connection, p);
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
    assertWritable(this.connection, from);
    await this.stat(from);
    const target = await this.statOrUndefined(to);
    if (target && !options.overwrite) throw new FsError('FileExists', `${to} already exists`);
    await this.requireDirectory(parentOf(to));
    this.counters.mutations += 1;
    await this.call((c) => c.renameFile(from, to, { overwrite: options.overwrite }), to);
    const moved = this.known.get(parentOf(from))?.get(path.basename(from));
    this.guard.move(from, to);
    this.forget(from);
    this.invalidateListing(parentOf(to));
    if (moved) this.known.get(parentOf(to))?.set(path.basename(to), { ...moved, path: path.basename(to) });
    this.times.bump(to);
    this.emit([
      { type: 'deleted', path: from },
      { type: target ? 'changed' : 'created', path: to },
    ]);
  }

  /**
   * Copies a file or a whole folder inside the sandbox with one `cp -R -p` there (the gateway has no copy route):
   * without this VS Code copies a folder file by file through this window — a read and a write per file. A
   * destination that exists is refused unless `overwrite` (then removed first, so a folder is replaced, not
   * copied into); a folder cannot be copied into itself. The new entry is announced as created.
   */
  async copy(from: string, to: string, options: { overwrite: boolean }): Promise<void> {
    from = normalize(from);
    to = normalize(to);
    assertWritable(this.connection, to);
    const source = await this.stat(from);
    if (from === '' || to === '' || to === from || isUnder(to, from)) {
      throw new FsError('NoPermissions', `${from || 'the workspace root'} cannot be copied to ${to || 'the workspace root'}`);
    }
    const target = await this.statOrUndefined(to);
    if (target && !options.overwrite) throw new FsError('FileExists', `${to} already exists`);
    await this.requireDirectory(parentOf(to));
    if (target) await this.delete(to, { recursive: true });
    this.counters.mutations += 1;
    const out = await this.call((c) => c.runCommand({ argv: ['cp', '-R', '-p', '--', from, to] }), to);
    this.invalidateListing(parentOf(to));
    if (out.exitCode !== 0) {
      const why = out.stderr.toString('utf8').trim().split('\n')[0] ?? '';
      throw new FsError('Unavailable', `copying ${from} to ${to} in the sandbox failed (cp exited ${out.exitCode}${why ? `: ${why}` : ''})`);
    }
    this.known.get(parentOf(to))?.set(path.basename(to), { path: path.basename(to), directory: source.type === 'directory', ...(source.type === 'file' ? { sizeBytes: source.size } : {}) });
    this.times.bump(to);
    this.emit([{ type: 'created', path: to }]);
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
    await this.recheck([...this.known.keys()].filter((d) => d === '' || isUnder(d, dir) || isUnder(dir, d)));
  }

  /** Folders a watch saw change (anyone's change, e.g. a command still running): listed again and compared, as above. */
  async foldersChanged(folders: readonly string[]): Promise<void> {
    const changed = new Set(folders.map(normalize));
    await this.recheck([...this.known.keys()].filter((d) => changed.has(d)));
  }

  private async recheck(folders: string[]): Promise<void> {
    this.missingDirs.clear();
    const affected = folders.sort((a, b) => depth(a) - depth(b) || (a < b ? -1 : a > b ? 1 : 0)).slice(0, MAX_FOLDERS_RECHECKED);
    // Every cached listing the command may have made stale goes now, before the first await: a read
    // that arrives while the folders are re-listed one by one must not be answered from the old one.
    // A listing already in flight may have been read before the command changed the folder: it is
    // not joined, and what it brings back is not kept.
    for (const d of affected) {
      this.listings.delete(d);
      this.inflight.delete(d);
    }
    const changes: FileChange[] = [];
    for (const d of affected) {
      const before = this.known.get(d);
      if (!before) continue; // dropped meanwhile (its parent was deleted below)
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
          // The command may have changed it: kept contents of another size are out of date.
          this.kept.dropIfNotSize(p, entry.sizeBytes ?? 0);
          this.times.bump(p);
          changes.push({ type: 'changed', path: p });
        }
      }
      for (const name of before.keys()) {
        if (after.has(name)) continue;
        const p = d === '' ? name : `${d}/${name}`;
        this.forgetKnown(p);
        this.times.dropUnder(p);
        this.kept.dropUnder(p);
        this.guard.forget(p);
        changes.push({ type: 'deleted', path: p });
      }
    }
    if (changes.length > 0) this.emit(changes);
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private readonly(): boolean {
    return isReadOnly(this.connection);
  }

  private async client(): Promise<GatewayClient> {
    return this.connection.client();
  }

  private chunkedIo(): ChunkedIo {
    return { call: (fn, p) => this.call(fn, p), counters: this.counters, chunkBytes: this.chunkBytes };
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
    const load: Promise<Listing> = this.loadListing(dir, () => this.inflight.get(dir) === load).finally(() => {
      if (this.inflight.get(dir) === load) this.inflight.delete(dir);
    });
    this.inflight.set(dir, load);
    return load;
  }

  /** `current` says whether this load is still the one to keep (a command may have outdated it meanwhile). */
  private async loadListing(dir: string, current: () => boolean): Promise<Listing> {
    const entries = new Map<string, FileEntry>();
    try {
      const listed = await readThrough(
        this.connection,
        async () => {
          const all: FileEntry[] = [];
          let pageToken = '';
          do {
            this.counters.listPages += 1;
            const page = await this.call((c) => c.listPage({ path: dir, limit: GatewayLimits.listMaxLimit, pageToken }), dir || '/');
            all.push(...page.entries);
            pageToken = page.nextPageToken;
          } while (pageToken !== '');
          return all;
        },
        (reads) => listThroughCompanion(reads, dir, this.counters),
      );
      for (const e of listed) entries.set(e.path, e);
    } catch (err) {
      if (err instanceof FsError && err.kind === 'FileNotFound') this.missingDirs.set(dir, Date.now());
      throw err;
    }
    const listing = { entries, at: Date.now() };
    if (!current()) return listing;
    this.listings.set(dir, listing);
    const newFolder = !this.known.has(dir);
    this.known.set(dir, new Map(entries));
    if (newFolder) this.knownFoldersChanged();
    this.missingDirs.delete(dir);
    for (const e of entries.values()) this.times.observe(dir === '' ? e.path : `${dir}/${e.path}`, e.sizeBytes ?? 0);
    return listing;
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

  private recordWrite(p: string, size: number, type: 'created' | 'changed'): void {
    const entry = { path: path.basename(p), directory: false, sizeBytes: size };
    this.listings.get(parentOf(p))?.entries.set(entry.path, entry);
    this.known.get(parentOf(p))?.set(entry.path, entry);
    this.times.written(p, size);
    this.emit([{ type, path: p }]);
  }

  private forget(p: string): void {
    this.invalidateListing(parentOf(p));
    this.forgetKnown(p);
    for (const key of [...this.listings.keys()]) if (isUnder(key, p)) this.listings.delete(key);
    this.times.dropUnder(p);
    this.kept.dropUnder(p);
    this.guard.forget(p);
  }

  /** Drops `p` from its parent's known entries, and what is known of folders under it. */
  private forgetKnown(p: string): void {
    this.known.get(parentOf(p))?.delete(path.basename(p));
    const before = this.known.size;
    for (const key of [...this.known.keys()]) if (isUnder(key, p) && p !== '') this.known.delete(key);
    if (this.known.size !== before) this.knownFoldersChanged();
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

  /** A gateway call on `p`, retried once if never sent, its failure an FsError (see callForFile). */
  private call<T>(fn: (client: GatewayClient) => Promise<T>, p: string): Promise<T> {
    return callForFile(this.connection, fn, p);
  }
}
