// The adversarial suite (spec §12 "Adversarial tests"): archives bent by the generator in
// test/fixtures/bundle/maliciousArchive.ts, each refused by inspect and by hydrate with the right code,
// and hydrate leaving nothing at all in the destination's parent. It runs twice: with the compressed side read in
// this thread (how small bundles are read) and on the reading worker with hydrate's file-writer threads (how big
// bundles are read), so both paths refuse exactly the same archives.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS, type SessionBundleErrorCode } from '../../../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle } from '../../../server/bundle';
import { tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing, rejectsWith } from '../../fixtures/bundle/harness';
import { NO_THREADS, THREADS_EVERYWHERE, withTuning } from './threadTuning';
import {
  bombArchive,
  canonicalFrame,
  EMPTY_FRAME,
  entryBytes,
  frameWithContentSize,
  goldenEntries,
  header,
  jcs,
  joinTar,
  manifestEntryBytes,
  manifestObject,
  skippableFrame,
  tarParts,
  type FixtureEntry,
  type TarParts,
} from '../../fixtures/bundle/maliciousArchive';

const E = goldenEntries;
const golden = (): TarParts => tarParts(E());
const withEntries = (entries: FixtureEntry[], manifestFrom: FixtureEntry[] = entries): Buffer => joinTar(tarParts(entries, jcs(manifestObject(manifestFrom))));
const bendEntry = (index: number, bend: (e: FixtureEntry) => Buffer): Buffer => {
  const parts = golden();
  parts.entries[index] = bend(E()[index] as FixtureEntry);
  return joinTar(parts);
};
const manifestWith = (f: (m: ReturnType<typeof manifestObject>) => void): Buffer => {
  const m = manifestObject(E());
  f(m);
  const parts = golden();
  parts.manifest = manifestEntryBytes(jcs(m));
  return joinTar(parts);
};
const flip = (b: Buffer, i: number, mask: number): void => {
  b[i] = (b[i] ?? 0) ^ mask;
};
const file = (path: string, content = 'x', mode = 0o644): FixtureEntry => ({ path, kind: 'file', mode, content: Buffer.from(content) });
const dir = (path: string): FixtureEntry => ({ path, kind: 'directory', mode: 0o755 });
const insertSorted = (extra: FixtureEntry[]): FixtureEntry[] =>
  [...E(), ...extra].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));

/** [label, tar bytes, expected code] — each is wrapped in a canonical frame. */
function tarCases(): [string, Buffer, SessionBundleErrorCode][] {
  const cases: [string, Buffer, SessionBundleErrorCode][] = [];
  const renamed = (path: string) => bendEntry(3, (e) => entryBytes({ ...e, path }));
  cases.push(['traversal ../outside', renamed('../outside'), 'unsafe_path']);
  cases.push(['traversal state/../../x', renamed('state/../../x'), 'unsafe_path']);
  cases.push(['absolute path', renamed('/etc/passwd'), 'unsafe_path']);
  cases.push(['drive path', renamed('C:/Windows/x'), 'unsafe_path']);
  cases.push(['backslash path', renamed('state\\x'), 'unsafe_path']);
  cases.push(['NTFS stream', renamed('state/a:b'), 'unsafe_path']);
  cases.push(['device name', renamed('state/nul.txt'), 'unsafe_path']);
  cases.push(['outside the three roots', withEntries([dir('other/'), ...E()]), 'unsafe_path']);
  for (const [typeflag, what] of [['2', 'symlink'], ['1', 'hard link'], ['3', 'char device'], ['4', 'block device'], ['6', 'FIFO'], ['7', 'contiguous'], ['x', 'pax header'], ['g', 'pax global'], ['L', 'GNU long name'], ['K', 'GNU long link']]) {
    cases.push([`${what} entry`, bendEntry(3, (e) => entryBytes(e, { typeflag: typeflag as string, linkname: typeflag === '1' || typeflag === '2' ? '/etc/passwd' : '' })), 'unsupported_entry']);
  }
  cases.push(['duplicate workspace/run.sh', withEntries(insertSorted([file('workspace/run.sh', '#!/bin/sh\necho ok\n', 0o755)])), 'unsafe_path']);
  const swapped = E();
  [swapped[2], swapped[3]] = [swapped[3] as FixtureEntry, swapped[2] as FixtureEntry];
  cases.push(['out-of-order entries', withEntries(swapped), 'unsafe_path']);
  cases.push(['orphan entry (no explicit parent)', withEntries(insertSorted([file('workspace/nodir/x.txt')])), 'unsafe_path']);
  cases.push(['file/dir conflict', withEntries(insertSorted([file('state/empty')])), 'unsafe_path']);
  cases.push(['identity mode 0755', withEntries(E().map((e) => (e.path === 'state-identity.json' ? { ...e, mode: 0o755 } : e))), 'unsupported_entry']);
  cases.push(['state/ as a file', withEntries([file('state'), E()[0] as FixtureEntry, ...E().slice(4)]), 'unsupported_entry']);
  cases.push(['missing workspace root', withEntries(E().slice(0, 4)), 'integrity_mismatch']);
  cases.push(['missing identity', withEntries(E().slice(1)), 'integrity_mismatch']);
  const bent = (label: string, bend: Parameters<typeof header>[1], code: SessionBundleErrorCode = 'unsupported_entry') =>
    cases.push([`non-canonical header: ${label}`, bendEntry(5, (e) => entryBytes(e, bend)), code]);
  bent('mtime set', { mtime: '14000000000\0' });
  bent('uname set', { uname: 'root' });
  bent('mode spelled with a space', { mode: '000755 \0' });
  bent('size without zero padding', { size: '22\0' });
  bent('magic "ustar  "', { magic: 'ustar  \0' });
  bent('devmajor left NUL', { devmajor: '' });
  const junk = Buffer.alloc(100);
  junk.write('workspace/run.sh\0junk', 'latin1');
  bent('bytes after NUL in name', { name: junk });
  bent('invalid UTF-8 name', { name: Buffer.from('workspace/\xff', 'latin1') }, 'unsafe_path');
  const long = [dir(`workspace/${'a'.repeat(60)}/`), dir(`workspace/${'a'.repeat(60)}/${'b'.repeat(30)}/`), file(`workspace/${'a'.repeat(60)}/${'b'.repeat(30)}/${'c'.repeat(30)}`)];
  const longEntries = insertSorted(long);
  const longParts = tarParts(longEntries);
  const idx = longEntries.findIndex((e) => e.path.endsWith('c'.repeat(30)));
  longParts.entries[idx] = entryBytes(longEntries[idx] as FixtureEntry, { name: `${'b'.repeat(30)}/${'c'.repeat(30)}`, prefix: `workspace/${'a'.repeat(60)}` });
  cases.push(['non-canonical header: non-rightmost prefix split', joinTar(longParts), 'unsupported_entry']);
  const offByOne = golden();
  const h = offByOne.entries[5] as Buffer;
  h.write((parseInt(h.toString('latin1', 148, 154), 8) + 1).toString(8).padStart(6, '0'), 148, 'latin1');
  cases.push(['checksum off by one', joinTar(offByOne), 'integrity_mismatch']);
  const flipped = golden();
  flip(flipped.entries[3] as Buffer, 512, 0x01);
  cases.push(['flipped payload byte', joinTar(flipped), 'integrity_mismatch']);
  const flippedIdentity = golden();
  flip(flippedIdentity.entries[0] as Buffer, 520, 0x01);
  cases.push(['flipped identity byte', joinTar(flippedIdentity), 'integrity_mismatch']);
  const badPad = golden();
  (badPad.entries[3] as Buffer)[512 + 5] = 0x20;
  cases.push(['non-zero file padding', joinTar(badPad), 'integrity_mismatch']);
  const badManifestPad = golden();
  badManifestPad.manifest[badManifestPad.manifest.length - 1] = 0x0a;
  cases.push(['non-zero manifest padding', joinTar(badManifestPad), 'integrity_mismatch']);
  cases.push(['extra zero block', Buffer.concat([joinTar(golden()), Buffer.alloc(512)]), 'integrity_mismatch']);
  cases.push(['one trailing byte', Buffer.concat([joinTar(golden()), Buffer.from([0])]), 'integrity_mismatch']);
  cases.push(['trailing garbage block', Buffer.concat([joinTar(golden()), Buffer.alloc(512, 0x41)]), 'integrity_mismatch']);
  cases.push(['terminator of one zero block', joinTar({ ...golden(), terminator: Buffer.alloc(512) }), 'integrity_mismatch']);
  cases.push(['second terminator block not zero', joinTar({ ...golden(), terminator: Buffer.concat([Buffer.alloc(512), Buffer.alloc(512, 1)]) }), 'integrity_mismatch']);
  cases.push(['fewer entries than declared', withEntries(E().slice(0, 7), E()), 'integrity_mismatch']);
  cases.push(['more entries than declared', withEntries(insertSorted([file('workspace/zz.txt')]), E()), 'integrity_mismatch']);
  cases.push(['manifest lies: payloadBytes + 1', manifestWith((m) => ((m.payload as { payloadBytes: number }).payloadBytes += 1)), 'integrity_mismatch']);
  cases.push(['manifest lies: payloadBytes − 1', manifestWith((m) => ((m.payload as { payloadBytes: number }).payloadBytes -= 1)), 'integrity_mismatch']);
  cases.push(['manifest lies: tree digest zeroed', manifestWith((m) => ((m.payload as { treeDigest: string }).treeDigest = `sha256:${'0'.repeat(64)}`)), 'integrity_mismatch']);
  cases.push(['manifest lies: entryCount + 1', manifestWith((m) => ((m.payload as { entryCount: number }).entryCount += 1)), 'integrity_mismatch']);
  cases.push(['manifest bytes "["', joinTar({ ...golden(), manifest: manifestEntryBytes('[') }), 'invalid_manifest']);
  cases.push(['manifest with whitespace', joinTar({ ...golden(), manifest: manifestEntryBytes(JSON.stringify(manifestObject(E()), null, 1)) }), 'invalid_manifest']);
  cases.push(['manifest with extra key revision', manifestWith((m) => (m.revision = 3)), 'invalid_manifest']);
  cases.push(['manifest schemaVersion 2', manifestWith((m) => (m.schemaVersion = 2)), 'unsupported_schema']);
  cases.push(['manifest codec level 19', manifestWith((m) => ((m.codec as { compressionLevel: number }).compressionLevel = 19)), 'unsupported_codec']);
  cases.push(['no manifest (first block zero)', Buffer.alloc(2048), 'invalid_manifest']);
  cases.push(['first entry is not the manifest', Buffer.concat([...golden().entries, Buffer.alloc(1024)]), 'invalid_manifest']);
  const m = jcs(manifestObject(E()));
  cases.push(['manifest mode 0755', joinTar({ ...golden(), manifest: Buffer.concat([header({ path: 'manifest.json', kind: 'file', mode: 0o755, size: Buffer.byteLength(m) }), Buffer.from(m), Buffer.alloc((512 - (Buffer.byteLength(m) % 512)) % 512)]) }), 'invalid_manifest']);
  cases.push(['empty tar', Buffer.alloc(0), 'integrity_mismatch']);
  return cases;
}

for (const [variant, tuning] of [
  ['in this thread', NO_THREADS],
  ['on worker threads', THREADS_EVERYWHERE],
] as const) describe(`bundle/adversarial archives (read ${variant})`, () => {
  withTuning(tuning);
  let tmp: { path: string; cleanup: () => void };
  let src: string;
  let parent: string;
  beforeEach(() => {
    tmp = tempDir();
    src = join(tmp.path, 'src');
    parent = join(tmp.path, 'dest');
    mkdirSync(src);
    mkdirSync(parent);
  });
  afterEach(() => tmp.cleanup());

  async function expectRefused(label: string, bytes: Buffer, code: SessionBundleErrorCode, limits = CODEC_TEST_LIMITS, expectedArchiveDigest?: string): Promise<void> {
    const path = join(src, 'bad.tar.zst');
    writeFileSync(path, bytes);
    const source = expectedArchiveDigest === undefined ? { path } : { path, expectedArchiveDigest };
    await rejectsWith(inspectSessionBundle({ source, limits }), code, `inspect: ${label}`);
    await rejectsWith(hydrateSessionBundle({ source, expectedSessionId: 'cloud-session-1', destinationRoot: join(parent, 'h'), limits }), code, `hydrate: ${label}`);
    assert.deepEqual(listing(parent), [], `${label}: nothing may be left beside the destination`);
  }

  it('the generator is honest: its untouched golden archive is accepted', async () => {
    const path = join(src, 'good.tar.zst');
    writeFileSync(path, canonicalFrame(joinTar(golden())));
    await inspectSessionBundle({ source: { path }, limits: CODEC_TEST_LIMITS });
    await hydrateSessionBundle({ source: { path }, expectedSessionId: 'cloud-session-1', destinationRoot: join(parent, 'h'), limits: CODEC_TEST_LIMITS });
    assert.deepEqual(listing(parent), ['h']);
  });

  for (const [label, tar, code] of tarCases()) {
    it(`refuses ${label} (${code})`, async () => {
      await expectRefused(label, canonicalFrame(tar), code);
    });
  }

  it('refuses a tar truncated at every block boundary (integrity_mismatch)', async () => {
    const tar = joinTar(golden());
    for (let blocks = 0; blocks < tar.length / 512; blocks++) {
      await expectRefused(`truncated to ${blocks} blocks`, canonicalFrame(tar.subarray(0, blocks * 512)), 'integrity_mismatch');
    }
  });

  describe('frames', () => {
    const good = (): Buffer => canonicalFrame(joinTar(golden()));
    const frameCases = (): [string, Buffer][] => {
      const g = good();
      const cases: [string, Buffer][] = [];
      const badMagic = Buffer.from(g);
      flip(badMagic, 0, 0x01);
      cases.push(['bad zstd magic', badMagic]);
      cases.push(['a trailing 00 byte', Buffer.concat([g, Buffer.from([0])])]);
      cases.push(['the empty frame appended', Buffer.concat([g, EMPTY_FRAME])]);
      cases.push(['a second frame appended', Buffer.concat([g, good()])]);
      cases.push(['a skippable frame appended', Buffer.concat([g, skippableFrame(4)])]);
      cases.push(['a skippable frame prepended', Buffer.concat([skippableFrame(4), g])]);
      cases.push(['a one-shot frame with content size', frameWithContentSize(joinTar(golden()))]);
      const window60 = Buffer.from(g);
      window60[5] = 0x60;
      cases.push(['window descriptor 0x60', window60]);
      const noChecksum = Buffer.from(g);
      noChecksum[4] = 0x00;
      cases.push(['frame header without checksum flag', noChecksum]);
      const badChecksum = Buffer.from(g);
      flip(badChecksum, badChecksum.length - 1, 0xff);
      cases.push(['a wrong content checksum', badChecksum]);
      const reserved = Buffer.from(g);
      reserved[6] = ((reserved[6] ?? 0) & ~0x06) | 0x06; // block type 3
      cases.push(['a reserved block type', reserved]);
      const huge = Buffer.from(g);
      huge.writeUIntLE((200 * 1024) << 3, 6, 3); // raw block declaring 200 KiB
      cases.push(['a block over 128 KiB', huge]);
      cases.push(['an empty file', Buffer.alloc(0)]);
      for (const cut of [1, 5, 6, 9, 100, g.length - 4, g.length - 1]) cases.push([`compressed bytes truncated to ${cut}`, g.subarray(0, cut)]);
      return cases;
    };
    for (const [label, bytes] of frameCases()) {
      it(`refuses ${label} (integrity_mismatch)`, async () => {
        await expectRefused(label, bytes, 'integrity_mismatch');
      });
    }

    it('accepts a level-19 one-shot frame whose window byte is forced to 0x58 (the reader does not pin the encoder)', async () => {
      const path = join(src, 'l19.tar.zst');
      const l19 = canonicalFrame(joinTar(golden()), 19);
      assert.ok(!l19.equals(good()), 'a level-19 frame differs from level 3');
      writeFileSync(path, l19);
      await inspectSessionBundle({ source: { path }, limits: CODEC_TEST_LIMITS });
    });

    it('refuses a digest mismatch against expectedArchiveDigest (after full validation)', async () => {
      await expectRefused('digest mismatch', good(), 'integrity_mismatch', CODEC_TEST_LIMITS, `sha256:${'0'.repeat(64)}`);
    });
  });

  it('stops a decompression bomb at the decompressed-tar quota, quickly and in bounded memory', async () => {
    const bomb = await bombArchive(256 * 1024 * 1024);
    assert.ok(bomb.length < 64 * 1024, `bomb is ${bomb.length} bytes`);
    const limits = { ...CODEC_TEST_LIMITS, maxFileBytes: 1 << 30, maxPayloadBytes: 1 << 30 };
    const rssBefore = process.memoryUsage().rss;
    const started = Date.now();
    await expectRefused('bomb', bomb, 'quota_exceeded', limits);
    const err = await rejectsWith(inspectSessionBundle({ source: { path: join(src, 'bad.tar.zst') }, limits }), 'quota_exceeded');
    assert.equal(err.details?.quota, 'maxDecompressedTarBytes');
    assert.ok(Date.now() - started < 5000, 'the bomb must be refused as soon as the quota is crossed');
    assert.ok(process.memoryUsage().rss - rssBefore < 64 * 1024 * 1024, 'memory stays bounded');
  });
});
