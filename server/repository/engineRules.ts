// The engine's small rules and refusals, kept apart from its operations (engine.ts): how a record becomes the
// revision a caller sees, and the errors — with words a user can act on — for a missing session, a revision out of
// retention, a malformed ref and a contradiction in the stored state.
import { type CommittedSessionRevision, formatRevision, type SessionSummary, revisionNumber, type SessionRevisionRef, SessionRevisionRefSchema } from '../../protocol/repository';
import { SessionRepositoryError } from './errors';
import { encodeJcs } from './jcs';
import type { RevisionRecord, SessionRecord } from './records';
import type { RepositoryReader } from './storage';

export function committedOf(session: SessionRecord, revision: RevisionRecord): CommittedSessionRevision {
  return {
    ref: { sessionId: session.sessionId, revision: formatRevision(revision.revision) },
    agentId: session.agentId,
    checkpoint: revision.checkpoint,
    ...(revision.lastCommittedActivationId !== undefined ? { lastCommittedActivationId: revision.lastCommittedActivationId } : {}),
    ...(session.forkedFrom !== undefined ? { forkedFrom: session.forkedFrom } : {}),
  };
}

/** A session record as the listing shows it. */
export function sessionSummaryOf(s: SessionRecord): SessionSummary {
  return {
    sessionId: s.sessionId,
    agentId: s.agentId,
    head: { sessionId: s.sessionId, revision: formatRevision(s.head) },
    oldestRetained: formatRevision(s.oldestRetained),
    ...(s.forkedFrom !== undefined ? { forkedFrom: s.forkedFrom } : {}),
    ...(s.createdByForkId !== undefined ? { createdByForkId: s.createdByForkId } : {}),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

export async function requireSession(r: RepositoryReader, sessionId: string): Promise<SessionRecord> {
  const session = await r.getSession(sessionId);
  if (!session) throw await sessionNotFound(r, sessionId);
  return session;
}

export async function sessionNotFound(r: RepositoryReader, sessionId: string): Promise<SessionRepositoryError> {
  const tombstone = await r.getTombstone(sessionId);
  return new SessionRepositoryError(
    'session_not_found',
    tombstone ? `session ${sessionId} was deleted at ${tombstone.deletedAt}` : `session ${sessionId} does not exist (list sessions with \`sandbox-sessions session list\`)`,
  );
}

export function notRetained(code: 'revision_not_available' | 'source_revision_not_available', session: SessionRecord, n: number, keep: number): SessionRepositoryError {
  const why =
    n > session.head
      ? `the head is r${session.head}`
      : `only r${session.oldestRetained}…r${session.head} are retained (the last ${keep} revisions)`;
  return new SessionRepositoryError(code, `revision r${n} of session ${session.sessionId} is not available: ${why}`);
}

export function contradiction(message: string): SessionRepositoryError {
  return new SessionRepositoryError('integrity_mismatch', `repository state is inconsistent: ${message}`);
}

export function requireRef(name: string, value: unknown): SessionRevisionRef {
  const parsed = SessionRevisionRefSchema.safeParse(value);
  if (!parsed.success || revisionNumber(parsed.data.revision) === undefined) {
    throw new TypeError(`${name} must be {sessionId, revision} with a revision such as r1`);
  }
  return parsed.data;
}

export function refText(ref: SessionRevisionRef): string {
  return `${ref.sessionId}@${ref.revision}`;
}

export function sameJson(a: unknown, b: unknown): boolean {
  return encodeJcs(a ?? null) === encodeJcs(b ?? null);
}
