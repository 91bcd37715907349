// The local runtime's store of Runs: one record per Run (runs/<uid>/run.json is the authority,
// written atomically under the Run's lock), the resourceVersion counter, the events a watch
// follows (ADDED/MODIFIED/DELETED), loading the records after a restart and retiring a deleted
// Run's files. It knows nothing of phases: the lifecycle (runLifecycle.ts) decides, this stores.
import fs from 'node:fs/promises';
import path from 'node:path';
import { RunSchema, type Run, type TerminationMode } from '../../protocol/kruntimes/run';
import { runNotFound } from './apiStatusError';
import { readJsonRecord, writeJsonAtomic } from './atomicFile';
import type { ContainerLog } from './containerLog';
import type { LocalSession } from './localSession';
import { RunLock } from './runLock';
import { clone } from './runStatus';
import type { StateLayout } from './stateRoot';
import { byCodeUnits } from '../platform/codeUnitOrder';

export type RunEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export interface RunEvent {
  type: RunEventType;
  object: Run;
}

/** A stored Run and what the daemon keeps beside it while it lives. */
export interface RunEntry {
  run: Run;
  lock: RunLock;
  session?: LocalSession;
  /** The termination work in progress (drain/export or cancel), if any. */
  terminating?: Promise<void>;
  terminatingMode?: TerminationMode;
  /** When the Run started, in ms (status.startTime has only second precision). */
  startedMs?: number;
  /** When it reached a terminal phase, in ms (for ttlSecondsAfterFinished). */
  finishedMs?: number;
  deleting?: boolean;
  /** runtimed's log of the Run, opened on first use. */
  log?: ContainerLog;
  /** No more log lines will come: the Run is terminal and its session closed. */
  logEnded?: boolean;
}

export function uidOf(entry: RunEntry): string {
  return entry.run.metadata.uid as string;
}

export class RunRecords {
  private readonly entries = new Map<string, RunEntry>();
  private resourceVersion = 0;

  constructor(
    private readonly layout: StateLayout,
    private readonly emit: (event: RunEvent) => void,
    private readonly log: (line: string) => void,
  ) {}

  /** Reads every record (skipping unreadable ones) and finishes removals a crash interrupted. */
  async load(): Promise<RunEntry[]> {
    await fs.mkdir(this.layout.runsDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(this.layout.artifactStoreRoot, { recursive: true, mode: 0o700 });
    for (const uid of await fs.readdir(this.layout.runsDir)) {
      if (uid.startsWith('.deleted-')) {
        await fs.rm(path.join(this.layout.runsDir, uid), { recursive: true, force: true });
        continue;
      }
      let run: Run | undefined;
      try {
        run = await readJsonRecord(this.layout.runFile(uid), RunSchema);
      } catch (err) {
        this.log(`skipping run record ${uid}: ${(err as Error).message}`);
        continue;
      }
      if (!run) continue;
      const rv = Number(run.metadata.resourceVersion ?? '0');
      if (Number.isFinite(rv)) this.resourceVersion = Math.max(this.resourceVersion, rv);
      this.entries.set(uid, { run, lock: new RunLock() });
    }
    return [...this.entries.values()];
  }

  all(): IterableIterator<RunEntry> {
    return this.entries.values();
  }

  has(uid: string): boolean {
    return this.entries.has(uid);
  }

  byUid(uid: string): RunEntry | undefined {
    return this.entries.get(uid);
  }

  findByName(namespace: string, name: string): RunEntry | undefined {
    for (const e of this.entries.values()) {
      if (e.run.metadata.namespace === namespace && e.run.metadata.name === name) return e;
    }
    return undefined;
  }

  /** The Run's entry, or the API's 404. */
  mustFind(namespace: string, name: string): RunEntry {
    const e = this.findByName(namespace, name);
    if (!e) throw runNotFound(name);
    return e;
  }

  /** Copies of the Runs of `namespace` (all when undefined), by name. */
  list(namespace?: string): Run[] {
    return [...this.entries.values()]
      .map((e) => e.run)
      .filter((r) => namespace === undefined || r.metadata.namespace === namespace)
      .sort((a, b) => byCodeUnits(a.metadata.name ?? '', b.metadata.name ?? ''))
      .map(clone);
  }

  get listResourceVersion(): string {
    return String(this.resourceVersion);
  }

  /**
   * Writes `next` as the Run's record with the next resourceVersion, then makes it the Run that GET, list and
   * the access API see (when it is not already) and tells the watchers. Call under the Run's lock.
   */
  async persist(entry: RunEntry, type: RunEventType, next: Run, durable = true): Promise<void> {
    this.resourceVersion++;
    next.metadata.resourceVersion = String(this.resourceVersion);
    await writeJsonAtomic(this.layout.runFile(uidOf(entry)), next, 0o600, durable);
    entry.run = next;
    this.emit({ type, object: clone(next) });
  }

  /**
   * Changes the Run under its lock and stores it; no-op after the Run was deleted. A change that takes something
   * away (Finalizing, a cancelled or timed-out end) is seen `at-once`, so new calls are refused from the moment it
   * is decided — a crash before the write leaves the termination recorded in the spec, and recovery resumes it. A
   * change that grants something (Ready) is seen `once-stored` (persist), so no client uses a session that a
   * crash would take back. `durable` false: a step that a durable write of the same record supersedes moments later
   * (the phases on the way to Ready); a crash of the machine may lose it, and recovery then resumes from the step before.
   */
  update(entry: RunEntry, mutate: (run: Run) => void, seen: 'at-once' | 'once-stored' = 'at-once', durable = true): Promise<void> {
    return entry.lock.run(async () => {
      if (!this.entries.has(uidOf(entry))) return;
      const next = seen === 'at-once' ? entry.run : clone(entry.run);
      mutate(next);
      await this.persist(entry, 'MODIFIED', next, durable);
    });
  }

  /**
   * Stores a new Run (its directory, then its record) and returns its entry. It is listed at once — its name and
   * uid are taken from the moment admission checked them, so two creates of one name cannot both pass — and its
   * ADDED event follows its record; a Run whose record cannot be written is not kept.
   */
  async add(run: Run): Promise<RunEntry> {
    const uid = run.metadata.uid as string;
    const entry: RunEntry = { run, lock: new RunLock() };
    this.entries.set(uid, entry);
    try {
      await entry.lock.run(async () => {
        await fs.mkdir(this.layout.runDir(uid), { recursive: true, mode: 0o700 });
        await this.persist(entry, 'ADDED', run);
      });
    } catch (err) {
      this.entries.delete(uid);
      throw err;
    }
    return entry;
  }

  /**
   * Removes the Run's exported artifacts and files under its lock (`retired` runs just before the DELETED
   * event); false when it was removed meanwhile.
   */
  remove(entry: RunEntry, retired: () => void): Promise<boolean> {
    const uid = uidOf(entry);
    const namespace = entry.run.metadata.namespace ?? 'default';
    return entry.lock.run(async () => {
      if (!this.entries.has(uid)) return false; // deleted meanwhile (e.g. by ttlSecondsAfterFinished)
      // Artifacts first, the run record last: a crash in between leaves a Run that can be deleted again.
      await fs.rm(path.join(this.layout.artifactStoreRoot, 'namespaces', namespace, 'runs', uid), { recursive: true, force: true });
      // One atomic rename retires the whole Run; the removal after it may be interrupted safely.
      const trash = path.join(this.layout.runsDir, `.deleted-${uid}`);
      await fs.rename(this.layout.runDir(uid), trash).catch(() => undefined);
      await fs.rm(trash, { recursive: true, force: true });
      this.entries.delete(uid);
      retired();
      this.emit({ type: 'DELETED', object: clone(entry.run) });
      return true;
    });
  }
}
