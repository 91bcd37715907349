// Admission for one activation of a Session: wait (bounded queue, bounded time) for the Session's
// repository lease, or refuse with `session_busy`; then keep the lease and the activation record
// alive with a heartbeat until released. Losing either (another server took over after an expiry)
// aborts the activation — CAS stays the final authority, the lease only keeps writers apart.
import { setTimeout as delay } from 'node:timers/promises';
import type { ActivationStore } from '../repository/activationStore';
import { ActivationError } from './errors';

export interface LeasePolicy {
  /** How long a lease or claim lives without a heartbeat (default 30 s). */
  ttlMs: number;
  /** How long a second activation of a busy Session waits before `session_busy` (0: refuse at once). */
  queueTimeoutMs: number;
  /** How many activations of one Session may wait in this process (beyond: `session_busy` at once). */
  maxQueue: number;
}

export const DEFAULT_LEASE_POLICY: LeasePolicy = { ttlMs: 30_000, queueTimeoutMs: 120_000, maxQueue: 16 };

const POLL_MS = 100;

export class SessionAdmission {
  private readonly waiting = new Map<string, number>();

  constructor(
    private readonly store: ActivationStore,
    private readonly policy: LeasePolicy,
  ) {}

  /** Waits for the lease; `session_busy` when the queue is full or the wait is over. */
  async acquire(sessionId: string, activationId: string, token: string, signal?: AbortSignal, onWait?: (holder: string) => void): Promise<void> {
    const queued = this.waiting.get(sessionId) ?? 0;
    if (queued >= this.policy.maxQueue) {
      throw new ActivationError('session_busy', `session ${sessionId} already has ${queued} activations waiting; try again later`);
    }
    this.waiting.set(sessionId, queued + 1);
    try {
      const deadline = Date.now() + this.policy.queueTimeoutMs;
      let told = false;
      for (;;) {
        const attempt = await this.store.acquireLease({ sessionId, activationId, token, ttlMs: this.policy.ttlMs });
        if (attempt.acquired) return;
        if (!told) {
          onWait?.(attempt.holder.activationId);
          told = true;
        }
        if (Date.now() >= deadline) {
          throw new ActivationError(
            'session_busy',
            `session ${sessionId} is busy with activation ${attempt.holder.activationId} (one activation at a time per session); retry this activation later`,
          );
        }
        if (signal?.aborted) throw new ActivationError('activation_cancelled', `activation ${activationId} was cancelled while waiting for session ${sessionId}`);
        await delay(POLL_MS);
      }
    } finally {
      const n = (this.waiting.get(sessionId) ?? 1) - 1;
      if (n <= 0) this.waiting.delete(sessionId);
      else this.waiting.set(sessionId, n);
    }
  }
}

/**
 * Renews the activation claim (and, once held, the lease) every ttl/3. `lost` fires when a renewal
 * finds either gone; transient repository errors are retried until the ttl would run out.
 */
export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private holdsLease = false;
  private lastOk = Date.now();
  private stopped = false;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: ActivationStore,
    private readonly input: { sessionId: string; activationId: string; token: string; ttlMs: number },
    private readonly lost: (why: string) => void,
  ) {}

  start(): void {
    const every = Math.max(50, Math.floor(this.input.ttlMs / 3));
    this.timer = setInterval(() => {
      this.running = this.running.then(() => this.beat());
    }, every);
    this.timer.unref();
  }

  leaseHeld(): void {
    this.holdsLease = true;
  }

  /** The lease is being given back: no longer renewed, and its absence is no loss. */
  leaseReleased(): void {
    this.holdsLease = false;
  }

  private async beat(): Promise<void> {
    if (this.stopped) return;
    try {
      const r = await this.store.heartbeat({ ...this.input, lease: this.holdsLease });
      if (this.stopped) return;
      this.lastOk = Date.now();
      if (!r.activation) this.lost(`activation ${this.input.activationId} was taken over by another server`);
      else if (this.holdsLease && !r.lease) this.lost(`the lease of session ${this.input.sessionId} was taken over by another server`);
    } catch (err) {
      if (!this.stopped && Date.now() - this.lastOk > this.input.ttlMs) this.lost(`cannot renew the activation lease: ${(err as Error).message}`);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
