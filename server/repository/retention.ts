// Retention beyond Maka's head-only V1: keep the last N revisions of every Session (default 20), so
// any retained revision can be checked out or forked; and the reference rule GC obeys — an object
// stays while any retained revision or any fork record (kept indefinitely) names it.
import type { StoredSessionCheckpoint } from '../../protocol/repository';
import type { ImmutableObjectStore } from './objectStore';
import type { ForkRecord, RevisionRecord } from './records';

export const DEFAULT_KEEP_REVISIONS = 20;
/** Unreferenced objects younger than this are left alone: a writer may have just published them. */
export const DEFAULT_GC_GRACE_MS = 15 * 60 * 1000;

export interface RetentionPolicy {
  keepRevisions: number;
  gcGraceMs: number;
}

export function retentionPolicy(input: { keepRevisions?: number; gcGraceMs?: number } = {}): RetentionPolicy {
  const keepRevisions = input.keepRevisions ?? DEFAULT_KEEP_REVISIONS;
  const gcGraceMs = input.gcGraceMs ?? DEFAULT_GC_GRACE_MS;
  if (!Number.isSafeInteger(keepRevisions) || keepRevisions < 1) throw new RangeError('keepRevisions must be an integer ≥ 1');
  if (!Number.isSafeInteger(gcGraceMs) || gcGraceMs < 0) throw new RangeError('gcGraceMs must be a non-negative integer (ms)');
  return { keepRevisions, gcGraceMs };
}

/** The oldest revision to keep once `head` is the newest. */
export function oldestRetainedAfter(head: number, keepRevisions: number): number {
  return Math.max(1, head - keepRevisions + 1);
}

export function checkpointObjectIds(store: ImmutableObjectStore, checkpoint: StoredSessionCheckpoint): string[] {
  return [store.objectIdOf(checkpoint.manifest), store.objectIdOf(checkpoint.value.compatibilityBundle)];
}

/** Every object id a set of retained revisions and fork records keeps alive. */
export function referencedObjectIds(store: ImmutableObjectStore, revisions: Iterable<RevisionRecord>, forks: Iterable<ForkRecord>): Set<string> {
  const ids = new Set<string>();
  for (const r of revisions) for (const id of checkpointObjectIds(store, r.checkpoint)) ids.add(id);
  for (const f of forks) for (const id of checkpointObjectIds(store, f.sourceCheckpoint)) ids.add(id);
  return ids;
}
