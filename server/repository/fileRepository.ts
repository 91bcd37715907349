// The embedded default repository on the local file system (spec §9.3, adapted): one state
// document replaced atomically under a process-lifetime lock (reads are lock-free), and a
// content-addressed object directory. Survives SIGKILL at any instant: a writer that dies before
// its rename leaves the old state (and a lock the next writer reclaims); after it, the new one.
import { randomUUID } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ImmutableObjectRef } from '../../protocol/repository';
import { verifyStoredCheckpoint } from './checkpoint';
import type { SessionRepository } from './contract';
import { DeferredGarbage } from './deferredGarbage';
import { errnoCode, fsyncDir, removeIfPresent } from './durableFs';
import { RepositoryEngine } from './engine';
import { SessionRepositoryError } from './errors';
import { acquireFileLock, removeDeadLockLeftovers } from './fileLock';
import { FileObjectStore } from './fileObjectStore';
import { checkStateToWrite, emptyFileState, type FileState, FileStateView, parseFileState } from './fileState';
import { referencedObjectIds, retentionPolicy } from './retention';
import type { RepositoryReader, RepositoryStorage, RepositoryWriter, WriteOptions } from './storage';

export const STATE_FILE = 'repository-v1.json';
export const DEFAULT_LOCK_TIMEOUT_MS = 30_000;
/** Object temp files younger than this may belong to a publisher still writing them. */
const MIN_TEMP_AGE_MS = 60 * 60 * 1000;

export interface FileRepositoryOptions {
  storageRoot: string;
  keepRevisions?: number;
  gcGraceMs?: number;
  /** Finished activations remembered per Session (default 256; retention.ts). */
  finishedActivationsKept?: number;
  lockTimeoutMs?: number;
}

/** `$XDG_DATA_HOME/sandbox-sessions/repository` (XDG default: ~/.local/share). */
export function defaultFileRepositoryRoot(env: NodeJS.ProcessEnv = process.env): string {
  const dataHome = env.XDG_DATA_HOME && path.isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : path.join(os.homedir(), '.local', 'share');
  return path.join(dataHome, 'sandbox-sessions', 'repository');
}

export async function openFileSessionRepository(options: FileRepositoryOptions): Promise<SessionRepository> {
  const policy = retentionPolicy(options);
  const root = path.resolve(options.storageRoot);
  try {
    await fs.mkdir(root, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new SessionRepositoryError('io_failure', `cannot create the repository directory ${root}: ${(err as Error).message}`, { cause: err });
  }
  await refuseMakaRepository(root);
  const storage = new FileStorage(root, options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
  // Fail closed at open, too: a corrupt state document is reported before any operation.
  await storage.load();
  await storage.objects.prepareShards();
  return new RepositoryEngine(storage, policy);
}

/** The state document of Maka's own file repository (spec §9.3), whose objects directory has the same layout as ours. */
export const MAKA_STATE_FILE = 'session-repository-v1.json';

/**
 * This repository keeps its own state document (more revisions, activation records) beside an object directory laid
 * out as Maka's is. In a directory Maka's file repository uses, it would list none of Maka's sessions, and its
 * garbage collection would take every object only Maka's state refers to for garbage: so such a directory is refused.
 */
async function refuseMakaRepository(root: string): Promise<void> {
  const makaState = path.join(root, MAKA_STATE_FILE);
  const found = await fs.lstat(makaState).then(
    () => true,
    (err: unknown) => {
      if (errnoCode(err) === 'ENOENT') return false;
      throw new SessionRepositoryError('io_failure', `cannot check ${makaState}: ${(err as Error).message}`, { cause: err });
    },
  );
  if (found) {
    throw new SessionRepositoryError(
      'io_failure',
      `${root} holds Maka's own file repository (${MAKA_STATE_FILE}); Sandbox Sessions keeps its sessions in a directory of its own, beside which its garbage collection would delete Maka's objects. Choose another directory (the sandboxSessions.repository setting, --repository or SANDBOX_SESSIONS_REPOSITORY)`,
    );
  }
}

function stateFileKey(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

class FileStorage implements RepositoryStorage {
  readonly kind = 'file' as const;
  readonly verifiesInsideWrite = false;
  readonly objects: FileObjectStore;
  private readonly deferred: DeferredGarbage;
  private readonly stateFile: string;
  private readonly lockFile: string;
  private cache: { key: string; state: FileState } | undefined;

  constructor(
    private readonly root: string,
    private readonly lockTimeoutMs: number,
  ) {
    this.objects = new FileObjectStore(root);
    this.deferred = new DeferredGarbage(root);
    this.stateFile = path.join(root, STATE_FILE);
    this.lockFile = `${this.stateFile}.lock`;
  }

  /**
   * Reads and checks the state document. Every write replaces the file (new inode), so an unchanged
   * (dev, ino, size, mtime, ctime) means unchanged content and the parsed, checked state is reused: the one
   * last read, or the one this process last wrote (save), which is then never parsed back.
   */
  async load(): Promise<FileState> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(this.stateFile, 'r');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return emptyFileState();
      throw err;
    }
    try {
      const key = stateFileKey(await handle.stat({ bigint: true }));
      if (this.cache?.key === key) return this.cache.state;
      const state = parseFileState(await handle.readFile('utf8'), this.stateFile);
      this.cache = { key, state };
      return state;
    } finally {
      await handle.close();
    }
  }

  private view(state: FileState): FileStateView {
    return new FileStateView(
      state,
      (refs) => this.objectsPresent(refs),
      (checkpoint) => verifyStoredCheckpoint(this.objects, checkpoint),
    );
  }

  async read<T>(fn: (reader: RepositoryReader) => Promise<T>): Promise<T> {
    return fn(this.view(await this.load()));
  }

  async write<T>(fn: (writer: RepositoryWriter) => Promise<T>, options: WriteOptions = {}): Promise<T> {
    const lock = await acquireFileLock(this.lockFile, this.lockTimeoutMs);
    try {
      const view = this.view(await this.load());
      const result = await fn(view);
      if (view.dirty) await this.save(view.toState(), options.durable !== false);
      return result;
    } finally {
      await lock.release();
    }
  }

  async collectGarbage(candidates: string[] | 'all', graceMs: number): Promise<number> {
    const lock = await acquireFileLock(this.lockFile, this.lockTimeoutMs);
    try {
      const view = this.view(await this.load());
      const referenced = referencedObjectIds(this.objects, view.allRevisions(), view.allForks());
      const now = Date.now();
      // Also the objects released earlier that were too young then.
      const pending = new Set(await this.deferred.list());
      let ids: string[];
      if (candidates === 'all') {
        // Maka may have started to use this directory since it was opened: then no object is taken for garbage.
        await refuseMakaRepository(this.root);
        await removeDeadLockLeftovers(this.lockFile);
        const listed = await this.objects.list();
        // A publisher writes its temp file without the lock: only remove ones too old to be live.
        const tempGraceMs = Math.max(graceMs, MIN_TEMP_AGE_MS);
        for (const t of listed.temps) if (now - t.mtimeMs >= tempGraceMs) await removeIfPresent(t.path);
        ids = [...new Set([...listed.objects.map((o) => o.id), ...pending])];
      } else {
        ids = [...new Set([...candidates, ...pending])];
      }
      let deleted = 0;
      for (const id of ids) {
        const info = referenced.has(id) ? undefined : await this.objects.stat(id);
        if (info && now - info.mtimeMs < graceMs) {
          if (!pending.has(id)) await this.deferred.remember(id);
          continue;
        }
        if (info) {
          await this.objects.remove(id);
          deleted++;
        }
        if (pending.has(id)) await this.deferred.forget(id);
      }
      return deleted;
    } finally {
      await lock.release();
    }
  }

  async close(): Promise<void> {}

  /** Under the lock: objects verified before the lock was taken must still be there (GC runs under the same lock). */
  private async objectsPresent(refs: ImmutableObjectRef[]): Promise<void> {
    for (const ref of refs) {
      const info = await this.objects.stat(this.objects.objectIdOf(ref));
      if (!info) throw new SessionRepositoryError('object_not_found', `object ${ref.objectRef} disappeared before the commit (garbage-collected); publish the checkpoint again and retry`);
      if (info.bytes !== ref.bytes) throw new SessionRepositoryError('integrity_mismatch', `object ${ref.objectRef} has ${info.bytes} bytes on disk, expected ${ref.bytes}`);
    }
  }

  /**
   * Atomic replace: temp file (O_EXCL, 0600), fsync, rename over the state, fsync the directory — unless not `durable`
   * (WriteOptions): then the rename is made durable by the next durable save's directory fsync, which persists the
   * directory's entries as they are then (the name → the newest state file, whose bytes were fsynced before its rename).
   */
  private async save(state: FileState, durable: boolean): Promise<void> {
    checkStateToWrite(state, this.stateFile);
    await this.removeDeadTemps();
    const tmp = `${this.stateFile}.${randomUUID()}.tmp`;
    const handle = await fs.open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(JSON.stringify(state) + '\n');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.rename(tmp, this.stateFile);
    } catch (err) {
      await removeIfPresent(tmp);
      throw err;
    }
    // Under the lock nobody else replaces the file: what is there now is what we just wrote.
    this.cache = { key: stateFileKey(await fs.stat(this.stateFile, { bigint: true })), state };
    if (durable) await fsyncDir(this.root);
  }

  /** State temp files can only be left by a writer that died holding the lock we now hold. */
  private async removeDeadTemps(): Promise<void> {
    const prefix = `${STATE_FILE}.`;
    for (const name of await fs.readdir(this.root)) {
      if (name.startsWith(prefix) && name.endsWith('.tmp')) await removeIfPresent(path.join(this.root, name));
    }
  }
}
