// The file adapter's object store: `objects/<id[0:2]>/<id>` (0600) under the repository root.
// Publish streams into a private temp file while hashing, fsyncs it, then hard-links it into place
// (link never replaces, so an existing object is never overwritten by other bytes) and fsyncs the
// directories; reads re-verify size and digest every time — unless this store has hashed the very same inode
// since it last changed (same device, inode, size, mtime and ctime, which every write and every chmod/utimes/link
// moves): an activation's commit and the next checkout then do not hash the bundle it has just published again.
// The 256 shard directories are made (and made durable) when the repository is opened, so a publish does not wait
// for a new directory to reach the disk before its object can (it still makes one that is missing).
// A handed-over file with a trusted digest (objectStore.ts WrittenFile) that is still the very inode its writer left
// is moved in without being read at all; any other file is hashed while it is moved or copied in.
import { randomUUID } from 'node:crypto';
import { type BigIntStats, createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { ImmutableObjectRef } from '../../protocol/repository';
import { DigestMeter, discard } from './digestMeter';
import { errnoCode, fsyncDir, removeIfPresent } from './durableFs';
import { materializeFromStream, STREAM_CHUNK } from './materialize';
import { SessionRepositoryError, toRepositoryError } from './errors';
import {
  canonicalObjectId,
  checkMaxBytes,
  checkPublishInput,
  type ImmutableObjectStore,
  type MaterializedObject,
  type MaterializeObjectInput,
  objectIdFor,
  type PublishObjectInput,
  type WrittenFile,
} from './objectStore';

export const FILE_OBJECT_REF_SCHEME = 'maka-local-object://v1/';

export interface StoredObjectInfo {
  id: string;
  bytes: number;
  mtimeMs: number;
}

/** Object files whose verification is remembered (oldest forgotten first); a few hundred bytes each. */
const MAX_REMEMBERED = 4096;

type InodeStats = { dev: bigint; ino: bigint; size: bigint; mtimeNs: bigint; ctimeNs: bigint };
const inodeKey = (st: InodeStats): string => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;

export class FileObjectStore implements ImmutableObjectStore {
  readonly objectsDir: string;
  /** Object id → the inode (key) whose bytes this store hashed and found to be the object. */
  private readonly verified = new Map<string, string>();

  constructor(readonly root: string) {
    this.objectsDir = path.join(root, 'objects');
  }

  pathOf(id: string): string {
    return path.join(this.objectsDir, id.slice(0, 2), id);
  }

  objectIdOf(ref: ImmutableObjectRef): string {
    return canonicalObjectId(ref, FILE_OBJECT_REF_SCHEME);
  }

  async publish(input: PublishObjectInput): Promise<ImmutableObjectRef> {
    checkPublishInput(input);
    const id = objectIdFor(input.digest, input.mediaType);
    const ref: ImmutableObjectRef = {
      objectRef: `${FILE_OBJECT_REF_SCHEME}${id}`,
      digest: input.digest,
      bytes: input.bytes,
      mediaType: input.mediaType,
    };
    const dest = this.pathOf(id);
    const tmp = `${dest}.${randomUUID()}.tmp`;
    let written: InodeStats | undefined;
    let linked = false;
    try {
      await this.ensureShardDir(path.dirname(dest));
      const meter = new DigestMeter(input.bytes, `object source for ${input.digest}`);
      const moved = input.source.kind === 'file' && input.source.handOver === true ? await takeOver(input.source.path, tmp, trustedIdentity(input)) : 'no';
      if (moved === 'trusted') {
        // Renamed into the store, the unchanged inode whose bytes our own writer hashed as it wrote them: not read.
      } else if (moved === 'moved') {
        // Renamed into the store: verify the bytes where they now are (a read, no copy).
        await pipeline(createReadStream(tmp, { highWaterMark: STREAM_CHUNK }), meter, discard());
        meter.verify(input.digest);
      } else if (input.source.kind === 'bytes') {
        // A value held in memory (a checkpoint manifest): checked first, then written and fsynced through one handle.
        meter.add(input.source.value);
        meter.verify(input.digest);
        written = await writeSynced(tmp, input.source.value);
      } else {
        const source = createReadStream(input.source.path, { highWaterMark: STREAM_CHUNK });
        await pipeline(source, meter, createWriteStream(tmp, { flags: 'wx', mode: 0o600, highWaterMark: STREAM_CHUNK }));
        meter.verify(input.digest);
      }
      written ??= await syncedStats(tmp);
      try {
        await fs.link(tmp, dest);
        linked = true;
        await fsyncDir(path.dirname(dest));
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST') throw err;
        // Same id ⇒ same (digest, media type). Keep the existing object if it still verifies
        // (refreshing its mtime so a concurrent GC grace window sees it as in use); repair it from
        // our verified copy if it does not.
        if (await this.verifies(ref)) {
          const now = new Date();
          await fs.utimes(dest, now, now);
        } else {
          await fs.rename(tmp, dest);
          await fsyncDir(path.dirname(dest));
        }
      }
    } catch (err) {
      throw toRepositoryError(err, `publishing object ${input.digest}`);
    } finally {
      await removeIfPresent(tmp).catch(() => undefined);
    }
    // No extra read-back here: the linked inode is the temp file whose bytes were verified and
    // fsynced above, and an existing object was verified (or repaired) before we kept it.
    if (linked && written !== undefined) {
      // The object is the inode just verified, unwritten since (same size and mtime; its ctime moved with the link).
      const now = await fs.lstat(dest, { bigint: true }).catch(() => undefined);
      if (now?.isFile() === true && now.ino === written.ino && now.dev === written.dev && now.size === written.size && now.mtimeNs === written.mtimeNs) {
        this.remember(id, now);
      }
    }
    return ref;
  }

  async assertReadable(ref: ImmutableObjectRef): Promise<void> {
    const id = this.objectIdOf(ref);
    const file = this.pathOf(id);
    try {
      const handle = await this.openObject(file, ref);
      const before = await handle.stat({ bigint: true }).catch(async (err: unknown) => {
        await handle.close();
        throw err;
      });
      if (this.verified.get(id) === inodeKey(before)) {
        await handle.close();
        return;
      }
      const meter = new DigestMeter(ref.bytes, `object ${ref.objectRef}`);
      if (ref.bytes <= STREAM_CHUNK) {
        // Small objects (checkpoint manifests, small bundles): one read, no stream machinery.
        try {
          const buffer = Buffer.alloc(ref.bytes + 1);
          let filled = 0;
          for (;;) {
            const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, null);
            if (bytesRead === 0) break;
            filled += bytesRead;
            if (filled === buffer.length) break;
          }
          meter.end(buffer.subarray(0, filled));
          meter.resume();
          await new Promise((resolve, reject) => meter.once('end', resolve).once('error', reject));
        } finally {
          await handle.close();
        }
      } else {
        await pipeline(handle.createReadStream({ highWaterMark: STREAM_CHUNK }), meter, discard());
      }
      meter.verify(ref.digest);
      const after = await fs.lstat(file, { bigint: true });
      if (after.isFile() && inodeKey(after) === inodeKey(before)) this.remember(id, after);
    } catch (err) {
      this.verified.delete(id);
      throw toRepositoryError(err, `reading object ${ref.objectRef}`);
    }
  }

  /** Remembers that the object's bytes were hashed while its file was this inode, unchanged. */
  private remember(id: string, st: InodeStats): void {
    this.verified.delete(id);
    this.verified.set(id, inodeKey(st));
    if (this.verified.size > MAX_REMEMBERED) this.verified.delete(this.verified.keys().next().value as string);
  }

  async materialize(input: MaterializeObjectInput): Promise<MaterializedObject> {
    checkMaxBytes(input.maxBytes);
    const { ref } = input;
    const id = this.objectIdOf(ref);
    if (ref.bytes > input.maxBytes) {
      throw new SessionRepositoryError('quota_exceeded', `object ${ref.objectRef} has ${ref.bytes} bytes, more than the limit of ${input.maxBytes}`);
    }
    return materializeFromStream(input, async () => {
      const handle = await this.openObject(this.pathOf(id), ref);
      return handle.createReadStream({ highWaterMark: STREAM_CHUNK });
    });
  }

  async storedFile(ref: ImmutableObjectRef, maxBytes: number): Promise<string | undefined> {
    checkMaxBytes(maxBytes);
    const id = this.objectIdOf(ref);
    if (ref.bytes > maxBytes) {
      throw new SessionRepositoryError('quota_exceeded', `object ${ref.objectRef} has ${ref.bytes} bytes, more than the limit of ${maxBytes}`);
    }
    const file = this.pathOf(id);
    const st = await fs.lstat(file).catch(() => undefined);
    return st?.isFile() === true && st.size === ref.bytes ? file : undefined;
  }

  /** Size and mtime of a stored object; undefined when absent. */
  async stat(id: string): Promise<StoredObjectInfo | undefined> {
    try {
      const st = await fs.stat(this.pathOf(id));
      return { id, bytes: st.size, mtimeMs: st.mtimeMs };
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** Every object id on disk, and temp files left by crashed publishers. */
  async list(): Promise<{ objects: StoredObjectInfo[]; temps: { path: string; mtimeMs: number }[] }> {
    const objects: StoredObjectInfo[] = [];
    const temps: { path: string; mtimeMs: number }[] = [];
    let shards: string[];
    try {
      shards = await fs.readdir(this.objectsDir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { objects, temps };
      throw err;
    }
    for (const shard of shards) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      const dir = path.join(this.objectsDir, shard);
      for (const name of await fs.readdir(dir)) {
        const st = await fs.stat(path.join(dir, name)).catch(() => undefined);
        if (!st) continue;
        if (/^[0-9a-f]{64}$/.test(name)) objects.push({ id: name, bytes: st.size, mtimeMs: st.mtimeMs });
        else if (name.endsWith('.tmp')) temps.push({ path: path.join(dir, name), mtimeMs: st.mtimeMs });
      }
    }
    return { objects, temps };
  }

  async remove(id: string): Promise<void> {
    const file = this.pathOf(id);
    this.verified.delete(id);
    await removeIfPresent(file);
    await fsyncDir(path.dirname(file));
  }

  private async verifies(ref: ImmutableObjectRef): Promise<boolean> {
    try {
      await this.assertReadable(ref);
      return true;
    } catch (err) {
      if (err instanceof SessionRepositoryError && err.code === 'integrity_mismatch') return false;
      throw err;
    }
  }

  private async openObject(file: string, ref: ImmutableObjectRef): Promise<fs.FileHandle> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, 'r');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') {
        throw new SessionRepositoryError('object_not_found', `object ${ref.objectRef} is not in the repository (it was never published or has been garbage-collected)`);
      }
      throw err;
    }
    const st = await handle.stat();
    if (st.size !== ref.bytes) {
      await handle.close();
      throw new SessionRepositoryError('integrity_mismatch', `object ${ref.objectRef} has ${st.size} bytes on disk, expected ${ref.bytes}`);
    }
    return handle;
  }

  /**
   * Makes the shard directories that are missing, with one fsync for them all; a store this process cannot write
   * (read-only) is left as it is. Called when the repository is opened.
   */
  async prepareShards(): Promise<void> {
    try {
      let made = false;
      const present = new Set(
        await fs.readdir(this.objectsDir).catch(async (err: unknown) => {
          if (errnoCode(err) !== 'ENOENT') throw err;
          await fs.mkdir(this.objectsDir, { mode: 0o700 });
          await fsyncDir(this.root);
          return [];
        }),
      );
      for (let i = 0; i < 256; i++) {
        const shard = i.toString(16).padStart(2, '0');
        if (present.has(shard)) continue;
        await fs.mkdir(path.join(this.objectsDir, shard), { mode: 0o700 }).catch((err: unknown) => {
          if (errnoCode(err) !== 'EEXIST') throw err;
        });
        made = true;
      }
      if (made) await fsyncDir(this.objectsDir);
    } catch {
      // Read-only or otherwise unwritable here: publishes (if any) make their shard as they need it.
    }
  }

  private async ensureShardDir(dir: string): Promise<void> {
    try {
      await fs.mkdir(dir, { mode: 0o700 });
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') return;
      if (errnoCode(err) !== 'ENOENT') throw err;
      await fs.mkdir(this.objectsDir, { recursive: true, mode: 0o700 });
      await fsyncDir(this.root);
      await fs.mkdir(dir, { mode: 0o700 }).catch((e: unknown) => {
        if (errnoCode(e) !== 'EEXIST') throw e;
      });
    }
    await fsyncDir(path.dirname(dir));
  }
}

/** The writer's identity of a handed-over file whose trusted digest is the one being published, of its size. */
function trustedIdentity(input: PublishObjectInput): WrittenFile['identity'] | undefined {
  const written = input.source.kind === 'file' ? input.source.written : undefined;
  if (written === undefined || written.digest !== input.digest || written.identity.size !== BigInt(input.bytes)) return undefined;
  return written.identity;
}

const sameWrittenIdentity = (st: BigIntStats, id: WrittenFile['identity']): boolean =>
  st.dev === id.dev && st.ino === id.ino && st.size === id.size && st.mtimeNs === id.mtimeNs && st.ctimeNs === id.ctimeNs;

/**
 * Moves a handed-over regular file (not a link) to `tmp` beside the store's objects, made 0600; 'no' when it is on
 * another file system (the caller then copies). Nothing else may hold the file open for writing: its bytes are
 * verified after the move ('moved'), and a mismatch publishes nothing — unless the file was, just before the move,
 * exactly the inode its writer vouched for (`written`: same device, inode, size, mtime and ctime) and is still that
 * inode with that size and mtime after it ('trusted': its writer's digest stands, nothing is read).
 */
async function takeOver(source: string, tmp: string, written: WrittenFile['identity'] | undefined): Promise<'no' | 'moved' | 'trusted'> {
  const st = await fs.lstat(source, { bigint: true });
  if (!st.isFile()) return 'no';
  const untouched = written !== undefined && sameWrittenIdentity(st, written);
  try {
    await fs.rename(source, tmp);
  } catch (err) {
    if (errnoCode(err) === 'EXDEV') return 'no';
    throw err;
  }
  const moved = await fs.lstat(tmp, { bigint: true });
  if (!moved.isFile() || moved.ino !== st.ino || moved.dev !== st.dev) {
    throw new SessionRepositoryError('integrity_mismatch', 'the handed-over file was replaced while it was moved into the store');
  }
  if ((moved.mode & 0o7777n) !== 0o600n) await fs.chmod(tmp, 0o600);
  return untouched && moved.size === st.size && moved.mtimeNs === st.mtimeNs ? 'trusted' : 'moved';
}

/** Creates `file` (0600, never over an existing one) with `bytes`, fsyncs it and returns what it then is. */
async function writeSynced(file: string, bytes: Uint8Array): Promise<InodeStats> {
  const handle = await fs.open(file, 'wx', 0o600);
  try {
    await handle.writeFile(bytes);
    await handle.sync();
    return await handle.stat({ bigint: true });
  } finally {
    await handle.close();
  }
}

/** Fsyncs `file` (written and closed by a stream) and returns what it then is. */
async function syncedStats(file: string): Promise<InodeStats> {
  const handle = await fs.open(file, 'r');
  try {
    await handle.sync();
    return await handle.stat({ bigint: true });
  } finally {
    await handle.close();
  }
}
