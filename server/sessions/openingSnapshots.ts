// A sandbox's opening snapshot: its workspace as it was when it was first compared here, for "changed since
// opened" when it has no revision to compare with (made from an image, not opened from a session). Packed as a save
// packs it (the policy, the limits), into a bundle file in the state root that is never committed, and indexed as a
// revision is (revisionIndex.ts), so comparing with it and reading its files for a diff are the revision paths.
// One snapshot per sandbox key; a newer sandbox with the same name (another uid or creation time) gets a new one.
// Two servers taking one at once (two windows) agree: the first record linked into place wins, the other is dropped.
import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { OpeningChanges } from '../../protocol/companion/openings';
import { Sha256DigestSchema, type WorkspaceSnapshotReport } from '../../protocol/bundle';
import { sandboxKey, type ProviderKind, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';
import { readJsonRecord } from '../local/atomicFile';
import type { Logger } from '../log';
import { SandboxError, type SandboxProvider, type WorkOptions } from '../sandboxes/provider';
import { listIndexed, readIndexed, RevisionBrowseError, type RevisionEntry, type RevisionIndex, type RevisionIndexCache } from './revisionIndex';
import { compareSandboxWithIndex } from './sandboxChanges';
import type { SandboxSessionService } from './sandboxSessions';

/** Snapshots kept at most: the ones compared least recently go first. */
export const MAX_OPENING_SNAPSHOTS = 32;
/** The session the snapshot's bundle is packed for (a bundle names one; this one is never committed). */
const SNAPSHOT_SESSION_ID = 'opening-snapshot';

const RecordSchema = z.object({
  key: z.string().min(1),
  /** Which sandbox of that name it is of: its uid and creation time as its provider reports them. */
  sandbox: z.object({ uid: z.string().optional(), createdAt: z.string().optional() }),
  takenAt: z.string().datetime(),
  /** The bundle file, in the same folder. */
  bundle: z.string().regex(/^[0-9a-f]{64}\.[0-9a-f]{8}\.tar\.zst$/),
  digest: Sha256DigestSchema,
});
type SnapshotRecord = z.infer<typeof RecordSchema>;

export class OpeningSnapshots {
  /** Snapshots being taken by this server, by sandbox key (one at a time per sandbox). */
  private readonly taking = new Map<string, Promise<{ record: SnapshotRecord; workspace?: WorkspaceSnapshotReport }>>();

  constructor(
    /** `<state root>/opening-snapshots` (made 0700 on first use). */
    private readonly dir: string,
    private readonly sessions: SandboxSessionService,
    private readonly providers: ReadonlyMap<ProviderKind, SandboxProvider>,
    private readonly indexes: RevisionIndexCache,
    private readonly log: Logger,
    private readonly maxKept = MAX_OPENING_SNAPSHOTS,
    /** When a snapshot is taken or compared (its record's time orders pruning). */
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** What the sandbox changed since its opening snapshot, taken first if it has none. */
  async compare(ref: SandboxRef, work: WorkOptions = {}): Promise<OpeningChanges> {
    const { record, taken, workspace } = await this.ensure(ref, work);
    const index = await this.index(record);
    // Just taken by this call: the workspace is the snapshot, so there is nothing to compare (what changes after it
    // is the next comparison's; the view compares again on the sandbox's file events).
    if (workspace !== undefined) {
      const unchanged = [...index.files.keys()].filter((name) => name.startsWith('workspace/')).length;
      return { opened: { at: record.takenAt }, taken, changes: [], total: 0, unchanged, workspace };
    }
    const compared = await compareSandboxWithIndex(this.sessions, ref, index, 'its opening snapshot', work);
    return { opened: { at: record.takenAt }, taken, ...compared };
  }

  async list(ref: SandboxRef, dir: string): Promise<RevisionEntry[]> {
    return listIndexed(await this.index(await this.recorded(ref)), dir, `the opening snapshot of ${ref.name}`);
  }

  async read(ref: SandboxRef, file: string, range: { offset: number; length: number }): Promise<{ contents: Buffer; size: number }> {
    return readIndexed(await this.index(await this.recorded(ref)), file, range, `the opening snapshot of ${ref.name}`);
  }

  /** Removes the sandbox's snapshot (the sandbox was deleted). */
  async forget(ref: SandboxRef): Promise<void> {
    const record = await readJsonRecord(this.recordFile(sandboxKey(ref)), RecordSchema).catch(() => undefined);
    if (record !== undefined) await this.remove(record);
  }

  private async recorded(ref: SandboxRef): Promise<SnapshotRecord> {
    const record = await readJsonRecord(this.recordFile(sandboxKey(ref)), RecordSchema);
    if (record === undefined) throw new RevisionBrowseError('object_not_found', `${ref.name} has no opening snapshot yet: compare it first (openings/compareSandbox)`);
    return record;
  }

  private index(record: SnapshotRecord): Promise<RevisionIndex> {
    return this.indexes.indexFile(path.join(this.dir, record.bundle), record.digest);
  }

  /**
   * The sandbox's snapshot record: the one kept if it is of this very sandbox, else a new one — with its workspace
   * report when this call's snapshot is the one kept.
   */
  private async ensure(ref: SandboxRef, work: WorkOptions): Promise<{ record: SnapshotRecord; taken: boolean; workspace?: WorkspaceSnapshotReport }> {
    const key = sandboxKey(ref);
    const provider = this.providers.get(ref.provider);
    if (!provider) throw new SandboxError('provider_unavailable', `the ${ref.provider} provider is not available in this server`);
    const { sandbox } = await provider.get(ref);
    const kept = await readJsonRecord(this.recordFile(key), RecordSchema).catch((err: unknown) => {
      this.log.warn('an unreadable opening snapshot record is replaced', { sandbox: key, error: (err as Error).message });
      return undefined;
    });
    if (kept !== undefined && sameSandbox(kept.sandbox, sandbox)) {
      await this.touch(key);
      return { record: kept, taken: false };
    }
    // A second caller while this server takes it waits for that snapshot, and compares with it.
    const already = this.taking.get(key);
    if (already) return { record: (await already).record, taken: true };
    const pending = this.take(ref, sandbox, kept, work).finally(() => this.taking.delete(key));
    this.taking.set(key, pending);
    return { ...(await pending), taken: true };
  }

  /** Takes a snapshot; `workspace` only when its record is the one kept (another server's may have won). */
  private async take(
    ref: SandboxRef,
    sandbox: SandboxSummary,
    stale: SnapshotRecord | undefined,
    work: WorkOptions,
  ): Promise<{ record: SnapshotRecord; workspace?: WorkspaceSnapshotReport }> {
    const key = sandboxKey(ref);
    await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
    if (stale !== undefined) await this.remove(stale);
    work.progress?.('snapshot', `taking the opening snapshot of ${ref.name}`);
    const takenAt = this.now().toISOString();
    const bundle = `${idOf(key)}.${randomBytes(4).toString('hex')}.tar.zst`;
    const packed = await this.sessions.captureWorkspace(ref, { sessionId: SNAPSHOT_SESSION_ID, destination: path.join(this.dir, bundle) }, work);
    await fsp.chmod(path.join(this.dir, bundle), 0o600);
    const record: SnapshotRecord = {
      key,
      sandbox: { ...(sandbox.uid !== undefined ? { uid: sandbox.uid } : {}), ...(sandbox.createdAt !== undefined ? { createdAt: sandbox.createdAt } : {}) },
      takenAt,
      bundle,
      digest: packed.artifact.archiveDigest,
    };
    // Linked into place, never renamed over: if another server took one meanwhile, its record stands and ours goes.
    const draft = path.join(this.dir, `.${bundle}.json`);
    await fsp.writeFile(draft, JSON.stringify(record, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    try {
      await fsp.link(draft, this.recordFile(key));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      await fsp.rm(path.join(this.dir, bundle), { force: true });
      const theirs = await readJsonRecord(this.recordFile(key), RecordSchema);
      if (theirs === undefined) throw err;
      return { record: theirs };
    } finally {
      await fsp.rm(draft, { force: true });
    }
    await this.touch(key);
    await this.prune();
    return { record, workspace: packed.workspace };
  }

  /** Marks a record as compared now: the least recently compared are pruned first. */
  private async touch(key: string): Promise<void> {
    const now = this.now();
    await fsp.utimes(this.recordFile(key), now, now).catch(() => undefined);
  }

  /** Keeps the `maxKept` snapshots compared most recently. */
  private async prune(): Promise<void> {
    const names = (await fsp.readdir(this.dir)).filter((n) => /^[0-9a-f]{64}\.json$/.test(n));
    if (names.length <= this.maxKept) return;
    const aged = await Promise.all(names.map(async (name) => ({ name, at: (await fsp.stat(path.join(this.dir, name)).catch(() => undefined))?.mtimeMs ?? 0 })));
    aged.sort((a, b) => a.at - b.at);
    for (const { name } of aged.slice(0, aged.length - this.maxKept)) {
      const record = await readJsonRecord(path.join(this.dir, name), RecordSchema).catch(() => undefined);
      if (record !== undefined) await this.remove(record);
      else await fsp.rm(path.join(this.dir, name), { force: true });
    }
  }

  private async remove(record: SnapshotRecord): Promise<void> {
    await fsp.rm(this.recordFile(record.key), { force: true });
    await fsp.rm(path.join(this.dir, record.bundle), { force: true });
  }

  private recordFile(key: string): string {
    return path.join(this.dir, `${idOf(key)}.json`);
  }
}

/** A file name for a sandbox key (keys hold characters no file name should). */
function idOf(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Whether a record is of this sandbox, not of an earlier one with the same name. */
function sameSandbox(recorded: SnapshotRecord['sandbox'], sandbox: SandboxSummary): boolean {
  return recorded.uid === sandbox.uid && recorded.createdAt === sandbox.createdAt;
}
