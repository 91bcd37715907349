// The file adapter's state document (`repository-v1.json`): its schema, versioned migrations, the
// consistency rules that make a corrupt or contradictory document fail closed (integrity_mismatch),
// and an in-memory view of it that the engine reads and writes inside one locked transaction.
import { z } from 'zod';
import { formatRevision, type ImmutableObjectRef, type StoredSessionCheckpoint } from '../../protocol/repository';
import { SessionRepositoryError } from './errors';
import { encodeJcs } from './jcs';
import {
  type ActivationRecord,
  ActivationRecordSchema,
  type CommitReceipt,
  CommitReceiptSchema,
  type ForkRecord,
  ForkRecordSchema,
  type RevisionRecord,
  RevisionRecordSchema,
  type SessionLease,
  SessionLeaseSchema,
  type SessionRecord,
  SessionRecordSchema,
  type Tombstone,
  TombstoneSchema,
  forgettableActivation,
  newestActivationFirst,
} from './records';
import type { RepositoryWriter } from './storage';
import { byCodeUnits } from '../platform/codeUnitOrder';

export const FILE_STATE_SCHEMA_VERSION = 2;

export const FileStateSchema = z.strictObject({
  schemaVersion: z.literal(FILE_STATE_SCHEMA_VERSION),
  sessions: z.array(SessionRecordSchema),
  revisions: z.array(RevisionRecordSchema),
  commits: z.array(CommitReceiptSchema),
  forks: z.array(ForkRecordSchema),
  tombstones: z.array(TombstoneSchema),
  /** Version 2: the activation store and the per-Session activation leases. */
  activations: z.array(ActivationRecordSchema),
  leases: z.array(SessionLeaseSchema),
});
export type FileState = z.infer<typeof FileStateSchema>;

/**
 * Upgrades older documents: entry i turns schemaVersion i+1 into i+2; a new version appends its
 * step here and bumps the constant.
 */
const MIGRATIONS: ReadonlyArray<(doc: Record<string, unknown>) => Record<string, unknown>> = [
  // 1 → 2: the activation store (dedupe table) and the per-Session leases, both empty.
  (doc) => ({ ...doc, schemaVersion: 2, activations: [], leases: [] }),
];

export function emptyFileState(): FileState {
  return { schemaVersion: FILE_STATE_SCHEMA_VERSION, sessions: [], revisions: [], commits: [], forks: [], tombstones: [], activations: [], leases: [] };
}

function corrupt(file: string, why: string): SessionRepositoryError {
  return new SessionRepositoryError(
    'integrity_mismatch',
    `repository state ${file} is corrupt or contradictory (${why}); refusing to use it — restore it from a backup or move it aside`,
  );
}

/** Parses, migrates and consistency-checks a state document's text. */
export function parseFileState(text: string, file: string): FileState {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw corrupt(file, 'not JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw corrupt(file, 'not a JSON object');
  let record = doc as Record<string, unknown>;
  const version = record.schemaVersion;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) throw corrupt(file, 'no valid schemaVersion');
  if (version > FILE_STATE_SCHEMA_VERSION) {
    throw new SessionRepositoryError(
      'io_failure',
      `repository state ${file} has schema version ${version}, newer than this sandbox-sessions supports (${FILE_STATE_SCHEMA_VERSION}); upgrade sandbox-sessions`,
    );
  }
  for (let v = version; v < FILE_STATE_SCHEMA_VERSION; v++) {
    const step = MIGRATIONS[v - 1];
    if (!step) throw corrupt(file, `no migration from schema version ${v}`);
    record = step(record);
  }
  const parsed = FileStateSchema.safeParse(record);
  if (!parsed.success) throw corrupt(file, parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).slice(0, 3).join('; '));
  checkConsistency(parsed.data, file);
  return parsed.data;
}

function same(a: unknown, b: unknown): boolean {
  return encodeJcs(a ?? null) === encodeJcs(b ?? null);
}

type Fail = (why: string) => SessionRepositoryError;

/** The cross-record rules; any violation is integrity_mismatch (fail closed). */
function checkConsistency(state: FileState, file: string): void {
  checkRules(state, (why) => corrupt(file, why));
}

/**
 * The same rules on a state this process is about to write (which it then keeps without reading it back): a change
 * that would break them is refused, and nothing is written.
 */
export function checkStateToWrite(state: FileState, file: string): void {
  checkRules(state, (why) => new SessionRepositoryError('integrity_mismatch', `refusing to write ${file}: the change would contradict it (${why}); nothing was written`));
}

function checkRules(state: FileState, fail: Fail): void {
  const sessions = checkSessions(state, fail);
  checkTombstones(state, fail, sessions);
  const revisions = checkRevisions(state, fail, sessions);
  checkReceipts(state, fail, sessions, revisions);
  const forks = checkForks(state, fail, sessions);
  checkActivationsAndLeases(state, fail);
  checkForkBindings(state, fail, forks);
}

/** Each session once, with a head, retention and created r1 that agree. */
function checkSessions(state: FileState, fail: Fail): Map<string, SessionRecord> {
  const sessions = new Map<string, SessionRecord>();
  for (const s of state.sessions) {
    if (sessions.has(s.sessionId)) throw fail(`session ${s.sessionId} appears twice`);
    sessions.set(s.sessionId, s);
    if (s.nextRevisionNumber !== s.head + 1) throw fail(`session ${s.sessionId}: nextRevisionNumber ${s.nextRevisionNumber} ≠ head r${s.head} + 1`);
    if (s.oldestRetained > s.head) throw fail(`session ${s.sessionId}: oldest retained r${s.oldestRetained} is after head r${s.head}`);
    if (s.created.ref.sessionId !== s.sessionId || s.created.ref.revision !== 'r1' || s.created.agentId !== s.agentId) {
      throw fail(`session ${s.sessionId}: created revision is not its own r1`);
    }
    if ((s.forkedFrom === undefined) !== (s.createdByForkId === undefined) || !same(s.created.forkedFrom, s.forkedFrom)) {
      throw fail(`session ${s.sessionId}: fork binding is inconsistent`);
    }
  }
  return sessions;
}

/** A deleted session is listed once, and is not live. */
function checkTombstones(state: FileState, fail: Fail, sessions: Map<string, SessionRecord>): void {
  const tombstones = new Set<string>();
  for (const t of state.tombstones) {
    if (tombstones.has(t.sessionId) || sessions.has(t.sessionId)) throw fail(`deleted session ${t.sessionId} is listed twice or still live`);
    tombstones.add(t.sessionId);
  }
}

/** Each session has exactly its retained revisions, r1 being its created revision. */
function checkRevisions(state: FileState, fail: Fail, sessions: Map<string, SessionRecord>): Map<string, RevisionRecord> {
  const revisions = new Map<string, RevisionRecord>();
  const counts = new Map<string, number>();
  for (const r of state.revisions) {
    const s = sessions.get(r.sessionId);
    if (!s) throw fail(`revision r${r.revision} belongs to unknown session ${r.sessionId}`);
    const key = `${r.sessionId}\u0000${r.revision}`;
    if (revisions.has(key)) throw fail(`revision ${r.sessionId}@r${r.revision} appears twice`);
    if (r.revision < s.oldestRetained || r.revision > s.head) throw fail(`revision ${r.sessionId}@r${r.revision} is outside r${s.oldestRetained}…r${s.head}`);
    if (r.revision === 1 && (!same(r.checkpoint, s.created.checkpoint) || !same(r.lastCommittedActivationId, s.created.lastCommittedActivationId))) {
      throw fail(`revision ${r.sessionId}@r1 differs from the session's created revision`);
    }
    revisions.set(key, r);
    counts.set(r.sessionId, (counts.get(r.sessionId) ?? 0) + 1);
  }
  for (const s of state.sessions) {
    if ((counts.get(s.sessionId) ?? 0) !== s.head - s.oldestRetained + 1) {
      throw fail(`session ${s.sessionId} does not have exactly revisions r${s.oldestRetained}…r${s.head}`);
    }
  }
  return revisions;
}

/** Each commit receipt once, matching the revision it produced. */
function checkReceipts(state: FileState, fail: Fail, sessions: Map<string, SessionRecord>, revisions: Map<string, RevisionRecord>): void {
  const receipts = new Set<string>();
  for (const c of state.commits) {
    const s = sessions.get(c.sessionId);
    if (!s) throw fail(`commit receipt ${c.commitId} belongs to unknown session ${c.sessionId}`);
    const key = `${c.sessionId}\u0000${c.commitId}`;
    if (receipts.has(key)) throw fail(`commit receipt ${c.commitId} appears twice`);
    receipts.add(key);
    const expected = Number(c.input.expectedRevision.slice(1));
    const n = expected + 1;
    const rev = revisions.get(`${c.sessionId}\u0000${n}`);
    if (
      c.result.ref.sessionId !== c.sessionId ||
      c.result.ref.revision !== formatRevision(n) ||
      c.result.agentId !== s.agentId ||
      !rev ||
      rev.commitId !== c.commitId ||
      !same(rev.checkpoint, c.result.checkpoint) ||
      !same(c.input.checkpoint, c.result.checkpoint)
    ) {
      throw fail(`commit receipt ${c.commitId} of session ${c.sessionId} contradicts its revision`);
    }
  }
}

/** Each fork once, never onto its source, and a completed one onto the session it created. */
function checkForks(state: FileState, fail: Fail, sessions: Map<string, SessionRecord>): Map<string, ForkRecord> {
  const forks = new Map<string, ForkRecord>();
  for (const f of state.forks) {
    if (forks.has(f.forkId)) throw fail(`fork ${f.forkId} appears twice`);
    forks.set(f.forkId, f);
    if (f.targetSessionId === f.source.sessionId) throw fail(`fork ${f.forkId} targets its own source`);
    if (f.state === 'completed') {
      if (f.target.sessionId !== f.targetSessionId || f.target.revision !== 'r1') throw fail(`fork ${f.forkId}: completed target is not ${f.targetSessionId}@r1`);
      const t = sessions.get(f.targetSessionId);
      if (t && t.createdByForkId !== f.forkId) throw fail(`fork ${f.forkId}: target ${f.targetSessionId} was not created by it`);
    }
  }
  return forks;
}

/** Each activation once (a committed one with its revision and outcome), and one lease per session. */
function checkActivationsAndLeases(state: FileState, fail: Fail): void {
  const activationKeys = new Set<string>();
  for (const a of state.activations) {
    const key = activationKey(a.sessionId, a.activationId);
    if (activationKeys.has(key)) throw fail(`activation ${a.activationId} of session ${a.sessionId} appears twice`);
    activationKeys.add(key);
    if (a.state === 'committed' && (a.revision === undefined || a.outcome === undefined)) {
      throw fail(`activation ${a.activationId} is committed without a revision and outcome`);
    }
  }
  const leaseKeys = new Set<string>();
  for (const l of state.leases) {
    if (leaseKeys.has(l.sessionId)) throw fail(`session ${l.sessionId} has two activation leases`);
    leaseKeys.add(l.sessionId);
  }
}

/** A fork-created session is bound by the fork that names it. */
function checkForkBindings(state: FileState, fail: Fail, forks: Map<string, ForkRecord>): void {
  for (const s of state.sessions) {
    if (s.createdByForkId === undefined) continue;
    const f = forks.get(s.createdByForkId);
    if (!f || f.targetSessionId !== s.sessionId || !same(f.source, s.forkedFrom) || f.sourceAgentId !== s.agentId) {
      throw fail(`session ${s.sessionId} claims fork ${s.createdByForkId}, which does not bind it`);
    }
  }
}

/** The state as maps; the engine's reader and writer inside one transaction. */
export class FileStateView implements RepositoryWriter {
  private readonly sessions = new Map<string, SessionRecord>();
  private readonly revisions = new Map<string, Map<number, RevisionRecord>>();
  private readonly receipts = new Map<string, CommitReceipt>();
  private readonly forks = new Map<string, ForkRecord>();
  private readonly tombstones = new Map<string, Tombstone>();
  private readonly activations = new Map<string, ActivationRecord>();
  private readonly leases = new Map<string, SessionLease>();
  dirty = false;

  constructor(
    state: FileState,
    private readonly objectsPresent: (refs: ImmutableObjectRef[]) => Promise<void>,
    private readonly verify: (checkpoint: StoredSessionCheckpoint) => Promise<void>,
  ) {
    for (const s of state.sessions) this.sessions.set(s.sessionId, s);
    for (const r of state.revisions) this.revisionsOf(r.sessionId).set(r.revision, r);
    for (const c of state.commits) this.receipts.set(receiptKey(c.sessionId, c.commitId), c);
    for (const f of state.forks) this.forks.set(f.forkId, f);
    for (const t of state.tombstones) this.tombstones.set(t.sessionId, t);
    for (const a of state.activations) this.activations.set(activationKey(a.sessionId, a.activationId), a);
    for (const l of state.leases) this.leases.set(l.sessionId, l);
  }

  toState(): FileState {
    const byId = <T>(key: (v: T) => string) => (a: T, b: T) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
    return {
      schemaVersion: FILE_STATE_SCHEMA_VERSION,
      sessions: [...this.sessions.values()].sort(byId((s) => s.sessionId)),
      revisions: [...this.revisions.entries()]
        .sort(([a], [b]) => byCodeUnits(a, b))
        .flatMap(([, m]) => [...m.values()].sort((a, b) => a.revision - b.revision)),
      commits: [...this.receipts.values()].sort(byId((c) => receiptKey(c.sessionId, c.commitId))),
      forks: [...this.forks.values()].sort(byId((f) => f.forkId)),
      tombstones: [...this.tombstones.values()].sort(byId((t) => t.sessionId)),
      activations: [...this.activations.values()].sort(byId((a) => activationKey(a.sessionId, a.activationId))),
      leases: [...this.leases.values()].sort(byId((l) => l.sessionId)),
    };
  }

  /** Every retained revision and fork record (for GC). */
  allRevisions(): RevisionRecord[] {
    return [...this.revisions.values()].flatMap((m) => [...m.values()]);
  }

  allForks(): ForkRecord[] {
    return [...this.forks.values()];
  }

  private revisionsOf(sessionId: string): Map<number, RevisionRecord> {
    let m = this.revisions.get(sessionId);
    if (!m) {
      m = new Map();
      this.revisions.set(sessionId, m);
    }
    return m;
  }

  async getSession(sessionId: string) {
    return this.sessions.get(sessionId);
  }
  async getTombstone(sessionId: string) {
    return this.tombstones.get(sessionId);
  }
  async getRevision(sessionId: string, revision: number) {
    return this.revisions.get(sessionId)?.get(revision);
  }
  async getReceipt(sessionId: string, commitId: string) {
    return this.receipts.get(receiptKey(sessionId, commitId));
  }
  async getFork(forkId: string) {
    return this.forks.get(forkId);
  }
  async listSessions() {
    return [...this.sessions.values()];
  }
  async listRevisions(sessionId: string) {
    return [...(this.revisions.get(sessionId)?.values() ?? [])].sort((a, b) => a.revision - b.revision);
  }

  async getActivation(sessionId: string, activationId: string) {
    return this.activations.get(activationKey(sessionId, activationId));
  }
  async getLease(sessionId: string) {
    return this.leases.get(sessionId);
  }
  async insertActivation(record: ActivationRecord) {
    const key = activationKey(record.sessionId, record.activationId);
    if (this.activations.has(key)) throw new SessionRepositoryError('io_failure', `activation ${record.activationId} of session ${record.sessionId} already exists`);
    this.activations.set(key, record);
    this.dirty = true;
  }
  async updateActivation(record: ActivationRecord) {
    this.activations.set(activationKey(record.sessionId, record.activationId), record);
    this.dirty = true;
  }
  async insertLease(record: SessionLease) {
    if (this.leases.has(record.sessionId)) throw new SessionRepositoryError('io_failure', `session ${record.sessionId} already has an activation lease`);
    this.leases.set(record.sessionId, record);
    this.dirty = true;
  }
  async updateLease(record: SessionLease) {
    this.leases.set(record.sessionId, record);
    this.dirty = true;
  }
  async deleteLease(sessionId: string) {
    if (this.leases.delete(sessionId)) this.dirty = true;
  }
  async dropFinishedActivations(sessionId: string, keep: number) {
    const finished = [...this.activations.values()].filter((a) => a.sessionId === sessionId && forgettableActivation(a)).sort(newestActivationFirst);
    const dropped = finished.slice(keep);
    for (const a of dropped) this.activations.delete(activationKey(a.sessionId, a.activationId));
    if (dropped.length > 0) this.dirty = true;
    return dropped.length;
  }

  async insertSession(record: SessionRecord) {
    this.sessions.set(record.sessionId, record);
    this.dirty = true;
  }
  async updateSession(record: SessionRecord) {
    this.sessions.set(record.sessionId, record);
    this.dirty = true;
  }
  async insertRevision(record: RevisionRecord) {
    this.revisionsOf(record.sessionId).set(record.revision, record);
    this.dirty = true;
  }
  async insertReceipt(record: CommitReceipt) {
    this.receipts.set(receiptKey(record.sessionId, record.commitId), record);
    this.dirty = true;
  }
  async insertFork(record: ForkRecord) {
    this.forks.set(record.forkId, record);
    this.dirty = true;
  }
  async updateFork(record: ForkRecord) {
    this.forks.set(record.forkId, record);
    this.dirty = true;
  }
  async dropRevisionsBelow(sessionId: string, keepFrom: number) {
    const m = this.revisionsOf(sessionId);
    const dropped: RevisionRecord[] = [];
    for (const [n, rev] of m) {
      if (n >= keepFrom) continue;
      dropped.push(rev);
      m.delete(n);
      if (rev.commitId !== undefined) this.receipts.delete(receiptKey(sessionId, rev.commitId));
    }
    this.dirty = true;
    return dropped;
  }
  async deleteSession(sessionId: string, tombstone: Tombstone) {
    const dropped = [...(this.revisions.get(sessionId)?.values() ?? [])];
    this.revisions.delete(sessionId);
    this.sessions.delete(sessionId);
    for (const [key, c] of this.receipts) if (c.sessionId === sessionId) this.receipts.delete(key);
    this.tombstones.set(sessionId, tombstone);
    this.dirty = true;
    return dropped;
  }
  requireObjectsPresent(refs: ImmutableObjectRef[]): Promise<void> {
    return this.objectsPresent(refs);
  }
  verifyCheckpoint(checkpoint: StoredSessionCheckpoint): Promise<void> {
    return this.verify(checkpoint);
  }
}

function activationKey(sessionId: string, activationId: string): string {
  return `${sessionId}\u0000${activationId}`;
}

function receiptKey(sessionId: string, commitId: string): string {
  return `${sessionId}\u0000${commitId}`;
}
