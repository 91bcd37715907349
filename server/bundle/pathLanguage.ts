// The portable path language of Session Bundle v1 (spec §2): the only archive paths that mean the same thing
// on every host. Applied on pack, on every header read, and before anything is written during hydrate.
import { isWellFormedUnicode } from '../../protocol/bundle';
import { SessionBundleError } from './errors';

const WINDOWS_DEVICE = /^(con|prn|aux|nul|conin\$|conout\$|com[1-9¹²³]|lpt[1-9¹²³])(\..*)?$/i;
// eslint-disable-next-line no-control-regex
const FORBIDDEN_IN_SEGMENT = /[\u0000-\u001f<>:"|?*]/;

function unsafe(reason: string): SessionBundleError {
  return new SessionBundleError('unsafe_path', `unsafe archive path: ${reason}`);
}

/** Why a single segment is not portable, or undefined when it is. */
export function segmentProblem(segment: string): string | undefined {
  if (segment === '') return 'empty segment';
  if (segment === '.' || segment === '..') return 'dot segment';
  if (FORBIDDEN_IN_SEGMENT.test(segment)) return 'control or reserved character in a segment';
  if (segment.endsWith('.') || segment.endsWith(' ')) return 'segment ends with a dot or space';
  if (WINDOWS_DEVICE.test(segment)) return 'Windows device name';
  return undefined;
}

/**
 * Validate an archive path (directories end with `/`) and return its segments. Throws `unsafe_path`.
 * No Unicode normalization: NFC and NFD spellings are different paths.
 */
export function validateArchivePath(path: string): string[] {
  if (path === '') throw unsafe('empty path');
  if (!isWellFormedUnicode(path)) throw unsafe('not well-formed Unicode');
  if (path.includes('\0') || path.includes('\\')) throw unsafe('NUL or backslash');
  if (path.startsWith('/')) throw unsafe('absolute path');
  if (/^[A-Za-z]:/.test(path)) throw unsafe('drive-letter path');
  const body = path.endsWith('/') ? path.slice(0, -1) : path;
  const segments = body.split('/');
  for (const segment of segments) {
    const problem = segmentProblem(segment);
    if (problem !== undefined) throw unsafe(problem);
  }
  return segments;
}

export function utf8Length(path: string): number {
  return Buffer.byteLength(path, 'utf8');
}

/** Segment count without the trailing `/` (`workspace/a/b/c` = 4, `manifest.json` = 1). */
export function pathDepth(path: string): number {
  const body = path.endsWith('/') ? path.slice(0, -1) : path;
  return body === '' ? 0 : body.split('/').length;
}

/** Raw UTF-8 byte order, the only order of entries and records. */
export function compareArchivePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
