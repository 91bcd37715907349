// The fast paths of pack and hydrate (docs/bundle.md "Fast path"): batched tar writes, hashing and compressing on
// worker threads, reading and writing files on worker threads. They may only change which thread does the work:
// the same bytes, the same refusals, the same cleanup — and no thread or descriptor left behind.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { zstdDecompressSync } from 'node:zlib';
import { CODEC_TEST_LIMITS, type SessionBundleLimits } from '../../../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle, packSessionBundle } from '../../../server/bundle';
import { SourceHasher } from '../../../server/bundle/sourceHasher';
import { scanRoot, sortEntries, type ScanState } from '../../../server/bundle/sourceTree';
import { writeTar, type PackEntry, type TarSink } from '../../../server/bundle/tarStream';
import { endIdleCodecThreads } from '../../../server/bundle/codecThreads';
import { ThreadPool } from '../../../server/bundle/threadPool';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing, rejectsWith } from '../../fixtures/bundle/harness';
import { NO_THREADS, openDescriptors, THREADS_EVERYWHERE, threadSnapshot, threadsSettled, tune } from './threadTuning';

const LIMITS: SessionBundleLimits = {
  ...CODEC_TEST_LIMITS,
  maxCompressedBytes: 64 << 20,
  maxDecompressedTarBytes: 64 << 20,
  maxPayloadBytes: 64 << 20,
  maxFileBytes: 8 << 20,
  maxEntryCount: 10_000,
};

/** Deterministic bytes: text-like when `text`, else incompressible. */
function bytes(size: number, seed: number, text: boolean): Buffer {
  if (text) return Buffer.from(`line ${seed} of a text file; `.repeat(Math.ceil(size / 24) + 1).slice(0, size));
  const out = Buffer.alloc(size);
  let block = createHash('sha256').update(String(seed)).digest();
  for (let o = 0; o < size; o += 32) {
    block.copy(out, o, 0, Math.min(32, size - o));
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

/** A mixed tree: hundreds of tiny files, empty files and directories, medium files, a file over 1 MiB, exec bits. */
function mixedTree(root: string): { stateRoot: string; workspaceRoot: string } {
  const roots = createFixture(root);
  for (let i = 0; i < 240; i++) {
    const dir = join(i % 5 === 0 ? roots.stateRoot : roots.workspaceRoot, `d${i % 12}`, `e${i % 3}`);
    mkdirSync(dir, { recursive: true });
    const size = i % 17 === 0 ? 0 : i % 7 === 0 ? 20_000 + i * 97 : (i * 37) % 700;
    writeFileSync(join(dir, `f${i}`), bytes(size, i, i % 2 === 0));
    if (i % 11 === 0) chmodSync(join(dir, `f${i}`), 0o755);
  }
  mkdirSync(join(roots.workspaceRoot, 'empty', 'deeper'), { recursive: true });
  writeFileSync(join(roots.workspaceRoot, 'big.bin'), bytes(1536 * 1024 + 3, 999, false));
  return roots;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('bundle/fast paths', () => {
  let dir: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let out: string;
  let restore: (() => void) | undefined;
  beforeEach(() => {
    dir = tempDir();
    roots = mixedTree(join(dir.path, 'src'));
    out = join(dir.path, 'out');
    mkdirSync(out);
  });
  afterEach(() => {
    restore?.();
    restore = undefined;
    dir.cleanup();
  });

  it('packs byte-identical archives with and without worker threads, and the golden archive either way', async () => {
    restore = tune(NO_THREADS);
    const a = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: LIMITS });
    restore();
    restore = tune(THREADS_EVERYWHERE);
    const b = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'b.tar.zst')), limits: LIMITS });
    assert.deepEqual({ ...b, path: '' }, { ...a, path: '' });
    assert.ok(readFileSync(a.path).equals(readFileSync(b.path)));

    const golden = createFixture(join(dir.path, 'golden'));
    const g = await packSessionBundle({ ...fixturePackOptions(golden, join(out, 'g.tar.zst')), limits: CODEC_TEST_LIMITS });
    assert.equal(g.archiveDigest, GOLDEN.archiveDigest);
    assert.equal(g.compressedBytes, GOLDEN.compressedBytes);
    assert.deepEqual(listing(out), ['a.tar.zst', 'b.tar.zst', 'g.tar.zst'], 'no temp file left');
  });

  it('writes the same tar for any batch size: tiny files share batches, big ones span them', async () => {
    restore = tune(NO_THREADS);
    const packed = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: LIMITS });
    const reference = zstdDecompressSync(readFileSync(packed.path));
    // Rebuild the entries the way pack does, and take the manifest from the reference tar.
    const scan: ScanState = { entries: [], payloadBytes: 0, entryCount: 0 };
    await scanRoot(roots.stateRoot, 'state/', LIMITS, scan);
    await scanRoot(roots.workspaceRoot, 'workspace/', LIMITS, scan);
    sortEntries(scan.entries);
    const hasher = new SourceHasher({ workers: 0, parallelMinBytes: Infinity });
    for (const e of scan.entries) hasher.add(e);
    await hasher.finish();
    const manifestSize = parseInt(reference.toString('latin1', 124, 135), 8);
    const manifest = reference.subarray(512, 512 + manifestSize);
    const identity: PackEntry = { kind: 'identity', archivePath: 'state-identity.json', bytes: Buffer.from(GOLDEN.identityBytes), size: GOLDEN.identityBytes.length, digest: Buffer.alloc(32) };
    for (const batchBytes of [512, 1536, 64 * 1024, 2 * 1024 * 1024]) {
      const parts: Buffer[] = [];
      let pauses = 0;
      const sink: TarSink = {
        take: () => Buffer.alloc(batchBytes, 0xee), // dirty on purpose: every byte must be written
        put: (buffer, length) => void parts.push(Buffer.from(buffer.subarray(0, length))),
        pause: () => void (pauses += 1),
      };
      await writeTar(manifest, [identity, ...scan.entries], reference.length, sink, 4096);
      assert.ok(Buffer.concat(parts).equals(reference), `batch ${batchBytes}`);
      assert.ok(parts.slice(0, -2).every((p) => p.length === batchBytes), 'every batch but the last is full');
      assert.equal(parts.at(-1)?.length, 1024, 'the terminator is a write of its own');
      assert.ok(pauses > 0);
    }
    await assert.rejects(writeTar(manifest, [identity, ...scan.entries], reference.length, { take: () => Buffer.alloc(1000), put: () => undefined, pause: () => undefined }), RangeError);
  });

  it('hashing workers refuse a source that changes or vanishes, like the calling thread does, and stop cleanly', async () => {
    for (const tuning of [NO_THREADS, THREADS_EVERYWHERE]) {
      restore = tune(tuning);
      const grown = join(roots.workspaceRoot, 'd1', 'e1', 'f1');
      let appended = false;
      await rejectsWith(
        packSessionBundle({
          ...fixturePackOptions(roots, join(out, 'x.tar.zst')),
          limits: LIMITS,
          onProgress: (p) => {
            if (p.phase === 'hash' && !appended) {
              appended = true;
              appendFileSync(grown, 'more');
            }
          },
        }),
        'source_changed',
      );
      // A file removed before it is read is an errno failure, whichever thread meets it.
      const scan: ScanState = { entries: [], payloadBytes: 0, entryCount: 0 };
      await scanRoot(roots.workspaceRoot, 'workspace/', LIMITS, scan);
      rmSync(join(roots.workspaceRoot, 'big.bin'));
      const hasher = new SourceHasher({ workers: tuning.hashWorkers, parallelMinBytes: tuning.parallelHashMinBytes });
      const rejected = assert.rejects(
        (async () => {
          for (const e of scan.entries) hasher.add(e);
          await hasher.finish();
        })(),
        (err: NodeJS.ErrnoException) => err.code === 'ENOENT',
      );
      await rejected;
      await hasher.close();
      writeFileSync(join(roots.workspaceRoot, 'big.bin'), bytes(1536 * 1024 + 3, 999, false));
      restore();
      restore = undefined;
    }
    assert.deepEqual(listing(out), []);
  });

  it('a pack cancelled from its progress callback stops its threads and leaves no file or descriptor', async () => {
    restore = tune(THREADS_EVERYWHERE);
    await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'warm.tar.zst')), limits: LIMITS }); // thread pool warm
    rmSync(join(out, 'warm.tar.zst'));
    for (const phase of ['hash', 'write'] as const) {
      // Idle codec threads hold their event loops' descriptors: counted with none idle, before and after.
      await endIdleCodecThreads();
      const fds = openDescriptors();
      const threads = threadSnapshot();
      let seen = 0;
      await assert.rejects(
        packSessionBundle({
          ...fixturePackOptions(roots, join(out, 'x.tar.zst')),
          limits: LIMITS,
          onProgress: (p) => {
            if (p.phase === phase && ++seen === 2) throw new Error('cancelled');
          },
        }),
        (err: Error) => err.name === 'SessionBundleError',
      );
      assert.deepEqual(listing(out), [], `cancelled in ${phase}: nothing left`);
      const settled = await threadsSettled(threads);
      assert.equal(settled.leased, 0, `cancelled in ${phase}: no codec thread still in use`);
      assert.equal(settled.threads, settled.expected, `cancelled in ${phase}: no worker thread left`);
      await endIdleCodecThreads();
      assert.equal(openDescriptors(), fds, `cancelled in ${phase}: no descriptor left`);
    }
  });

  it('the compressing worker enforces maxCompressedBytes like the calling thread', async () => {
    for (const tuning of [NO_THREADS, THREADS_EVERYWHERE]) {
      restore = tune(tuning);
      const err = await rejectsWith(packSessionBundle({ ...fixturePackOptions(roots, join(out, 'q.tar.zst')), limits: { ...LIMITS, maxCompressedBytes: 1 << 20 } }), 'quota_exceeded');
      assert.equal(err.details?.quota, 'maxCompressedBytes');
      assert.equal(err.details?.limit, 1 << 20);
      assert.ok((err.details?.observed ?? 0) > 1 << 20);
      assert.deepEqual(listing(out), []);
      restore();
      restore = undefined;
    }
  });

  it('inspects and hydrates identically on worker threads, files and modes exact', async () => {
    restore = tune(NO_THREADS);
    const packed = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: LIMITS });
    const local = await inspectSessionBundle({ source: { path: packed.path }, limits: LIMITS });
    restore();
    restore = tune(THREADS_EVERYWHERE);
    const threaded = await inspectSessionBundle({ source: { path: packed.path, expectedArchiveDigest: packed.archiveDigest }, limits: LIMITS });
    assert.deepEqual(threaded, local);
    const h = await hydrateSessionBundle({ source: { path: packed.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h'), limits: LIMITS });
    const walk = (root: string, rel = ''): string[] =>
      readdirSync(join(root, rel), { withFileTypes: true }).flatMap((d) => {
        const path = rel === '' ? d.name : `${rel}/${d.name}`;
        const st = statSync(join(root, path));
        const line = `${path} ${(st.mode & 0o777).toString(8)} ${d.isDirectory() ? '' : sha(readFileSync(join(root, path)))}`;
        return d.isDirectory() ? [line, ...walk(root, path)] : [line];
      });
    const source = walk(join(dir.path, 'src')).map((l) => l.replace(/ (\d+) /, (_m, mode: string) => ` ${mode === '755' || mode === '644' ? mode : (parseInt(mode, 8) & 0o111 ? '755' : '644')} `));
    assert.deepEqual(walk(h.destinationRoot).filter((l) => !l.startsWith('state-identity.json')), source.filter((l) => !l.startsWith('state-identity.json')));
    // Repacking the hydrated tree on worker threads gives the same archive again.
    const again = await packSessionBundle({ ...fixturePackOptions({ stateRoot: h.stateRoot, workspaceRoot: h.workspaceRoot }, join(out, 'b.tar.zst')), limits: LIMITS });
    assert.equal(again.archiveDigest, packed.archiveDigest);
  });

  it('a hydrate failing late on worker threads removes everything and leaves no thread or descriptor', async () => {
    restore = tune(NO_THREADS);
    const packed = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: LIMITS });
    restore();
    restore = tune(THREADS_EVERYWHERE);
    const parent = join(dir.path, 'dest');
    mkdirSync(parent);
    await hydrateSessionBundle({ source: { path: packed.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(parent, 'warm'), limits: LIMITS });
    rmSync(join(parent, 'warm'), { recursive: true });
    // Idle codec threads hold their event loops' descriptors: counted with none idle, before and after.
    await endIdleCodecThreads();
    const threads = threadSnapshot();
    const fds = openDescriptors();
    // Cut the archive: most files are written before the stream turns out to be truncated.
    truncateSync(packed.path, statSync(packed.path).size - 64);
    await rejectsWith(hydrateSessionBundle({ source: { path: packed.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(parent, 'h'), limits: LIMITS }), 'integrity_mismatch');
    assert.deepEqual(listing(parent).filter((n) => !n.endsWith('.lock')), [], 'no destination, no staging');
    // Cancelled from the progress callback in the middle of the stream.
    writeFileSync(packed.path, Buffer.alloc(0));
    const intact = await (async () => {
      restore?.();
      restore = tune(NO_THREADS);
      const p = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'c.tar.zst')), limits: LIMITS });
      restore();
      restore = tune(THREADS_EVERYWHERE);
      return p.path;
    })();
    let reads = 0;
    await assert.rejects(
      hydrateSessionBundle({
        source: { path: intact },
        expectedSessionId: GOLDEN.sessionId,
        destinationRoot: join(parent, 'h'),
        limits: LIMITS,
        onProgress: () => {
          if (++reads === 2) throw new Error('cancelled');
        },
      }),
      (err: Error) => err.name === 'SessionBundleError',
    );
    assert.deepEqual(listing(parent).filter((n) => !n.endsWith('.lock')), []);
    const settled = await threadsSettled(threads);
    assert.equal(settled.leased, 0, 'no codec thread still in use');
    assert.equal(settled.threads, settled.expected, 'no worker thread left');
    await endIdleCodecThreads();
    assert.equal(openDescriptors(), fds, 'no descriptor left');
  });

  it('small bundles with many files fsync on worker threads once past the threshold', async () => {
    restore = tune({ ...NO_THREADS, syncWorkers: 2, syncWorkersAfterFiles: 8 });
    const packed = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: LIMITS });
    const h = await hydrateSessionBundle({ source: { path: packed.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h'), limits: LIMITS });
    assert.ok(readFileSync(join(h.workspaceRoot, 'big.bin')).equals(readFileSync(join(roots.workspaceRoot, 'big.bin'))));
  });

  it('ThreadPool: a stopping close waits for the replies owed and reports nothing after; a dead worker is an error', async () => {
    const replies: unknown[] = [];
    const errors: unknown[] = [];
    const pool = new ThreadPool(
      `parentPort.on('message', (n) => {
        let i = 0;
        while (!stopped() && i < n) i += 1;
        if (n < 0) process.exit(3);
        parentPort.postMessage({ results: i });
      });`,
      2,
      { onReply: (_slot, reply) => replies.push(reply), onError: (err) => errors.push(err) },
    );
    try {
      pool.post(0, 10);
      pool.post(1, 5);
      while (replies.length < 2) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(new Set(replies.map((r) => JSON.stringify(r))), new Set(['{"results":10}', '{"results":5}']));
      pool.post(1, -1);
      while (errors.length === 0) await new Promise((r) => setTimeout(r, 5));
      assert.match(String(errors[0]), /exited unexpectedly/);
      pool.post(0, 1e12); // runs until stopped
      assert.equal(pool.owedBy(0), 1);
    } finally {
      await pool.close();
    }
    assert.equal(replies.length, 2, 'no reply is delivered after a stopping close');
    assert.equal(pool.owedBy(0), 0);
  });
});
