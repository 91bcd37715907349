// pack and inspect end to end (spec §1–5, §12): the golden bundle byte for byte, determinism, the round trip
// through hydrate, and pack's refusals (links, special names, changed sources, existing destinations).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { zstdDecompressSync } from 'node:zlib';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle, packSessionBundle } from '../../../server/bundle';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing, rejectsWith } from '../../fixtures/bundle/harness';

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('bundle/pack + inspect', () => {
  let dir: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let out: string;
  beforeEach(() => {
    dir = tempDir();
    roots = createFixture(join(dir.path, 'src'));
    out = join(dir.path, 'out');
    mkdirSync(out);
  });
  afterEach(() => dir.cleanup());

  it('packs the golden fixture to the golden archive (tar and archive digests, 676 bytes, one frame)', async () => {
    const artifact = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: CODEC_TEST_LIMITS });
    assert.deepEqual(artifact, {
      path: join(out, 'a.tar.zst'),
      archiveDigest: GOLDEN.archiveDigest,
      compressedBytes: GOLDEN.compressedBytes,
      decompressedTarBytes: GOLDEN.tarBytes,
      payloadBytes: GOLDEN.payloadBytes,
      entryCount: GOLDEN.entryCount,
    });
    const bytes = readFileSync(artifact.path);
    assert.equal(`sha256:${sha256(bytes)}`, GOLDEN.archiveDigest);
    assert.equal(bytes.subarray(0, 8).toString('hex'), '28b52ffd0458bd14');
    assert.equal(bytes.lastIndexOf(Buffer.from('28b52ffd', 'hex')), 0);
    const tar = zstdDecompressSync(bytes);
    assert.equal(sha256(tar), GOLDEN.tarSha256);
    assert.ok(tar.subarray(-1024).equals(Buffer.alloc(1024)));
    assert.deepEqual(listing(out), ['a.tar.zst'], 'no temp file left');
    assert.equal(0o777 & (await import('node:fs')).statSync(artifact.path).mode, 0o600);
  });

  it('inspects the golden bundle: manifest, counts, digest; expected digest checked', async () => {
    const { path } = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: CODEC_TEST_LIMITS });
    const inspection = await inspectSessionBundle({ source: { path, expectedArchiveDigest: GOLDEN.archiveDigest }, limits: CODEC_TEST_LIMITS });
    assert.equal(inspection.archiveDigest, GOLDEN.archiveDigest);
    assert.equal(inspection.manifest.payload.treeDigest, GOLDEN.treeDigest);
    assert.equal(inspection.manifest.envelope.sessionId, GOLDEN.sessionId);
    assert.equal(inspection.decompressedTarBytes, GOLDEN.tarBytes);
    assert.equal(inspection.compressedBytes, GOLDEN.compressedBytes);
    await rejectsWith(inspectSessionBundle({ source: { path, expectedArchiveDigest: `sha256:${'0'.repeat(64)}` }, limits: CODEC_TEST_LIMITS }), 'integrity_mismatch');
    await assert.rejects(inspectSessionBundle({ source: { path, expectedArchiveDigest: GOLDEN.archiveDigest.toUpperCase() }, limits: CODEC_TEST_LIMITS }), TypeError);
    await rejectsWith(inspectSessionBundle({ source: { path: join(out, 'missing.tar.zst') }, limits: CODEC_TEST_LIMITS }), 'io_failure');
    await rejectsWith(inspectSessionBundle({ source: { path: out }, limits: CODEC_TEST_LIMITS }), 'io_failure', 'a directory');
    execFileSync('mkfifo', [join(out, 'fifo')]);
    await rejectsWith(inspectSessionBundle({ source: { path: join(out, 'fifo') }, limits: CODEC_TEST_LIMITS }), 'io_failure', 'a FIFO must not hang');
  });

  it('is deterministic: pack twice gives the same bytes; pack → hydrate → pack gives the same archive', async () => {
    const bigger = join(roots.workspaceRoot, 'data');
    mkdirSync(bigger);
    const random = Buffer.alloc(300 * 1024);
    for (let i = 0; i < random.length; i++) random[i] = (i * 2654435761) >>> 24;
    writeFileSync(join(bigger, 'blob.bin'), random);
    writeFileSync(join(bigger, 'text.txt'), 'hello world\n'.repeat(20000));
    const a = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: CODEC_TEST_LIMITS });
    const b = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'b.tar.zst')), limits: CODEC_TEST_LIMITS });
    assert.ok(readFileSync(a.path).equals(readFileSync(b.path)));
    const hydrated = await hydrateSessionBundle({ source: { path: a.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h'), limits: CODEC_TEST_LIMITS });
    const c = await packSessionBundle({
      ...fixturePackOptions({ stateRoot: hydrated.stateRoot, workspaceRoot: hydrated.workspaceRoot }, join(out, 'c.tar.zst')),
      stateIdentity: { mediaType: GOLDEN.identityMediaType, bytes: readFileSync(join(hydrated.destinationRoot, 'state-identity.json')) },
      limits: CODEC_TEST_LIMITS,
    });
    assert.equal(c.archiveDigest, a.archiveDigest);
    assert.ok(readFileSync(c.path).equals(readFileSync(a.path)));
  });

  it('streams files over 1 MiB (async path) on pack and hydrate, byte for byte, and notices them changing', async () => {
    const big = randomBytes(3 * 1024 * 1024 + 17);
    const edge = randomBytes(1024 * 1024 + 1);
    writeFileSync(join(roots.workspaceRoot, 'big.bin'), big);
    writeFileSync(join(roots.stateRoot, 'edge.bin'), edge);
    const limits = { ...CODEC_TEST_LIMITS, maxFileBytes: 8 << 20, maxPayloadBytes: 16 << 20, maxDecompressedTarBytes: 16 << 20, maxCompressedBytes: 16 << 20 };
    const a = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits });
    const h = await hydrateSessionBundle({ source: { path: a.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h'), limits });
    assert.ok(readFileSync(join(h.workspaceRoot, 'big.bin')).equals(big));
    assert.ok(readFileSync(join(h.stateRoot, 'edge.bin')).equals(edge));
    let grown = false;
    await rejectsWith(
      packSessionBundle({
        ...fixturePackOptions(roots, join(out, 'b.tar.zst')),
        limits,
        onProgress: (p) => {
          if (p.phase === 'write' && !grown) {
            grown = true;
            appendFileSync(join(roots.workspaceRoot, 'big.bin'), 'more');
          }
        },
      }),
      'source_changed',
    );
    assert.deepEqual(listing(out), ['a.tar.zst']);
  });

  it('copies the identity bytes (no aliasing of the caller buffer)', async () => {
    const bytes = Buffer.from(GOLDEN.identityBytes);
    const packing = packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), stateIdentity: { mediaType: GOLDEN.identityMediaType, bytes }, limits: CODEC_TEST_LIMITS });
    bytes.fill(0x41);
    assert.equal((await packing).archiveDigest, GOLDEN.archiveDigest);
  });

  it('refuses symlinks, hard links, special files and invalid UTF-8 names in the source', async () => {
    const dest = join(out, 'x.tar.zst');
    const opts = () => ({ ...fixturePackOptions(roots, dest), limits: CODEC_TEST_LIMITS });
    symlinkSync('run.sh', join(roots.workspaceRoot, 'link'));
    await rejectsWith(packSessionBundle(opts()), 'unsupported_entry', 'symlink');
    rmSync(join(roots.workspaceRoot, 'link'));
    linkSync(join(roots.workspaceRoot, 'run.sh'), join(roots.stateRoot, 'hard'));
    await rejectsWith(packSessionBundle(opts()), 'unsupported_entry', 'hard link');
    rmSync(join(roots.stateRoot, 'hard'));
    const badName = Buffer.concat([Buffer.from(join(roots.workspaceRoot, 'bad-')), Buffer.from([0xff, 0xfe])]);
    writeFileSync(badName, 'x');
    await rejectsWith(packSessionBundle(opts()), 'unsafe_path', 'invalid UTF-8 name');
    rmSync(badName);
    writeFileSync(join(roots.workspaceRoot, 'aux.txt'), 'x');
    await rejectsWith(packSessionBundle(opts()), 'unsafe_path', 'Windows device name');
    rmSync(join(roots.workspaceRoot, 'aux.txt'));
    await rejectsWith(packSessionBundle({ ...opts(), stateRoot: join(roots.workspaceRoot, 'run.sh') }), 'unsupported_entry', 'root not a directory');
    assert.deepEqual(listing(out), []);
    await packSessionBundle(opts());
    assert.deepEqual(listing(out), ['x.tar.zst']);
  });

  it('refuses an existing destination, even an empty directory, and never replaces it', async () => {
    mkdirSync(join(out, 'exists'));
    await rejectsWith(packSessionBundle({ ...fixturePackOptions(roots, join(out, 'exists')), limits: CODEC_TEST_LIMITS }), 'destination_exists');
    writeFileSync(join(out, 'file.tar.zst'), 'keep');
    await rejectsWith(packSessionBundle({ ...fixturePackOptions(roots, join(out, 'file.tar.zst')), limits: CODEC_TEST_LIMITS }), 'destination_exists');
    assert.equal(readFileSync(join(out, 'file.tar.zst'), 'utf8'), 'keep');
    assert.deepEqual(listing(out), ['exists', 'file.tar.zst']);
  });

  it('refuses a source that changes between scan and emit (source_changed), leaving nothing', async () => {
    writeFileSync(join(roots.workspaceRoot, 'zz-late.txt'), 'before');
    let mutated = false;
    await rejectsWith(
      packSessionBundle({
        ...fixturePackOptions(roots, join(out, 'x.tar.zst')),
        limits: CODEC_TEST_LIMITS,
        onProgress: (p) => {
          if (p.phase === 'hash' && !mutated) {
            mutated = true;
            appendFileSync(join(roots.workspaceRoot, 'zz-late.txt'), ' and after');
          }
        },
      }),
      'source_changed',
    );
    assert.ok(mutated);
    assert.deepEqual(listing(out), []);
    // A new file in a scanned directory is a change too, even within one coarse mtime tick.
    let added = false;
    await rejectsWith(
      packSessionBundle({
        ...fixturePackOptions(roots, join(out, 'y.tar.zst')),
        limits: CODEC_TEST_LIMITS,
        onProgress: (p) => {
          if (p.phase === 'hash' && !added) {
            added = true;
            writeFileSync(join(roots.stateRoot, 'empty', 'new'), 'x');
          }
        },
      }),
      'source_changed',
    );
    assert.deepEqual(listing(out), []);
  });

  it('refuses publication when the temp file is swapped, removing nothing foreign', async () => {
    let foreign = '';
    await rejectsWith(
      packSessionBundle({
        ...fixturePackOptions(roots, join(out, 'x.tar.zst')),
        limits: CODEC_TEST_LIMITS,
        onProgress: (p) => {
          if (p.phase !== 'verify' || foreign !== '') return;
          const temp = listing(out).find((n) => n.startsWith('.x.tar.zst.maka-session-bundle-pack-') && n.endsWith('.tmp'));
          assert.ok(temp !== undefined, 'the temp file sits beside the destination');
          foreign = join(out, temp);
          writeFileSync(join(dir.path, 'foreign'), 'not ours');
          renameSync(join(dir.path, 'foreign'), foreign);
        },
      }),
      'source_changed',
    );
    assert.deepEqual(listing(out), [foreign.split('/').pop()], 'no destination; the foreign file is left alone');
    assert.equal(readFileSync(foreign, 'utf8'), 'not ours');
  });

  it('rejects a wrong session id on hydrate with identity_mismatch before writing anything', async () => {
    const { path } = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: CODEC_TEST_LIMITS });
    const parent = join(dir.path, 'dest');
    mkdirSync(parent);
    await rejectsWith(hydrateSessionBundle({ source: { path }, expectedSessionId: 'cloud-session-2', destinationRoot: join(parent, 'h'), limits: CODEC_TEST_LIMITS }), 'identity_mismatch');
    assert.deepEqual(listing(parent), []);
  });

  it('8 concurrent packs to one destination: exactly one wins, seven get destination_exists', async () => {
    const dest = join(out, 'race.tar.zst');
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => packSessionBundle({ ...fixturePackOptions(roots, dest), limits: CODEC_TEST_LIMITS })));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const codes = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as { code?: string }).code] : []));
    assert.equal(ok.length, 1);
    assert.deepEqual(codes, Array(7).fill('destination_exists'));
    assert.deepEqual(listing(out), ['race.tar.zst']);
    assert.equal(`sha256:${sha256(readFileSync(dest))}`, GOLDEN.archiveDigest);
  });

  it('keeps exec bits as 0755 and everything else 0644 regardless of other mode bits', async () => {
    chmodSync(join(roots.stateRoot, 'session.bin'), 0o600);
    chmodSync(join(roots.workspaceRoot, 'run.sh'), 0o700);
    const a = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: CODEC_TEST_LIMITS });
    assert.equal(a.archiveDigest, GOLDEN.archiveDigest);
  });
});
