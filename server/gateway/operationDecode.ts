// Decoding an `operations:execute` / `operations:stream` body the way the kruntimes gateway's
// Go decoder does: one JSON value only (`request must contain one JSON value`), unknown fields
// refused (`decode request: json: unknown field "x"`), []byte fields as padded standard
// base64 (`decode request: illegal base64 data at input byte N`), then zod for the shape.
import { GatewayMessages, SessionOperationSchema, isPaddedBase64, type SessionOperation } from '../../protocol/kruntimes/gateway';
import { SessionError, invalidArgument } from '../local/sessionError';

/** Index just past the first JSON value in `text` (after leading whitespace), or -1. */
function endOfFirstValue(text: string): number {
  let i = 0;
  while (i < text.length && /\s/.test(text[i] as string)) i++;
  if (i >= text.length) return -1;
  const first = text[i];
  if (first === '{' || first === '[') {
    let depth = 0;
    let inString = false;
    for (; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return -1;
  }
  if (first === '"') {
    for (i++; i < text.length; i++) {
      if (text[i] === '\\') i++;
      else if (text[i] === '"') return i + 1;
    }
    return -1;
  }
  const m = /^[^\s,\]}]+/.exec(text.slice(i));
  return m ? i + m[0].length : -1;
}

const FIELDS: Record<string, readonly string[]> = {
  '': ['command', 'writeFile', 'createDirectory', 'deleteFile', 'renameFile'],
  command: ['argv', 'shell', 'workingDirectory', 'env', 'stdin', 'timeoutMillis', 'isolateNetwork'],
  writeFile: ['path', 'contents', 'createParents'],
  createDirectory: ['path'],
  deleteFile: ['path', 'recursive'],
  renameFile: ['sourcePath', 'destinationPath', 'overwrite'],
};
const BYTES_FIELDS: Record<string, string> = { command: 'stdin', writeFile: 'contents' };

/** Go's base64 decoder error position for a non-padded-standard string, or -1 when valid. */
export function illegalBase64At(s: string): number {
  if (isPaddedBase64(s)) return -1;
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c === '=') {
      // Padding is legal only in the last group of four.
      const groupStart = i - (i % 4);
      if (groupStart + 4 !== s.length || i < groupStart + 2) return i;
      if (i === groupStart + 2 && s[i + 1] !== '=') return i;
      continue;
    }
    if (!/[A-Za-z0-9+/]/.test(c)) return i;
  }
  if (s.length % 4 !== 0) return s.length - (s.length % 4);
  return -1;
}

export function decodeOperation(body: Buffer): SessionOperation {
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text); // the common case: exactly one value
  } catch {
    // Find out why, as Go's decoder would: nothing, a cut-off value, or data after one value.
    const end = endOfFirstValue(text);
    if (end < 0) {
      if (text.trim() === '') throw invalidArgument('decode request: EOF');
      throw invalidArgument('decode request: unexpected EOF');
    }
    try {
      value = JSON.parse(text.slice(0, end));
    } catch (err) {
      throw invalidArgument(`decode request: ${(err as Error).message}`);
    }
    checkFields(value); // Go reports a bad first value before looking past it
    throw invalidArgument(GatewayMessages.oneJsonValue);
  }
  const top = checkFields(value);
  const parsed = SessionOperationSchema.safeParse(top);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new SessionError('InvalidArgument', `decode request: json: cannot unmarshal into Go struct field ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

/** Unknown fields, nulls (Go treats them as absent) and base64 fields, in Go's decode order. */
function checkFields(value: unknown): Record<string, unknown> {
  if (value === null) throw invalidArgument(GatewayMessages.exactlyOneOperation);
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidArgument(`decode request: json: cannot unmarshal ${Array.isArray(value) ? 'array' : typeof value} into Go value of type gateway.sessionOperationRequest`);
  }
  const top = value as Record<string, unknown>;
  for (const key of Object.keys(top)) {
    if (!FIELDS['']?.includes(key)) throw invalidArgument(GatewayMessages.unknownField(key));
    const inner = top[key];
    if (inner === null) {
      delete top[key];
      continue;
    }
    if (typeof inner !== 'object' || Array.isArray(inner)) {
      throw invalidArgument(`decode request: json: cannot unmarshal ${Array.isArray(inner) ? 'array' : typeof inner} into Go struct field sessionOperationRequest.${key}`);
    }
    const obj = inner as Record<string, unknown>;
    for (const k of Object.keys(obj)) {
      if (!FIELDS[key]?.includes(k)) throw invalidArgument(GatewayMessages.unknownField(k));
      if (obj[k] === null) delete obj[k];
    }
    const bytesField = BYTES_FIELDS[key];
    if (bytesField && typeof obj[bytesField] === 'string') {
      const at = illegalBase64At(obj[bytesField] as string);
      if (at >= 0) throw invalidArgument(`decode request: illegal base64 data at input byte ${at}`);
    }
  }
  return top;
}
