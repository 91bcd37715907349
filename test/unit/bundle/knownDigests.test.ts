// Pack does not read again, in its first pass, a file this process has just hydrated and that is still exactly the
// inode hydrate left (issue 25: an activation packs the tree it hydrated) — and that never changes the bundle: its
// bytes are those of a pack without the known digests, and a file changed since (even with its size and
// modification time put back) is hashed again. Both hydrate writer paths (this thread, one or more writer threads).
// Bytes read are observed through /proc/self/io (rchar: every read(2) of this process, its threads included).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { hydrateSessionBundle, packSessionBundle } from '../../../server/bundle';
import type { KnownDigest } from '../../../server/bundle/pack';
import { NO_THREADS, THREADS_EVERYWHERE, withTuning } from './threadTuning';

const FILE_BYTES = 2 * 1024 * 1024;
const FILES = 4;
const PAYLOAD = FILE_BYTES * FILES;
const IDENTITY = { mediaType: 'application/json', bytes: Buffer.from('{}\n') };

function bytesRead(): number {
  const m = /^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'));
  if (!m) throw new Error('no rchar in /proc/self/io');
  return Number(m[1]);
}

for (const [name, tuning] of [
  ['in this thread', NO_THREADS],
  ['on worker threads', THREADS_EVERYWHERE],
  // What a non-durable hydrate uses on 2 cores (tuning.ts fileWritersNotDurable).
  ['on one file-writer thread', { ...THREADS_EVERYWHERE, fileWritersNotDurable: 1 }],
] as const) {
  describe(`pack with the digests of a hydrate (${name})`, () => {
    withTuning(tuning);
    let dir: string;
    let hydrated: string;
    let known: Map<string, KnownDigest>;
    let n = 0;

    beforeEach(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'known-digests-'));
      const tree = path.join(dir, 'tree');
      fs.mkdirSync(path.join(tree, 'state'), { recursive: true });
      fs.mkdirSync(path.join(tree, 'workspace', 'src'), { recursive: true });
      fs.writeFileSync(path.join(tree, 'state', 'a.bin'), randomBytes(FILE_BYTES));
      for (let i = 1; i < FILES; i++) fs.writeFileSync(path.join(tree, 'workspace', 'src', `f${i}.bin`), randomBytes(FILE_BYTES));
      const seed = await packSessionBundle({
        stateRoot: path.join(tree, 'state'),
        workspaceRoot: path.join(tree, 'workspace'),
        stateIdentity: IDENTITY,
        envelope: { sessionId: 's' },
        destination: path.join(dir, 'seed.tar.zst'),
        limits: DEFAULT_PEOPLE_LIMITS,
      });
      hydrated = path.join(dir, 'hydrated');
      known = new Map();
      await hydrateSessionBundle({
        source: { path: seed.path, expectedArchiveDigest: seed.archiveDigest },
        expectedSessionId: 's',
        destinationRoot: hydrated,
        limits: DEFAULT_PEOPLE_LIMITS,
        durable: false,
        onFileWritten: (archivePath, identity, digest) => known.set(archivePath, { identity, digest }),
      });
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    const pack = async (knownDigests?: Map<string, KnownDigest>) => {
      const before = bytesRead();
      const artifact = await packSessionBundle({
        stateRoot: path.join(hydrated, 'state'),
        workspaceRoot: path.join(hydrated, 'workspace'),
        stateIdentity: IDENTITY,
        envelope: { sessionId: 's', lastCommittedActivationId: 'a1' },
        destination: path.join(dir, `out-${n++}.tar.zst`),
        limits: DEFAULT_PEOPLE_LIMITS,
        ...(knownDigests ? { knownDigests } : {}),
      });
      return { artifact, read: bytesRead() - before };
    };

    it('hydrate reports every file it wrote; pack reads unchanged ones once, and writes the same bytes', async () => {
      assert.deepEqual([...known.keys()].sort(), ['state-identity.json', 'state/a.bin', 'workspace/src/f1.bin', 'workspace/src/f2.bin', 'workspace/src/f3.bin']);
      const withKnown = await pack(known);
      const without = await pack();
      assert.equal(withKnown.artifact.archiveDigest, without.artifact.archiveDigest);
      assert.ok(without.read >= 2 * PAYLOAD, `without: read ${without.read}`);
      assert.ok(withKnown.read >= PAYLOAD && withKnown.read < 1.25 * PAYLOAD, `with known digests: read ${withKnown.read}`);
    });

    for (const putBack of [false, true]) {
      it(`a file changed after hydrate is hashed again and packed with its new bytes${putBack ? ' (size and mtime put back)' : ''}`, async () => {
        const file = path.join(hydrated, 'workspace', 'src', 'f2.bin');
        const st = fs.statSync(file, { bigint: true });
        const fd = fs.openSync(file, 'r+');
        fs.writeSync(fd, Buffer.from([0xff, 0x00, 0xff]), 0, 3, FILE_BYTES / 2);
        fs.closeSync(fd);
        if (putBack) {
          // touch sets the exact nanoseconds (utimensat); only the ctime, which nobody can set, tells the change.
          const ns = st.mtimeNs % 1_000_000_000n;
          execFileSync('touch', ['-m', '-d', `@${st.mtimeNs / 1_000_000_000n}.${ns.toString().padStart(9, '0')}`, file]);
          assert.equal(fs.statSync(file, { bigint: true }).mtimeNs, st.mtimeNs);
        }
        const withKnown = await pack(known);
        const without = await pack();
        assert.equal(withKnown.artifact.archiveDigest, without.artifact.archiveDigest);
      });
    }
  });
}
