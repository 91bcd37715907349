// What the repository engine needs from a storage backend: record reads, and a write transaction
// in which reads see the latest committed state and every change becomes visible atomically (file:
// under the process-lifetime lock, one state-file rename; postgres: one SQL transaction).
import type { ImmutableObjectRef, StoredSessionCheckpoint } from '../../protocol/repository';
import type { ImmutableObjectStore } from './objectStore';
import type { ActivationRecord, CommitReceipt, ForkRecord, RevisionRecord, SessionLease, SessionRecord, Tombstone } from './records';

export interface RepositoryReader {
  getSession(sessionId: string): Promise<SessionRecord | undefined>;
  getTombstone(sessionId: string): Promise<Tombstone | undefined>;
  getRevision(sessionId: string, revision: number): Promise<RevisionRecord | undefined>;
  getReceipt(sessionId: string, commitId: string): Promise<CommitReceipt | undefined>;
  getFork(forkId: string): Promise<ForkRecord | undefined>;
  listSessions(): Promise<SessionRecord[]>;
  /** Oldest first. */
  listRevisions(sessionId: string): Promise<RevisionRecord[]>;
  /** The activation store (dedupe table) and the per-Session lease; in a write, the row is locked. */
  getActivation(sessionId: string, activationId: string): Promise<ActivationRecord | undefined>;
  getLease(sessionId: string): Promise<SessionLease | undefined>;
}

export interface RepositoryWriter extends RepositoryReader {
  insertSession(record: SessionRecord): Promise<void>;
  updateSession(record: SessionRecord): Promise<void>;
  insertRevision(record: RevisionRecord): Promise<void>;
  insertReceipt(record: CommitReceipt): Promise<void>;
  insertFork(record: ForkRecord): Promise<void>;
  updateFork(record: ForkRecord): Promise<void>;
  /** A new (sessionId, activationId); a concurrent insert of the same key fails and the transaction is re-run. */
  insertActivation(record: ActivationRecord): Promise<void>;
  updateActivation(record: ActivationRecord): Promise<void>;
  insertLease(record: SessionLease): Promise<void>;
  updateLease(record: SessionLease): Promise<void>;
  deleteLease(sessionId: string): Promise<void>;
  /** Removes the Session's finished (committed or aborted) activations but the newest `keep` (by updatedAt); returns how many. */
  dropFinishedActivations(sessionId: string, keep: number): Promise<number>;
  /** Removes revisions below `keepFrom` and their receipts; returns what was removed. */
  dropRevisionsBelow(sessionId: string, keepFrom: number): Promise<RevisionRecord[]>;
  /** Removes the Session, its revisions and receipts, and records a tombstone; returns the removed revisions. */
  deleteSession(sessionId: string, tombstone: Tombstone): Promise<RevisionRecord[]>;
  /** A cheap in-transaction check that objects verified earlier are still stored (GC may not race the commit). */
  requireObjectsPresent(refs: ImmutableObjectRef[]): Promise<void>;
  /** Admits the checkpoint and re-verifies both objects using this transaction's connection. */
  verifyCheckpoint(checkpoint: StoredSessionCheckpoint): Promise<void>;
}

export interface WriteOptions {
  /**
   * false: the change need not survive a crash of the machine by itself — it is atomic and visible at once, and is made
   * durable by the next durable write (or lost with the crash, which must be harmless: a lease or claim of a process that
   * the crash killed, a record that the durable write right after it supersedes). The file adapter then skips the
   * directory fsync after its rename (the new state file itself is still fsynced before the rename, so the state after
   * a crash is always one whole document, the old or the new). Default true.
   */
  durable?: boolean;
}

export interface RepositoryStorage {
  readonly kind: 'file' | 'postgres';
  readonly objects: ImmutableObjectStore;
  /**
   * True when a write transaction only locks the rows it touches (postgres), so a commit can
   * verify its objects inside it; false when it holds a repository-wide lock (file), so objects
   * are verified before it and only re-checked cheaply inside.
   */
  readonly verifiesInsideWrite: boolean;
  read<T>(fn: (reader: RepositoryReader) => Promise<T>): Promise<T>;
  /** Runs `fn` in a write transaction; it may be re-run after a transient conflict, so it must only touch `writer`. */
  write<T>(fn: (writer: RepositoryWriter) => Promise<T>, options?: WriteOptions): Promise<T>;
  /**
   * Deletes unreferenced objects among `candidates` ('all': every stored object) older than `graceMs`. A candidate too
   * young now is remembered (file: `gc-pending/`; postgres: `gc_pending`) and deleted by a later call once old enough.
   */
  collectGarbage(candidates: string[] | 'all', graceMs: number): Promise<number>;
  close(): Promise<void>;
}
