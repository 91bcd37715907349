// manifest.json of Session Bundle v1 (spec §1.2): RFC 8785 (JCS) bytes on write; on read the bytes must be
// fatal UTF-8, parse, validate with exact key sets, and re-encode to the very same bytes — so every bundle
// has exactly one manifest spelling and nothing can hide in whitespace, duplicates or number forms.
import {
  SESSION_BUNDLE_CODEC_V1,
  SessionBundleManifestV1Schema,
  type SessionBundleManifestV1,
} from '../../protocol/bundle';
import { SessionBundleError } from './errors';

export const MANIFEST_PATH = 'manifest.json';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** RFC 8785 for the JSON we emit: keys sorted by UTF-16 code unit, ECMAScript number and string forms. */
export function encodeJcs(value: Json): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('JCS cannot encode a non-finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(encodeJcs).join(',')}]`;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${encodeJcs(value[k] as Json)}`).join(',')}}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Own enumerable data only: inherited properties never reach the manifest. */
function ownData(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(ownData);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) if (Object.hasOwn(value, key) && value[key] !== undefined) out[key] = ownData(value[key]);
  return out;
}

const TOP_KEYS = ['codec', 'envelope', 'payload', 'schemaVersion', 'stateIdentity'];
const CODEC_KEYS = Object.keys(SESSION_BUNDLE_CODEC_V1).sort();

function sameKeys(value: Record<string, unknown>, keys: readonly string[]): boolean {
  const own = Object.keys(value).sort();
  return own.length === keys.length && own.every((k, i) => k === keys[i]);
}

function invalid(reason: string): SessionBundleError {
  return new SessionBundleError('invalid_manifest', `invalid manifest: ${reason}`);
}

/** Validate a parsed manifest value, classifying schema and codec mismatches (spec §1.2, §7). */
export function validateManifest(input: unknown): SessionBundleManifestV1 {
  const value = ownData(input);
  if (!isPlainObject(value)) throw invalid('not a JSON object');
  const version = value.schemaVersion;
  if (typeof version !== 'number') throw invalid('schemaVersion is missing or not a number');
  if (Number.isSafeInteger(version) && version !== 1) {
    throw new SessionBundleError('unsupported_schema', `unsupported bundle schemaVersion ${version} (this codec reads 1)`);
  }
  if (!sameKeys(value, TOP_KEYS)) throw invalid('top-level keys differ from the V1 key set');
  const codec = value.codec;
  if (isPlainObject(codec) && sameKeys(codec, CODEC_KEYS)) {
    for (const [key, expected] of Object.entries(SESSION_BUNDLE_CODEC_V1)) {
      if (codec[key] !== expected) throw new SessionBundleError('unsupported_codec', `unsupported bundle codec (${key} is not ${JSON.stringify(expected)})`);
    }
  }
  const parsed = SessionBundleManifestV1Schema.safeParse(value);
  if (!parsed.success) {
    const where = parsed.error.issues[0]?.path.join('.') ?? '';
    throw invalid(`field ${where === '' ? '(root)' : where} is missing, extra or malformed`);
  }
  return parsed.data;
}

/** The canonical bytes of a manifest. */
export function encodeManifest(manifest: SessionBundleManifestV1): Buffer {
  const value = validateManifest(manifest);
  return Buffer.from(encodeJcs(value as unknown as Json), 'utf8');
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Decode and byte-compare. Parser text is never exposed. */
export function decodeManifest(bytes: Uint8Array): SessionBundleManifestV1 {
  let text: string;
  try {
    text = fatalUtf8.decode(bytes);
  } catch {
    throw invalid('not valid UTF-8');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid('not valid JSON');
  }
  const manifest = validateManifest(parsed);
  if (!encodeManifest(manifest).equals(bytes)) throw invalid('bytes are not the canonical JCS encoding');
  return manifest;
}
