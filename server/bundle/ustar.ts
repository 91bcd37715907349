// The exact USTAR header subset of Session Bundle v1 (spec §2): one canonical 512-byte spelling per entry.
// The decoder accepts only bytes the encoder would produce, so two archives with the same entries are
// byte-identical and no tar quirk (pax, GNU long names, links, odd padding) can slip through.
import { SessionBundleError } from './errors';
import { validateArchivePath } from './pathLanguage';

export const BLOCK = 512;
export const MAX_USTAR_SIZE = 0o77777777777;
const NAME_LEN = 100;
const PREFIX_LEN = 155;

export type UstarEntry =
  | { kind: 'file'; path: string; mode: 0o644 | 0o755; size: number }
  | { kind: 'directory'; path: string; mode: 0o755; size: 0 };

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Split a path at the rightmost `/` whose name part is 1..100 bytes and prefix part ≤ 155 bytes. */
export function splitUstarPath(path: string): { name: Buffer; prefix: Buffer } {
  const bytes = Buffer.from(path, 'utf8');
  if (bytes.length <= NAME_LEN) return { name: bytes, prefix: Buffer.alloc(0) };
  const searchEnd = path.endsWith('/') ? bytes.length - 2 : bytes.length - 1;
  for (let i = searchEnd; i >= 0; i--) {
    if (bytes[i] !== 0x2f) continue;
    const nameLength = bytes.length - i - 1;
    if (nameLength > NAME_LEN) break;
    if (nameLength >= 1 && i <= PREFIX_LEN) return { name: bytes.subarray(i + 1), prefix: bytes.subarray(0, i) };
  }
  throw new SessionBundleError('unsafe_path', 'unsafe archive path: longer than USTAR can represent (255 bytes)');
}

function octal(value: number, digits: number): string {
  return value.toString(8).padStart(digits, '0') + '\0';
}

function assertEntryShape(entry: UstarEntry): void {
  if (entry.kind === 'directory') {
    if (!entry.path.endsWith('/') || entry.mode !== 0o755 || entry.size !== 0) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: directories are 0755, size 0, path ending in /');
    }
  } else {
    if (entry.path.endsWith('/') || (entry.mode !== 0o644 && entry.mode !== 0o755)) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: files are 0644 or 0755');
    }
    if (!Number.isSafeInteger(entry.size) || entry.size < 0 || entry.size > MAX_USTAR_SIZE) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: file size outside the USTAR range');
    }
  }
}

/** The fields every header has in common: uid, gid, mtime, magic and version, devmajor, devminor. */
const TEMPLATE = (() => {
  const block = Buffer.alloc(BLOCK);
  block.write(octal(0, 7), 108, 'latin1');
  block.write(octal(0, 7), 116, 'latin1');
  block.write(octal(0, 11), 136, 'latin1');
  block.write('ustar\x0000', 257, 'latin1');
  block.write(octal(0, 7), 329, 'latin1');
  block.write(octal(0, 7), 337, 'latin1');
  return block;
})();

/** Write the canonical 512-byte header of `entry` into `target` at `offset` (pack writes it straight into its batch). */
export function writeUstarHeader(entry: UstarEntry, target: Buffer, offset: number): void {
  validateArchivePath(entry.path);
  assertEntryShape(entry);
  const { name, prefix } = splitUstarPath(entry.path);
  const block = target.subarray(offset, offset + BLOCK);
  if (block.length !== BLOCK) throw new RangeError('no room for a 512-byte header');
  TEMPLATE.copy(block, 0);
  name.copy(block, 0);
  block.write(octal(entry.mode, 7), 100, 'latin1');
  block.write(octal(entry.size, 11), 124, 'latin1');
  block[156] = entry.kind === 'file' ? 0x30 : 0x35;
  prefix.copy(block, 345);
  block.write(octal(headerChecksum(block), 6) + ' ', 148, 'latin1');
}

export function encodeUstarHeader(entry: UstarEntry): Buffer {
  const block = Buffer.alloc(BLOCK);
  writeUstarHeader(entry, block, 0);
  return block;
}

/** Unsigned byte sum with the checksum field counted as spaces. */
export function headerChecksum(block: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (block[i] ?? 0);
  return sum;
}

function cString(block: Buffer, start: number, length: number): Buffer {
  const field = block.subarray(start, start + length);
  const nul = field.indexOf(0);
  if (nul === -1) return field;
  for (let i = nul; i < field.length; i++) {
    if (field[i] !== 0) throw new SessionBundleError('unsupported_entry', 'unsupported entry: bytes after NUL in a name field');
  }
  return field.subarray(0, nul);
}

function parseOctal(block: Buffer, start: number, length: number): number {
  const text = block.toString('latin1', start, start + length).replace(/[\0 ]+$/, '');
  if (!/^[0-7]{1,11}$/.test(text)) throw new SessionBundleError('unsupported_entry', 'unsupported entry: malformed octal field');
  return parseInt(text, 8);
}

export function isZeroBlock(block: Uint8Array): boolean {
  for (let i = 0; i < block.length; i++) if (block[i] !== 0) return false;
  return true;
}

/** Strict decode, in the spec's order of checks; the result re-encodes to exactly `block`. */
export function decodeUstarHeader(block: Buffer): UstarEntry {
  if (block.length !== BLOCK) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: header is not 512 bytes');
  const stored = block.toString('latin1', 148, 156);
  const match = /^([0-7]{6})\0 $/.exec(stored);
  if (match === null || parseInt(match[1] ?? '', 8) !== headerChecksum(block)) {
    // A non-canonical checksum spelling with the right value is caught by the byte comparison below.
    const loose = /^[\0 ]*([0-7]{1,8})[\0 ]*$/.exec(stored);
    if (loose === null || parseInt(loose[1] ?? '', 8) !== headerChecksum(block)) {
      throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: header checksum is wrong');
    }
  }
  const nameBytes = cString(block, 0, NAME_LEN);
  const prefixBytes = cString(block, 345, PREFIX_LEN);
  let name: string;
  let prefix: string;
  try {
    name = fatalUtf8.decode(nameBytes);
    prefix = fatalUtf8.decode(prefixBytes);
  } catch {
    throw new SessionBundleError('unsafe_path', 'unsafe archive path: header name is not valid UTF-8');
  }
  const path = prefix === '' ? name : `${prefix}/${name}`;
  if (path === '') throw new SessionBundleError('unsafe_path', 'unsafe archive path: empty path');
  const typeflag = block[156];
  if (typeflag !== 0x30 && typeflag !== 0x35) {
    throw new SessionBundleError('unsupported_entry', `unsupported entry: tar typeflag ${JSON.stringify(String.fromCharCode(typeflag ?? 0))} (only files and directories)`);
  }
  const mode = parseOctal(block, 100, 8);
  const size = parseOctal(block, 124, 12);
  const entry = { kind: typeflag === 0x30 ? 'file' : 'directory', path, mode, size } as UstarEntry;
  const canonical = encodeUstarHeader(entry);
  if (!canonical.equals(block)) throw new SessionBundleError('unsupported_entry', 'unsupported entry: non-canonical tar header');
  return entry;
}

export function paddingLength(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}
