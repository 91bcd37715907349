// Holding a Run's lease over the era-D Session connection (spec §10.7): the heartbeat period, what a holder
// is told, and which refusals of the connection end a hold. Apart from SessionConnection so that the lease
// rules read on their own; the connection only sends the heartbeats and reconnects.
import type { GatewayError } from './gatewayErrors';

export interface LeaseHeartbeatOptions {
  /** Called once when the gateway refuses the connection for good (401/403 at once; 404/409 after `refusalGraceMs`). */
  onLost?: ((err: GatewayError) => void) | undefined;
  /** How long 404/409 refusals must persist before they count as final (default 3 s; informer lag). */
  refusalGraceMs?: number | undefined;
  log?: ((line: string) => void) | undefined;
}

export interface HeartbeatHold {
  /** Stops this holder's heartbeats; idempotent. */
  release(): void;
}

/** One caller holding the lease on a connection. */
export interface LeaseHolder {
  intervalMs: number;
  opts: LeaseHeartbeatOptions;
}

/** lease/3, clamped to 0.1–30 s (the SDKs' interval). */
export function heartbeatIntervalMs(leaseTimeoutSeconds: number): number {
  return Math.min(Math.max((leaseTimeoutSeconds * 1000) / 3, 100), 30_000);
}

/** Whether a refused upgrade may be the informer lagging behind a new Run (404/409), not a final answer. */
export function isLaggingRefusal(error: GatewayError): boolean {
  return error.status === 404 || error.status === 409;
}

/**
 * The holders that lose the lease on this refusal: all of them at once on 401/403; on 404/409 only those whose
 * grace has passed since the refusals began (`refusedSince`). Each lost holder is logged and told.
 */
export function dropLostHolders(holders: Set<LeaseHolder>, error: GatewayError, refusedSince: number | undefined, now: number): void {
  const final = error.status === 401 || error.status === 403;
  const lagging = isLaggingRefusal(error);
  for (const holder of [...holders]) {
    const grace = holder.opts.refusalGraceMs ?? 3_000;
    if (final || (lagging && now - (refusedSince ?? now) >= grace)) {
      holders.delete(holder);
      holder.opts.log?.(`lease lost: ${error.message} (HTTP ${error.status})`);
      holder.opts.onLost?.(error);
    }
  }
}
