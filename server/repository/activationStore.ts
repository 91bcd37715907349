// The control plane's activation store and per-Session lease, kept in the session repository so
// every server sharing a repository (file or postgres) sees the same ones: the dedupe table
// `(sessionId, activationId)` → state and terminal outcome (a committed id is not run again), and
// one expiring lease per Session (one activation at a time). A Session's finished records beyond the
// newest `finishedActivationsKept` are forgotten as another one finishes (retention.ts says why).
// Ownership is a random token plus the holder's process identity; an expired owner, or one whose
// process is provably dead, is taken over.
// Claims, leases and heartbeats are written without waiting for the disk (WriteOptions.durable false): they only
// matter while their owner's process lives, and a crash of the machine kills it — its claim is then taken over
// (or, lost, made anew) and its lease broken either way. What outlives a process (the sandbox an attempt created,
// its commit, its outcome) is written durably, and that write makes every earlier one durable too.
import { randomBytes } from 'node:crypto';
import { requireIdentifier } from './identifiers';
import type { CommittedSessionRevision } from '../../protocol/repository';
import type { ActivationCommitMark } from './contract';
import { SessionRepositoryError, toRepositoryError } from './errors';
import { currentProcessIdentity, ownerLiveness } from '../platform/processIdentity';
import { type ActivationRecord, forgettableActivation, type LeaseOwner, type SessionLease } from './records';
import { DEFAULT_FINISHED_ACTIVATIONS_KEPT } from './retention';
import type { RepositoryStorage, RepositoryWriter, WriteOptions } from './storage';

const NOT_DURABLE: WriteOptions = { durable: false };

export type ActivationClaim =
  /**
   * Ours now: a new record, or a stale/aborted one taken over (`previous`, attempt + 1); `lease` when the claim asked
   * for the Session's lease too and it was free (taken in the same write), else the caller waits for it.
   */
  | { kind: 'claimed'; record: ActivationRecord; previous?: ActivationRecord; lease?: SessionLease }
  /** Already committed: return its outcome, run nothing. */
  | { kind: 'committed'; record: ActivationRecord }
  /** A live owner is running it right now. */
  | { kind: 'in_progress'; record: ActivationRecord }
  /** The id was used with a different stimulus. */
  | { kind: 'conflict'; record: ActivationRecord };

export type LeaseAttempt = { acquired: true; lease: SessionLease } | { acquired: false; holder: SessionLease };

export interface OwnerInput {
  /** The holder's random token (`newOwnerToken()`). */
  token: string;
  ttlMs: number;
}

export function newOwnerToken(): string {
  return randomBytes(18).toString('base64url');
}

/** An owner past its expiry, or whose process is provably dead (same host, pid gone or reused). */
export function ownerExpired(owner: LeaseOwner | undefined, now: Date): boolean {
  if (owner === undefined) return true;
  if (Date.parse(owner.expiresAt) <= now.getTime()) return true;
  return ownerLiveness(owner.process) === 'dead';
}

export class ActivationStore {
  constructor(
    private readonly storage: RepositoryStorage,
    private readonly clock: () => Date = () => new Date(),
    private readonly finishedKept: number = DEFAULT_FINISHED_ACTIVATIONS_KEPT,
  ) {}

  private owner(input: OwnerInput, now: Date): LeaseOwner {
    if (!Number.isSafeInteger(input.ttlMs) || input.ttlMs < 1) throw new RangeError('ttlMs must be a positive integer (ms)');
    return { token: input.token, process: currentProcessIdentity(), expiresAt: new Date(now.getTime() + input.ttlMs).toISOString() };
  }

  /**
   * Persists and claims an activation id. New → `claimed` (attempt 1); committed → `committed`;
   * running/committing under a live owner → `in_progress`; aborted or under an expired owner →
   * `claimed` with `previous` (the caller finishes a pending commit or runs it again). With `lease`, a claim also takes
   * the Session's lease when it is free, in the same write (one write fewer on every turn of a session nobody else uses).
   */
  claim(input: { sessionId: string; activationId: string; requestDigest: string; lease?: boolean } & OwnerInput): Promise<ActivationClaim> {
    return this.guard('activation claim', () => {
      const sessionId = requireIdentifier('sessionId', input.sessionId);
      const activationId = requireIdentifier('activationId', input.activationId);
      return this.storage.write(async (w) => {
        const now = this.clock();
        const existing = await w.getActivation(sessionId, activationId);
        if (existing) {
          if (existing.requestDigest !== input.requestDigest) return { kind: 'conflict', record: existing };
          if (existing.state === 'committed') return { kind: 'committed', record: existing };
          if (existing.state !== 'aborted' && !ownerExpired(existing.owner, now)) return { kind: 'in_progress', record: existing };
          const record: ActivationRecord = {
            ...existing,
            state: existing.state === 'committing' ? 'committing' : 'running',
            attempt: existing.attempt + 1,
            owner: this.owner(input, now),
            updatedAt: now.toISOString(),
          };
          delete record.error;
          await w.updateActivation(record);
          const lease = input.lease === true ? await this.takeLease(w, sessionId, activationId, input, now) : undefined;
          return { kind: 'claimed', record, previous: existing, ...(lease?.acquired === true ? { lease: lease.lease } : {}) };
        }
        const record: ActivationRecord = {
          sessionId,
          activationId,
          requestDigest: input.requestDigest,
          state: 'running',
          attempt: 1,
          owner: this.owner(input, now),
          createdAt: now.toISOString(),
          updatedAt: now.toISOString(),
        };
        await w.insertActivation(record);
        const lease = input.lease === true ? await this.takeLease(w, sessionId, activationId, input, now) : undefined;
        return { kind: 'claimed', record, ...(lease?.acquired === true ? { lease: lease.lease } : {}) };
      }, NOT_DURABLE);
    });
  }

  get(sessionId: string, activationId: string): Promise<ActivationRecord | undefined> {
    return this.guard('activation read', () => this.storage.read((r) => r.getActivation(sessionId, activationId)));
  }

  /**
   * Changes a record we own (token matches). Returns undefined when we no longer own it (another
   * server took it over after our ownership expired) — the caller must stop and report nothing.
   * `durable` false only for a change that a durable write supersedes right after it (WriteOptions).
   */
  update(
    sessionId: string,
    activationId: string,
    token: string,
    change: (record: ActivationRecord) => ActivationRecord,
    options: WriteOptions = {},
  ): Promise<ActivationRecord | undefined> {
    return this.guard('activation update', () =>
      this.storage.write(async (w) => {
        const existing = await w.getActivation(sessionId, activationId);
        if (!existing || existing.owner?.token !== token || existing.state === 'committed') return undefined;
        const next = { ...change(existing), updatedAt: this.clock().toISOString() };
        await w.updateActivation(next);
        if (forgettableActivation(next)) await w.dropFinishedActivations(sessionId, this.finishedKept);
        return next;
      }, options),
    );
  }

  /**
   * In the write of the commit that finishes an activation (engine.ts, `ActivationCommitMark`): the record marked
   * committed at `committed` with its outcome, older finished records forgotten, the Session's lease given back — so a
   * revision and its activation's outcome are stored together or not at all. Refused with `idempotency_conflict` (the
   * whole write with it) when the record is no longer this attempt's.
   */
  async commitIn(w: RepositoryWriter, sessionId: string, mark: ActivationCommitMark, committed: CommittedSessionRevision): Promise<void> {
    const existing = await w.getActivation(sessionId, mark.activationId);
    if (!existing || existing.owner?.token !== mark.token || existing.state === 'committed') {
      throw new SessionRepositoryError(
        'idempotency_conflict',
        `activation ${mark.activationId} of session ${sessionId} is no longer this attempt's: another server took it over; nothing was committed`,
      );
    }
    const next: ActivationRecord = { ...existing, state: 'committed', revision: committed.ref.revision, outcome: mark.outcome, updatedAt: this.clock().toISOString() };
    delete next.owner;
    delete next.pending;
    delete next.sandbox;
    delete next.error;
    await w.updateActivation(next);
    await w.dropFinishedActivations(sessionId, this.finishedKept);
    await this.giveLeaseBack(w, sessionId, mark.token);
  }

  /** Takes the Session's lease when it is free, expired or held by a dead process. */
  acquireLease(input: { sessionId: string; activationId: string } & OwnerInput): Promise<LeaseAttempt> {
    return this.guard('activation lease', () => {
      const sessionId = requireIdentifier('sessionId', input.sessionId);
      return this.storage.write((w) => this.takeLease(w, sessionId, input.activationId, input, this.clock()), NOT_DURABLE);
    });
  }

  /** In a write: the lease, when it is free, expired, held by a dead process or already ours. */
  private async takeLease(w: RepositoryWriter, sessionId: string, activationId: string, input: OwnerInput, now: Date): Promise<LeaseAttempt> {
    const held = await w.getLease(sessionId);
    if (held && held.owner.token !== input.token && !ownerExpired(held.owner, now)) return { acquired: false, holder: held };
    const lease: SessionLease = { sessionId, activationId, owner: this.owner(input, now), acquiredAt: now.toISOString() };
    if (held) await w.updateLease(lease);
    else await w.insertLease(lease);
    return { acquired: true, lease };
  }

  /** In a write: removes the lease if it is still ours. */
  private async giveLeaseBack(w: RepositoryWriter, sessionId: string, token: string): Promise<void> {
    const held = await w.getLease(sessionId);
    if (held && held.owner.token === token) await w.deleteLease(sessionId);
  }

  /** Extends the lease and the activation's ownership in one transaction; reports which are still ours. */
  heartbeat(input: { sessionId: string; activationId: string; lease: boolean } & OwnerInput): Promise<{ activation: boolean; lease: boolean }> {
    return this.guard('activation heartbeat', () =>
      this.storage.write(async (w) => {
        const now = this.clock();
        const owner = this.owner(input, now);
        let lease = false;
        if (input.lease) {
          const held = await w.getLease(input.sessionId);
          if (held && held.owner.token === input.token) {
            await w.updateLease({ ...held, owner });
            lease = true;
          }
        }
        const record = await w.getActivation(input.sessionId, input.activationId);
        let activation = false;
        if (record && record.owner?.token === input.token && record.state !== 'committed' && record.state !== 'aborted') {
          await w.updateActivation({ ...record, owner, updatedAt: now.toISOString() });
          activation = true;
        }
        return { activation, lease };
      }, NOT_DURABLE),
    );
  }

  /** Gives the lease back (only if it is still ours). */
  releaseLease(input: { sessionId: string; token: string }): Promise<void> {
    return this.guard('activation lease release', () =>
      this.storage.write((w) => this.giveLeaseBack(w, input.sessionId, input.token), NOT_DURABLE),
    );
  }

  getLease(sessionId: string): Promise<SessionLease | undefined> {
    return this.guard('activation lease read', () => this.storage.read((r) => r.getLease(sessionId)));
  }

  private async guard<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toRepositoryError(err, `session repository ${doing}`);
    }
  }
}
