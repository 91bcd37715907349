// Input checks shared by every repository operation (spec §9.2 `requireIdentifier`): bad shapes
// are programmer errors and throw TypeError before anything is read or written.
import { isWellFormedUnicode, revisionNumber } from '../../protocol/repository';

export function requireIdentifier(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 512 || !isWellFormedUnicode(value)) {
    throw new TypeError(`${name} must be a non-empty, valid Unicode string of at most 512 UTF-16 code units`);
  }
  return value;
}

export function optionalIdentifier(name: string, value: unknown): string | undefined {
  return value === undefined ? undefined : requireIdentifier(name, value);
}

/** Parses `rN`; a malformed revision is a TypeError. */
export function requireRevision(name: string, value: unknown): number {
  const n = typeof value === 'string' ? revisionNumber(value) : undefined;
  if (n === undefined) throw new TypeError(`${name} must be a revision such as r1, r2, … (got ${JSON.stringify(value)})`);
  return n;
}
