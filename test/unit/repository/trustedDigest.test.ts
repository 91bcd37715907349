// A bundle our pack has just written is published with the digest pack computed over the bytes it wrote (a trusted
// digest, issue 25: the commit no longer re-reads a 60 MB bundle) — and that trust holds only for the very inode pack
// left, unchanged: a bundle changed after pack wrote it is still caught by publish (integrity_mismatch, nothing
// published), even with its size and modification time put back. Bytes read are observed through /proc/self/io.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleArtifact } from '../../../protocol/bundle';
import { SESSION_BUNDLE_MEDIA_TYPE } from '../../../protocol/repository';
import { neutralIdentity } from '../../../server/activation/stateIdentity';
import { packSessionBundle, writtenArchiveOf } from '../../../server/bundle';
import { publishSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { FileObjectStore } from '../../../server/repository/fileObjectStore';
import { objectIdFor } from '../../../server/repository/objectStore';

const SIZE = 8 * 1024 * 1024;

function bytesRead(): number {
  const m = /^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'));
  if (!m) throw new Error('no rchar in /proc/self/io');
  return Number(m[1]);
}

async function readDuring<T>(work: () => Promise<T>): Promise<{ read: number; value: T }> {
  const before = bytesRead();
  const value = await work();
  return { read: bytesRead() - before, value };
}

describe('file object store: a trusted digest from our own pack', () => {
  let dir: string;
  let store: FileObjectStore;
  let artifact: SessionBundleArtifact;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trusted-digest-'));
    store = new FileObjectStore(path.join(dir, 'repo'));
    const tree = path.join(dir, 'tree');
    fs.mkdirSync(path.join(tree, 'state'), { recursive: true });
    fs.mkdirSync(path.join(tree, 'workspace'), { recursive: true });
    // Incompressible, so the bundle is about SIZE bytes.
    fs.writeFileSync(path.join(tree, 'workspace', 'blob.bin'), randomBytes(SIZE));
    fs.writeFileSync(path.join(tree, 'state', 'notes.txt'), 'state\n');
    artifact = await packSessionBundle({
      stateRoot: path.join(tree, 'state'),
      workspaceRoot: path.join(tree, 'workspace'),
      stateIdentity: neutralIdentity('s'),
      envelope: { sessionId: 's' },
      destination: path.join(dir, 'next.tar.zst'),
      limits: DEFAULT_PEOPLE_LIMITS,
    });
    assert.ok(artifact.compressedBytes >= SIZE);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const publish = (trusted = true) =>
    publishSessionCheckpointV1({ objectStore: store, compatibilityBundle: artifact, handOverBundle: true, writtenBundle: trusted ? writtenArchiveOf(artifact) : undefined });

  it('only the artifact object pack returned carries the digest pack computed; a copy or a parsed one carries nothing', () => {
    assert.equal(writtenArchiveOf(artifact)?.digest, artifact.archiveDigest);
    assert.equal(writtenArchiveOf({ ...artifact }), undefined);
    assert.equal(writtenArchiveOf(JSON.parse(JSON.stringify(artifact)) as object), undefined);
  });

  it('an unchanged bundle is moved in without being read, and the digest pack computed is its digest', async () => {
    const { read, value: checkpoint } = await readDuring(() => publish());
    assert.ok(read < SIZE / 8, `publish read ${read} bytes`);
    assert.equal(fs.existsSync(artifact.path), false, 'moved, not copied');
    // Another store (another process) remembers nothing: it hashes the object, which verifies.
    const other = new FileObjectStore(path.join(dir, 'repo'));
    const { read: reread } = await readDuring(() => other.assertReadable(checkpoint.value.compatibilityBundle));
    assert.ok(reread >= SIZE);
  });

  it('without the trusted digest the handed-over bundle is hashed as it is moved in', async () => {
    const { read } = await readDuring(() => publish(false));
    assert.ok(read >= SIZE, `publish read only ${read} bytes`);
  });

  for (const putBack of [false, true]) {
    it(`a bundle changed after pack wrote it is refused by publish and nothing is published${putBack ? ' (size and mtime put back)' : ''}`, async () => {
      const st = fs.statSync(artifact.path, { bigint: true });
      const fd = fs.openSync(artifact.path, 'r+');
      fs.writeSync(fd, Buffer.from([0xff, 0x00, 0xff]), 0, 3, Math.floor(artifact.compressedBytes / 2));
      fs.closeSync(fd);
      if (putBack) {
        // touch sets the exact nanoseconds (utimensat); only the ctime, which nobody can set, tells the change.
        const ns = st.mtimeNs % 1_000_000_000n;
        execFileSync('touch', ['-m', '-d', `@${st.mtimeNs / 1_000_000_000n}.${ns.toString().padStart(9, '0')}`, artifact.path]);
        assert.equal(fs.statSync(artifact.path, { bigint: true }).mtimeNs, st.mtimeNs);
      }
      await assert.rejects(publish(), (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'));
      const id = objectIdFor(artifact.archiveDigest, SESSION_BUNDLE_MEDIA_TYPE);
      assert.equal(fs.existsSync(store.pathOf(id)), false, 'nothing was published');
    });
  }
});
