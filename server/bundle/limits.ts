// Caller-supplied quotas (spec §6): no defaults inside the codec, all nine keys required, each a non-negative
// safe integer (0 is a valid fail-closed budget), compared inclusively. Bad limits are programmer errors
// (TypeError/RangeError); a breached limit is `quota_exceeded` with bounded details.
import { SESSION_BUNDLE_LIMIT_KEYS, type SessionBundleLimits, type SessionBundleOperation, type SessionBundleQuota } from '../../protocol/bundle';
import { SessionBundleError } from './errors';

export function assertSessionBundleLimits(limits: unknown): SessionBundleLimits {
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) throw new TypeError('limits must be an object with the nine Session Bundle quotas');
  const record = limits as Record<string, unknown>;
  const keys = Object.keys(record);
  for (const key of keys) {
    if (!(SESSION_BUNDLE_LIMIT_KEYS as readonly string[]).includes(key)) throw new TypeError(`unknown limit ${JSON.stringify(key)}`);
  }
  const out: Partial<Record<SessionBundleQuota, number>> = {};
  for (const key of SESSION_BUNDLE_LIMIT_KEYS) {
    if (!Object.hasOwn(record, key)) throw new TypeError(`missing limit ${key}`);
    const value = record[key];
    if (typeof value !== 'number') throw new TypeError(`limit ${key} must be a number`);
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`limit ${key} must be a non-negative safe integer`);
    out[key] = value;
  }
  return Object.freeze(out as SessionBundleLimits);
}

/** Throw `quota_exceeded` unless observed ≤ limit. */
export function checkQuota(
  limits: SessionBundleLimits,
  quota: SessionBundleQuota,
  observed: number,
  operation: SessionBundleOperation,
  extra: { entryIndex?: number; pathDepth?: number } = {},
): void {
  const limit = limits[quota];
  if (observed <= limit) return;
  throw new SessionBundleError('quota_exceeded', `quota exceeded: ${quota} is ${limit}, observed ${observed}`, {
    operation,
    quota,
    limit,
    observed: Math.min(observed, Number.MAX_SAFE_INTEGER),
    ...extra,
  });
}
