// Retention beyond Maka's head-only V1: keep the last N revisions of every Session (default 20), so
// any retained revision can be checked out or forked; and the reference rule GC obeys — an object
// stays while any retained revision or any fork record (kept indefinitely) names it. And how many
// finished activations of a Session the dedupe table remembers, so it does not grow with every turn.
import type { StoredSessionCheckpoint } from '../../protocol/repository';
import type { ImmutableObjectStore } from './objectStore';
import type { ForkRecord, RevisionRecord } from './records';

export const DEFAULT_KEEP_REVISIONS = 20;
/** Unreferenced objects younger than this are left alone: a writer may have just published them. */
export const DEFAULT_GC_GRACE_MS = 15 * 60 * 1000;
/**
 * Finished (committed or aborted) activations remembered per Session, newest first: a retry of one of them returns its
 * outcome, and a retry of an older one runs as a new turn. A queue redelivers within minutes, long before 256 newer turns
 * of the same Session; without a bound, a session driven one activation per message (seed 000) grows the file
 * repository's state document — read, parsed and rewritten by every write — by a record per turn.
 */
export const DEFAULT_FINISHED_ACTIVATIONS_KEPT = 256;

export interface RetentionPolicy {
  keepRevisions: number;
  gcGraceMs: number;
  finishedActivationsKept: number;
}

export function retentionPolicy(input: { keepRevisions?: number; gcGraceMs?: number; finishedActivationsKept?: number } = {}): RetentionPolicy {
  const keepRevisions = input.keepRevisions ?? DEFAULT_KEEP_REVISIONS;
  const gcGraceMs = input.gcGraceMs ?? DEFAULT_GC_GRACE_MS;
  const finishedActivationsKept = input.finishedActivationsKept ?? DEFAULT_FINISHED_ACTIVATIONS_KEPT;
  if (!Number.isSafeInteger(keepRevisions) || keepRevisions < 1) throw new RangeError('keepRevisions must be an integer ≥ 1');
  if (!Number.isSafeInteger(gcGraceMs) || gcGraceMs < 0) throw new RangeError('gcGraceMs must be a non-negative integer (ms)');
  if (!Number.isSafeInteger(finishedActivationsKept) || finishedActivationsKept < 1) throw new RangeError('finishedActivationsKept must be an integer ≥ 1');
  return { keepRevisions, gcGraceMs, finishedActivationsKept };
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
