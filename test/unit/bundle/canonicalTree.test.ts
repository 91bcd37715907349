// Canonical tree digest (spec §3): the golden 335-byte record stream, ordering, and the fail-closed builder.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { CanonicalTreeBuilder, encodeCanonicalTree, type TreeEntry } from '../../../server/bundle/canonicalTree';
import { SessionBundleError } from '../../../server/bundle/errors';

const sha = (s: string): Buffer => createHash('sha256').update(s).digest();
const golden = (): TreeEntry[] => [
  { kind: 'directory', path: 'workspace/', mode: 0o755, size: 0 },
  { kind: 'file', path: 'workspace/run.sh', mode: 0o755, size: 18, digest: sha('#!/bin/sh\necho ok\n') },
  { kind: 'file', path: 'state-identity.json', mode: 0o644, size: 19, digest: sha('{"schemaVersion":1}') },
  { kind: 'directory', path: 'state/empty/', mode: 0o755, size: 0 },
  { kind: 'directory', path: 'state/', mode: 0o755, size: 0 },
];
const GOLDEN_HEX = [
  '4d414b415f53455353494f4e5f42554e444c455f5452454500', '00000001', '0000000000000005',
  '02', '00000013', '73746174652d6964656e746974792e6a736f6e', '01a4', '0000000000000013', '0e9561cfb83d50990a103b3896fe249a11fe27fa28985448187f93ec12116d72',
  '01', '00000006', '73746174652f', '01ed', '0000000000000000', '00'.repeat(32),
  '01', '0000000c', '73746174652f656d7074792f', '01ed', '0000000000000000', '00'.repeat(32),
  '01', '0000000a', '776f726b73706163652f', '01ed', '0000000000000000', '00'.repeat(32),
  '02', '00000010', '776f726b73706163652f72756e2e7368', '01ed', '0000000000000012', 'b4d644d4279594903f1a9911956432d9473041f2984fc6014c14d7402c7d126c',
].join('');

function build(entries: readonly TreeEntry[], declared = entries.length) {
  const b = new CanonicalTreeBuilder(declared);
  for (const e of entries) b.add(e);
  return b.finish();
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SessionBundleError, String(err));
    return err.code;
  }
  assert.fail('expected a SessionBundleError');
}

const sorted = (): TreeEntry[] => [...golden()].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));

describe('bundle/canonicalTree', () => {
  it('encodes the golden 335-byte record stream and digest', () => {
    const bytes = encodeCanonicalTree(golden());
    assert.equal(bytes.length, 335);
    assert.equal(bytes.toString('hex'), GOLDEN_HEX);
    assert.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, 'sha256:429f57cded2f9a22620adc7da0ad9d33eb1c690f8ded102042e7c6904c70d0df');
    assert.deepEqual(build(sorted()), {
      treeDigest: 'sha256:429f57cded2f9a22620adc7da0ad9d33eb1c690f8ded102042e7c6904c70d0df',
      payloadBytes: 37,
      entryCount: 5,
    });
  });

  it('orders by raw UTF-8 bytes without normalization (NFD before NFC)', () => {
    const nfd = { kind: 'file' as const, path: 'state/e\u0301.txt', mode: 0o644, size: 0, digest: sha('') };
    const nfc = { kind: 'file' as const, path: 'state/é.txt', mode: 0o644, size: 0, digest: sha('') };
    const entries = [...sorted().slice(0, 2), nfd, nfc, ...sorted().slice(2)];
    assert.ok(Buffer.compare(Buffer.from(nfd.path), Buffer.from(nfc.path)) < 0);
    const withBoth = build(entries.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path))));
    assert.equal(withBoth.entryCount, 7);
    assert.equal(code(() => build([...sorted().slice(0, 2), nfc, nfd, ...sorted().slice(2)])), 'unsafe_path');
  });

  it('makes empty directories and the exec bit significant', () => {
    const base = build(sorted()).treeDigest;
    assert.notEqual(build(sorted().filter((e) => e.path !== 'state/empty/')).treeDigest, base);
    assert.notEqual(build(sorted().map((e) => (e.path === 'workspace/run.sh' ? { ...e, mode: 0o644 } : e))).treeDigest, base);
  });

  it('rejects unsafe paths, layout violations and bad modes', () => {
    const file = (path: string, mode = 0o644): TreeEntry => ({ kind: 'file', path, mode, size: 0, digest: sha('') });
    const pre = sorted().slice(0, 3); // identity, state/, state/empty/
    const unsafe = ['/state/file', 'C:/x', 'state\\file', 'state/../x', 'state/./x', 'state//x', 'state/\ud800', 'other/file', 'state/nodir/file'];
    for (const path of unsafe) assert.equal(code(() => build([...pre, file(path)], 9)), 'unsafe_path', path);
    assert.equal(code(() => build([...pre, file('state/empty/a'), file('state/empty/a')], 9)), 'unsafe_path', 'duplicate');
    assert.equal(code(() => build([...pre, file('state/empty/b'), file('state/empty/a')], 9)), 'unsafe_path', 'out of order');
    assert.equal(code(() => build([...pre, file('state/x'), { kind: 'directory', path: 'state/x/', mode: 0o755, size: 0 }], 9)), 'unsafe_path', 'file/dir conflict');
    assert.equal(code(() => build([...pre, file('state/x', 0o600)], 9)), 'unsupported_entry', 'mode');
    assert.equal(code(() => build([{ ...file('state-identity.json'), mode: 0o755 }], 9)), 'unsupported_entry', 'identity mode');
    assert.equal(code(() => build([file('state')], 9)), 'unsupported_entry', 'state as a file');
    assert.equal(code(() => build([...pre, { kind: 'file', path: 'state/x', mode: 0o644, size: 0, digest: Buffer.alloc(3) }], 9)), 'integrity_mismatch', 'digest');
    assert.equal(code(() => build(sorted().filter((e) => e.path !== 'workspace/' && e.path !== 'workspace/run.sh'))), 'integrity_mismatch', 'missing root');
    assert.equal(code(() => build(sorted().slice(1))), 'integrity_mismatch', 'missing identity');
    assert.equal(code(() => build(sorted(), 6)), 'integrity_mismatch', 'fewer than declared');
    assert.equal(code(() => build(sorted(), 4)), 'integrity_mismatch', 'more than declared');
  });

  it('is fail-closed: after one failed add every later call fails with integrity_mismatch', () => {
    const b = new CanonicalTreeBuilder(5);
    const [identity, state, empty, workspace, run] = sorted() as [TreeEntry, TreeEntry, TreeEntry, TreeEntry, TreeEntry];
    b.add(identity);
    assert.equal(code(() => b.add({ ...empty })), 'unsafe_path'); // orphan: state/ not yet seen
    assert.equal(code(() => b.add(state)), 'integrity_mismatch');
    assert.equal(code(() => b.finish()), 'integrity_mismatch');
    const overflow = new CanonicalTreeBuilder(5);
    overflow.add(identity);
    overflow.add(state);
    assert.equal(code(() => overflow.add({ kind: 'file', path: 'state/big', mode: 0o644, size: Number.MAX_SAFE_INTEGER, digest: sha('') })), 'unsupported_entry');
    assert.equal(code(() => overflow.add(workspace)), 'integrity_mismatch');
    void run;
  });

  it('streams: begin checks layout before the digest is known', () => {
    const b = new CanonicalTreeBuilder(5);
    for (const e of sorted()) {
      b.begin(e);
      b.complete(e.digest);
    }
    assert.equal(b.finish().treeDigest, 'sha256:429f57cded2f9a22620adc7da0ad9d33eb1c690f8ded102042e7c6904c70d0df');
  });
});
