// RFC 8785 (JCS) encoding for the plain JSON values the repository writes as immutable objects
// (the checkpoint manifest): keys sorted by UTF-16 code unit, no whitespace, ECMAScript numbers.
import { byCodeUnits } from '../platform/codeUnitOrder';

export function encodeJcs(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('JCS cannot encode a non-finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => encodeJcs(v)).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => byCodeUnits(a, b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${encodeJcs(v)}`).join(',')}}`;
  }
  throw new TypeError(`JCS cannot encode a ${typeof value}`);
}
