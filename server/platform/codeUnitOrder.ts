// Ordering strings by their UTF-16 code units, as Kubernetes lists names (byte order of its keys for the ASCII names
// it allows), as ISO 8601 timestamps sort and as JCS orders keys. Not `localeCompare`: its order depends on the locale
// (it puts "a" before "B" before "b"), and its first call loads ICU's collation data — about 3 MB of a daemon's memory
// for sorting identifiers, whose lower-case ASCII it orders the same.
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
