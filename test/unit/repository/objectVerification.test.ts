// The file object store does not hash an object again that it has already hashed while its file is the same,
// unchanged inode (issue 25: an activation's commit and the next checkout re-read a 60 MB bundle three times) —
// and that never weakens the check: a file changed in any way is hashed again and refused when it differs. The
// PostgreSQL store does the same by the row versions of the object's chunks.
// Bytes read are observed through /proc/self/io (rchar: every read(2) of this process, thread pool included).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { SessionRepository } from '../../../server/repository/contract';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { FileObjectStore } from '../../../server/repository/fileObjectStore';
import { PostgresObjectStore } from '../../../server/repository/postgresObjectStore';
import { openPostgresSessionRepository } from '../../../server/repository/postgresRepository';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';

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

// The same for PostgreSQL: what this process verified is remembered by the row versions of the object's chunks (their
// count and xmin), which any change to a chunk replaces. Chunk reads are observed as the queries that fetch `data`.
describe('postgres object store: verification remembered per unchanged chunk rows', function () {
  this.timeout(60_000);
  const PG_SIZE = 3 * 1024 * 1024 + 5; // four chunks
  let server: PostgresServer;
  let schemas = 0;
  let schema: string;
  let repo: SessionRepository;
  let pool: pg.Pool;
  let dataReads: number;
  let dir: string;

  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
  });
  after(async () => {
    await server?.stop();
  });
  beforeEach(async () => {
    schema = `verify${++schemas}`;
    repo = await openPostgresSessionRepository({ connectionString: server.url(schema) });
    pool = new pg.Pool({ connectionString: server.url(), max: 2 });
    dataReads = 0;
    const query = pool.query.bind(pool) as (text: string, values: unknown[]) => Promise<unknown>;
    (pool as unknown as { query: typeof query }).query = (text, values) => {
      if (/SELECT seq, data FROM/.test(text)) dataReads++;
      return query(text, values);
    };
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'object-verify-pg-'));
  });
  afterEach(async () => {
    await repo.close();
    await pool.end();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const storeOnPool = () => new PostgresObjectStore(pool, `"${schema}"`);

  async function published(store: PostgresObjectStore): Promise<Awaited<ReturnType<PostgresObjectStore['publish']>>> {
    const bytes = randomBytes(PG_SIZE);
    const source = path.join(dir, 'source.bin');
    fs.writeFileSync(source, bytes);
    return store.publish({ digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, bytes: PG_SIZE, mediaType: MEDIA, source: { kind: 'file', path: source } });
  }

  it('an object it has just published is not read again; another instance reads it once, then remembers', async () => {
    const store = storeOnPool();
    const ref = await published(store);
    await store.assertReadable(ref);
    await store.assertReadable(ref);
    assert.equal(dataReads, 0, 'verified while it was uploaded: its chunks are not read again');
    const other = storeOnPool();
    await other.assertReadable(ref);
    assert.ok(dataReads > 0, 'a store that has verified nothing reads the chunks');
    const after = dataReads;
    await other.assertReadable(ref);
    assert.equal(dataReads, after, 'then remembers them');
  });

  it('a chunk changed in place is read again and refused; put back, it is read again and accepted', async () => {
    const store = storeOnPool();
    const ref = await published(store);
    const id = store.objectIdOf(ref);
    const flip = `UPDATE "${schema}".object_chunks SET data = set_byte(data, 7, get_byte(data, 7) # 255) WHERE object_id = $1 AND seq = 2`;
    await pool.query(flip, [id]);
    await assert.rejects(store.assertReadable(ref), (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'));
    assert.ok(dataReads > 0, 'the changed rows were read');
    await assert.rejects(store.assertReadable(ref), (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'), 'and stays refused');
    await pool.query(flip, [id]); // the same bytes again, in new row versions
    const before = dataReads;
    await store.assertReadable(ref);
    assert.ok(dataReads > before, 'rows with the same bytes but new versions are read again');
    const then = dataReads;
    await store.assertReadable(ref);
    assert.equal(dataReads, then, 'then remembered');
    // A chunk deleted: refused without a remembered answer.
    await pool.query(`DELETE FROM "${schema}".object_chunks WHERE object_id = $1 AND seq = 3`, [id]);
    await assert.rejects(store.assertReadable(ref), (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'));
  });
});
