// Byte-exact JSON as Go's encoding/json writes it (what a kruntimes gateway sends), and
// JSON parsing that keeps int64 fields exact (JS numbers lose precision above 2^53).
// The local gateway uses the encoder so its responses match a cluster's byte for byte.

/** Go's json.Encoder output: HTML-safe escapes for <, >, &, U+2028, U+2029, and a trailing newline. */
export function encodeGoJson(value: unknown): string {
  return escapeGoHtml(JSON.stringify(value)) + '\n';
}

/** Escapes that Go applies inside JSON strings (SetEscapeHTML(true), the default). */
export function escapeGoHtml(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

interface ReviverContext {
  source?: string;
}

/**
 * Parses JSON, turning the named integer fields into bigint from their source text.
 * Needs JSON.parse source access (Node >= 21, V8 11.4); older runtimes get a bigint of the
 * (possibly rounded) double, which is the best they can do.
 */
export function parseJsonWithBigInts(text: string, bigintKeys: ReadonlySet<string>): unknown {
  return JSON.parse(text, function (this: unknown, key: string, value: unknown, context?: ReviverContext) {
    if (typeof value === 'number' && bigintKeys.has(key)) {
      const source = context?.source;
      if (source !== undefined && /^-?\d+$/.test(source)) return BigInt(source);
      if (Number.isInteger(value)) return BigInt(value);
    }
    return value;
  } as (key: string, value: unknown) => unknown);
}

/** JSON.stringify that writes bigint values as plain JSON integers (as Go writes int64). */
export function stringifyWithBigInts(value: unknown): string {
  const marker = '\u0000bigint:';
  const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? marker + v.toString() : v));
  return text.replace(/"\\u0000bigint:(-?\d+)"/g, '$1');
}
