// USTAR header subset (spec §2): golden header, rightmost split, boundaries, path language, strict decode.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { SessionBundleError } from '../../../server/bundle/errors';
import { decodeUstarHeader, encodeUstarHeader, splitUstarPath, type UstarEntry } from '../../../server/bundle/ustar';
import { header } from '../../fixtures/bundle/maliciousArchive';

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SessionBundleError, `expected SessionBundleError, got ${String(err)}`);
    return err.code;
  }
  assert.fail('expected a SessionBundleError');
}

describe('bundle/ustar', () => {
  it('encodes the golden header for workspace/run.sh 0755 size 18', () => {
    const block = encodeUstarHeader({ kind: 'file', path: 'workspace/run.sh', mode: 0o755, size: 18 });
    assert.equal(createHash('sha256').update(block).digest('hex'), '1d69bf3bf7dcb40b103d0d405c1d21ebc49a22c0ae3771b07dfd17eeeb4b6c4d');
    assert.equal(block.toString('latin1', 100, 108), '0000755\0');
    assert.equal(block.toString('latin1', 124, 136), '00000000022\0');
    assert.equal(block.subarray(257, 265).toString('hex'), '7573746172003030');
    assert.deepEqual(decodeUstarHeader(block), { kind: 'file', path: 'workspace/run.sh', mode: 0o755, size: 18 });
  });

  it('splits at the rightmost usable slash', () => {
    const path = `workspace/${'a'.repeat(90)}/${'b'.repeat(90)}`;
    const { name, prefix } = splitUstarPath(path);
    assert.equal(name.toString(), 'b'.repeat(90));
    assert.equal(prefix.toString(), `workspace/${'a'.repeat(90)}`);
    const dir = `workspace/${'a'.repeat(90)}/${'b'.repeat(20)}/`;
    assert.equal(splitUstarPath(dir).name.toString(), `${'b'.repeat(20)}/`);
    assert.equal(splitUstarPath(dir).prefix.toString(), `workspace/${'a'.repeat(90)}`);
    // The rightmost slash is skipped when its prefix would exceed 155 bytes.
    const deep = `${'p'.repeat(150)}/${'q'.repeat(10)}/${'n'.repeat(50)}`;
    assert.equal(splitUstarPath(deep).name.toString(), `${'q'.repeat(10)}/${'n'.repeat(50)}`);
  });

  it('round-trips the 256-byte maximum path with the largest size, and 100/155-byte fields', () => {
    const cases: UstarEntry[] = [
      { kind: 'file', path: `${'p'.repeat(155)}/${'n'.repeat(100)}`, mode: 0o644, size: 0o77777777777 },
      { kind: 'file', path: 'n'.repeat(100), mode: 0o644, size: 0 },
      { kind: 'directory', path: `${'d'.repeat(99)}/`, mode: 0o755, size: 0 },
      { kind: 'file', path: `state/${'😀'.repeat(30)}/${'é'.repeat(40)}`, mode: 0o755, size: 1 },
    ];
    for (const entry of cases) {
      const block = encodeUstarHeader(entry);
      assert.deepEqual(decodeUstarHeader(block), entry);
    }
  });

  it('rejects unrepresentable and non-portable paths with unsafe_path', () => {
    const bad = [
      `${'p'.repeat(156)}/n`,
      'a'.repeat(101),
      '/absolute',
      '../outside',
      'state/../x',
      'state//file',
      'C:/drive',
      'file:stream',
      'CON',
      'con.txt',
      'LPT9.log',
      'com¹',
      'trailing.',
      'trailing ',
      'question?',
      'state/./x',
      'a\\b',
      'state/\u0001ctl',
      'state/\ud800',
      '',
    ];
    for (const path of bad) assert.equal(code(() => encodeUstarHeader({ kind: 'file', path, mode: 0o644, size: 0 })), 'unsafe_path', path);
  });

  it('decodes only canonical headers', () => {
    const entry = { path: 'workspace/run.sh', kind: 'file' as const, mode: 0o755, size: 18 };
    const bends = [
      { mtime: '00000000001\0' },
      { uname: 'root' },
      { gname: 'root' },
      { mode: '0000644 ' },
      { size: '22\0' },
      { uid: '0001750\0' },
      { devmajor: '\0\0\0\0\0\0\0\0' },
      { magic: 'ustar  \0' },
      { linkname: 'x' },
    ];
    for (const bend of bends) assert.equal(code(() => decodeUstarHeader(header(entry, bend))), 'unsupported_entry', JSON.stringify(bend));
    // A non-rightmost split of a long path.
    const long = `workspace/${'a'.repeat(60)}/${'b'.repeat(30)}/${'c'.repeat(30)}`;
    assert.equal(code(() => decodeUstarHeader(header({ ...entry, path: long }, { name: `${'b'.repeat(30)}/${'c'.repeat(30)}`, prefix: `workspace/${'a'.repeat(60)}` }))), 'unsupported_entry');
    // Bytes after the first NUL of the name.
    const junk = Buffer.alloc(100);
    junk.write('workspace/run.sh\0x', 'latin1');
    assert.equal(code(() => decodeUstarHeader(header(entry, { name: junk }))), 'unsupported_entry');
    // Invalid UTF-8 in a name.
    assert.equal(code(() => decodeUstarHeader(header(entry, { name: Buffer.from([0x77, 0x2f, 0xff]) }))), 'unsafe_path');
    // Modes and kinds.
    assert.equal(code(() => decodeUstarHeader(header({ ...entry, mode: 0o600 }))), 'unsupported_entry');
    assert.equal(code(() => decodeUstarHeader(header({ path: 'state/d/', kind: 'directory', mode: 0o644, size: 0 }))), 'unsupported_entry');
    assert.equal(code(() => decodeUstarHeader(header({ path: 'state/d/', kind: 'directory', mode: 0o755, size: 1 }))), 'unsupported_entry');
    for (const typeflag of ['1', '2', '3', '4', '6', '7', 'x', 'g', 'L', 'K', '\0']) {
      assert.equal(code(() => decodeUstarHeader(header(entry, { typeflag }))), 'unsupported_entry', typeflag);
    }
  });

  it('rejects a tampered checksum with integrity_mismatch', () => {
    const block = encodeUstarHeader({ kind: 'file', path: 'workspace/run.sh', mode: 0o755, size: 18 });
    const offByOne = Buffer.from(block);
    offByOne.write('012341\0 ', 148, 'latin1');
    assert.equal(code(() => decodeUstarHeader(offByOne)), 'integrity_mismatch');
    const flipped = Buffer.from(block);
    flipped[0] = 0x57; // 'W'
    assert.equal(code(() => decodeUstarHeader(flipped)), 'integrity_mismatch');
    assert.equal(code(() => decodeUstarHeader(block.subarray(0, 511))), 'integrity_mismatch');
  });
});
