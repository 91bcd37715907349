// Writes validated entries into hydration staging (spec §8 step 5): directories 0755, files created O_EXCL with
// 0644/0755 whatever the umask, each file fsynced before publication. Small files are created and written with
// synchronous calls (microseconds from the page cache; an asynchronous call per step cost a thread-pool wake-up
// each and dominated hydration of many small files), then fsynced by a bounded set of background tasks so the
// slow part overlaps with decompression and concurrent fsyncs share journal commits.
// Nothing is written before the reader has passed the entry's header; `drain` must succeed before publishing.
import { chmodSync, closeSync, constants, fchmodSync, fsync, mkdirSync, openSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { SessionBundleManifestV1 } from '../../protocol/bundle';
import { SessionBundleError } from './errors';
import { writeFully, writeFullySync } from './fsx';
import { validateArchivePath } from './pathLanguage';
import type { ReadHandlers } from './reader';
import type { UstarEntry } from './ustar';

const SMALL_FILE_BYTES = 1024 * 1024;
const MAX_PENDING_FSYNCS = 64;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

type Current = { kind: 'small'; path: string; mode: number; chunks: Buffer[] } | { kind: 'big'; mode: number; handle: fsp.FileHandle };

function fsyncAndClose(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fsync(fd, (err) => {
      try {
        closeSync(fd);
      } catch (closeErr) {
        reject(err ?? closeErr);
        return;
      }
      if (err) reject(err);
      else resolve();
    });
  });
}

export class StagingWriter implements ReadHandlers {
  private current: Current | undefined;
  private readonly pending = new Set<Promise<void>>();
  private failure: unknown;

  constructor(
    private readonly stagingRoot: string,
    private readonly expectedSessionId: string,
  ) {}

  private target(path: string): string {
    return join(this.stagingRoot, ...validateArchivePath(path));
  }

  private rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Track a background fsync; waits while too many are pending. */
  private async track(task: Promise<void>): Promise<void> {
    const tracked = task.catch((err: unknown) => {
      this.failure ??= err;
    });
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
    while (this.pending.size >= MAX_PENDING_FSYNCS) await Promise.race(this.pending);
    this.rethrow();
  }

  onManifest(manifest: SessionBundleManifestV1): void {
    if (manifest.envelope.sessionId !== this.expectedSessionId) {
      throw new SessionBundleError('identity_mismatch', 'the bundle belongs to a different session than expected', { operation: 'hydrate' });
    }
  }

  onDirectory(entry: UstarEntry): void {
    this.rethrow();
    const path = this.target(entry.path);
    mkdirSync(path, { mode: 0o755 });
    chmodSync(path, 0o755);
  }

  async onFileStart(entry: UstarEntry): Promise<void> {
    this.rethrow();
    if (entry.size <= SMALL_FILE_BYTES) {
      this.current = { kind: 'small', path: this.target(entry.path), mode: entry.mode, chunks: [] };
      return;
    }
    const handle = await fsp.open(this.target(entry.path), CREATE_FLAGS, entry.mode);
    this.current = { kind: 'big', mode: entry.mode, handle };
  }

  async onFileChunk(chunk: Buffer): Promise<void> {
    const current = this.current;
    if (current === undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: content outside a file');
    if (current.kind === 'small') current.chunks.push(chunk);
    else await writeFully(current.handle, chunk);
  }

  async onFileEnd(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current === undefined) return;
    if (current.kind === 'big') {
      await current.handle.chmod(current.mode);
      await this.track(current.handle.sync().finally(() => current.handle.close()));
      return;
    }
    const fd = openSync(current.path, CREATE_FLAGS, current.mode);
    try {
      for (const chunk of current.chunks) writeFullySync(fd, chunk);
      fchmodSync(fd, current.mode);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    await this.track(fsyncAndClose(fd));
  }

  /** Wait for every pending fsync; throws the first failure. */
  async drain(): Promise<void> {
    await Promise.all(this.pending);
    this.rethrow();
  }

  /** Stop: close an open file and let pending fsyncs settle (their files are removed with staging). */
  async abort(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current?.kind === 'big') await current.handle.close().catch(() => undefined);
    await Promise.all(this.pending);
  }
}
