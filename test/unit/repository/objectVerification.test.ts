// The file object store does not hash an object again that it has already hashed while its file is the same,
// unchanged inode (issue 25: an activation's commit and the next checkout re-read a 60 MB bundle three times) —
// and that never weakens the check: a file changed in any way is hashed again and refused when it differs.
// Bytes read are observed through /proc/self/io (rchar: every read(2) of this process, thread pool included).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { FileObjectStore } from '../../../server/repository/fileObjectStore';

const SIZE = 8 * 1024 * 1024;
const MEDIA = 'application/octet-stream';

function bytesRead(): number {
  const m = /^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'));
  if (!m) throw new Error('no rchar in /proc/self/io');
  return Number(m[1]);
}

/** Bytes this process read while `work` ran (a little noise from other reads is far below SIZE). */
async function readDuring(work: () => Promise<unknown>): Promise<number> {
  const before = bytesRead();
  await work();
  return bytesRead() - before;
}

describe('file object store: verification remembered per unchanged inode', () => {
  let dir: string;
  let store: FileObjectStore;
  let ref: Awaited<ReturnType<FileObjectStore['publish']>>;
  let file: string;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'object-verify-'));
    store = new FileObjectStore(path.join(dir, 'repo'));
    const bytes = randomBytes(SIZE);
    const source = path.join(dir, 'source.bin');
    fs.writeFileSync(source, bytes);
    ref = await store.publish({ digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, bytes: SIZE, mediaType: MEDIA, source: { kind: 'file', path: source, handOver: true } });
    file = store.pathOf(store.objectIdOf(ref));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('an object it has just published (and verified while moving it in) is not read again', async () => {
    const read = await readDuring(() => store.assertReadable(ref));
    assert.ok(read < SIZE / 8, `read ${read} bytes`);
    // A fresh store (another process) has verified nothing: it hashes the whole object, then remembers it.
    const other = new FileObjectStore(path.join(dir, 'repo'));
    assert.ok((await readDuring(() => other.assertReadable(ref))) >= SIZE);
    assert.ok((await readDuring(() => other.assertReadable(ref))) < SIZE / 8);
  });

  it('a file changed on disk is hashed again and refused, even with its size and modification time put back', async () => {
    const st = fs.statSync(file, { bigint: true });
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, Buffer.from([0xff, 0x00, 0xff]), 0, 3, SIZE / 2);
    fs.closeSync(fd);
    // touch sets the exact nanoseconds (utimensat); only the ctime, which nobody can set, tells the change.
    const ns = st.mtimeNs % 1_000_000_000n;
    execFileSync('touch', ['-m', '-d', `@${st.mtimeNs / 1_000_000_000n}.${ns.toString().padStart(9, '0')}`, file]);
    const now = fs.statSync(file, { bigint: true });
    assert.equal(now.mtimeNs, st.mtimeNs);
    assert.equal(now.size, st.size);
    let read = 0;
    await assert.rejects(
      (async () => {
        const before = bytesRead();
        try {
          await store.assertReadable(ref);
        } finally {
          read = bytesRead() - before;
        }
      })(),
      (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'),
    );
    assert.ok(read >= SIZE / 2, 'the changed inode was read again');
  });

  it('a file replaced by another inode with the same bytes is hashed again (then remembered)', async () => {
    const copy = `${file}.copy`;
    fs.copyFileSync(file, copy);
    fs.renameSync(copy, file);
    assert.ok((await readDuring(() => store.assertReadable(ref))) >= SIZE);
    assert.ok((await readDuring(() => store.assertReadable(ref))) < SIZE / 8);
  });
});
