// File adapter specifics: SIGKILL before and after the state rename (the lock is left behind and
// reclaimed; a commitId retry reconciles), CAS across several processes, the process-lifetime lock,
// failing closed on a corrupt or contradictory state document (and refusing to write one), and where the repository
// lives.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { StoredSessionCheckpoint } from '../../../protocol/repository';
import { newOwnerToken } from '../../../server/repository/activationStore';
import type { SessionRepository } from '../../../server/repository/contract';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { acquireFileLock } from '../../../server/repository/fileLock';
import { defaultFileRepositoryRoot, MAKA_STATE_FILE, openFileSessionRepository, STATE_FILE } from '../../../server/repository/fileRepository';
import { resolveRepositoryLocation } from '../../../server/repository/open';
import { FILE_STATE_SCHEMA_VERSION } from '../../../server/repository/fileState';
import { publishBundle } from '../../fixtures/repository/bundles';
import { runFixture } from '../../fixtures/repository/child';
import { scratchBase } from '../../fixtures/repository/harness';

async function rejectsWith(p: Promise<unknown>, code: string): Promise<Error> {
  try {
    await p;
  } catch (err) {
    if (isSessionRepositoryError(err, code as never)) return err;
    throw new assert.AssertionError({ message: `expected ${code}, got ${String(err)}` });
  }
  throw new assert.AssertionError({ message: `expected ${code}, but it resolved` });
}

describe('file repository', function () {
  this.timeout(60_000);
  let scratch: string;
  let storageRoot: string;
  let repo: SessionRepository;
  let base: StoredSessionCheckpoint;

  beforeEach(async () => {
    scratch = fs.mkdtempSync(path.join(scratchBase(), 'ss-file-repo-'));
    storageRoot = path.join(scratch, 'repository');
    repo = await openFileSessionRepository({ storageRoot, gcGraceMs: 0 });
    base = await publishBundle(repo.objects, scratch, 'base');
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: base });
  });
  afterEach(() => {
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  const stateFile = () => path.join(storageRoot, STATE_FILE);
  const lockFile = () => `${stateFile()}.lock`;

  for (const killAt of ['before-rename', 'after-rename'] as const) {
    it(`a writer SIGKILLed ${killAt.replace('-', ' ')} leaves a readable repository; a retry reconciles`, async () => {
      const next = await publishBundle(repo.objects, scratch, 'next');
      const args = { storageRoot, sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'crash-1', killAt };
      const child = await runFixture('crashWriter.ts', [JSON.stringify(args)], { timeoutMs: 30_000 });
      assert.equal(child.signal, 'SIGKILL', `child ended with ${child.code}/${child.signal}: ${child.stdout}${child.stderr}`);
      assert.ok(fs.existsSync(lockFile()), 'the dead writer left its lock behind');

      const reopened = await openFileSessionRepository({ storageRoot, gcGraceMs: 0 });
      const head = await reopened.checkoutCurrent('s');
      assert.equal(head.ref.revision, killAt === 'before-rename' ? 'r1' : 'r2');
      if (killAt === 'before-rename') {
        assert.ok(fs.readdirSync(storageRoot).some((n) => n.startsWith(`${STATE_FILE}.`) && n.endsWith('.tmp')), 'a torn temp state file is left');
      }

      const started = Date.now();
      const retried = await reopened.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'crash-1' });
      assert.ok(Date.now() - started < 5_000, 'the stale lock was reclaimed promptly');
      assert.equal(retried.ref.revision, 'r2');
      assert.deepEqual(retried.checkpoint, next);
      assert.deepEqual(await reopened.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'crash-1' }), retried);
      assert.equal((await reopened.commit({ sessionId: 's', expectedRevision: 'r2', checkpoint: base })).ref.revision, 'r3');
      assert.equal(fs.existsSync(lockFile()), false);
      assert.deepEqual(
        fs.readdirSync(storageRoot).filter((n) => n.endsWith('.tmp') || n.includes('.owner') || n.includes('.break-')),
        [],
      );
    });
  }

  it('CAS holds across processes: 4 processes × 4 writers, every win a distinct revision, none lost', async () => {
    const cps = await Promise.all([0, 1, 2, 3].map((i) => publishBundle(repo.objects, scratch, `process-${i}`)));
    const attempts = 40;
    const children = await Promise.all(
      cps.map((checkpoint, i) =>
        runFixture('casWriter.ts', [JSON.stringify({ storageRoot, sessionId: 's', attempts, concurrency: 4, checkpoint, name: `p${i}` })], { timeoutMs: 120_000 }),
      ),
    );
    const wins: { revision: string; commitId: string; expected: string }[] = [];
    let conflicts = 0;
    for (const c of children) {
      assert.equal(c.code, 0, c.stderr);
      const report = JSON.parse(c.stdout) as { wins: typeof wins; conflicts: number };
      wins.push(...report.wins);
      conflicts += report.conflicts;
    }
    assert.equal(wins.length + conflicts, 4 * 4 * attempts);
    const head = await repo.checkoutCurrent('s');
    const headNumber = Number(head.ref.revision.slice(1));
    assert.equal(wins.length, headNumber - 1, 'every successful commit advanced the head by exactly one');
    const revisions = wins.map((w) => Number(w.revision.slice(1))).sort((a, b) => a - b);
    assert.deepEqual(revisions, Array.from({ length: headNumber - 1 }, (_, i) => i + 2), 'no revision was handed out twice');
    for (const w of wins) assert.equal(Number(w.revision.slice(1)), Number(w.expected.slice(1)) + 1);
    // Each retained revision is exactly what its winner committed.
    const byRevision = new Map(wins.map((w) => [w.revision, w.commitId]));
    for (const r of await repo.listRevisions('s')) if (r.ref.revision !== 'r1') assert.equal(r.commitId, byRevision.get(r.ref.revision));
    assert.ok(conflicts > 0, 'the writers really contended');
  });

  it('a lock whose owner was SIGKILLed is reclaimed; a live owner makes waiters time out with its pid', async () => {
    const lockPath = path.join(scratch, 'test.lock');
    let holderPid = 0;
    const holder = await runFixture('lockHolder.ts', [lockPath], {
      timeoutMs: 30_000,
      onStdout: (text, kill) => {
        if (text.includes('locked')) {
          holderPid = JSON.parse(fs.readFileSync(lockPath, 'utf8')).pid as number;
          // While the owner lives, a waiter times out and the message names it.
          void acquireFileLock(lockPath, 300).then(
            () => assert.fail('acquired a lock held by a live process'),
            (err: Error) => {
              assert.match(err.message, new RegExp(`process ${holderPid}`));
              kill();
            },
          );
        }
      },
    });
    assert.equal(holder.signal, 'SIGKILL');
    assert.ok(holderPid > 0);
    assert.ok(fs.existsSync(lockPath), 'the killed owner left its lock file');
    const lock = await acquireFileLock(lockPath, 5_000);
    await lock.release();
    assert.equal(fs.existsSync(lockPath), false);
  });

  it('in-process callers are serialized by the lock', async () => {
    const lockPath = path.join(scratch, 'serial.lock');
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        const lock = await acquireFileLock(lockPath, 10_000);
        inside++;
        maxInside = Math.max(maxInside, inside);
        await new Promise((r) => setTimeout(r, 2)); // the critical section's work: holding the lock a moment so the others contend
        inside--;
        await lock.release();
      }),
    );
    assert.equal(maxInside, 1);
  });

  describe('fails closed on a corrupt or contradictory state document', () => {
    const mutate = (fn: (doc: Record<string, unknown[]> & { schemaVersion: number }) => void) => {
      const doc = JSON.parse(fs.readFileSync(stateFile(), 'utf8')) as Record<string, unknown[]> & { schemaVersion: number };
      fn(doc);
      fs.writeFileSync(stateFile(), JSON.stringify(doc));
    };
    type Rec = Record<string, unknown>;

    it('not JSON', async () => {
      fs.writeFileSync(stateFile(), '{"schemaVersion":1,');
      await rejectsWith(openFileSessionRepository({ storageRoot }), 'integrity_mismatch');
      // An instance opened earlier refuses too, on reads and on writes.
      await rejectsWith(repo.checkoutCurrent('s'), 'integrity_mismatch');
      await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: base }), 'integrity_mismatch');
    });

    it('nextRevisionNumber ≠ head + 1', async () => {
      mutate((doc) => {
        (doc.sessions![0] as Rec).nextRevisionNumber = 5;
      });
      const err = await rejectsWith(openFileSessionRepository({ storageRoot }), 'integrity_mismatch');
      assert.match(err.message, /nextRevisionNumber/);
    });

    it('a commit receipt that contradicts its revision', async () => {
      const next = await publishBundle(repo.objects, scratch, 'next');
      await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c' });
      mutate((doc) => {
        ((doc.commits![0] as Rec).result as Rec).checkpoint = base;
      });
      await rejectsWith(repo.listSessions(), 'integrity_mismatch');
    });

    it('a missing head revision, a duplicate session, an unknown key', async () => {
      const original = fs.readFileSync(stateFile(), 'utf8');
      mutate((doc) => {
        doc.revisions = [];
      });
      await rejectsWith(openFileSessionRepository({ storageRoot }), 'integrity_mismatch');
      fs.writeFileSync(stateFile(), original);
      mutate((doc) => {
        doc.sessions!.push(doc.sessions![0]);
      });
      await rejectsWith(openFileSessionRepository({ storageRoot }), 'integrity_mismatch');
      fs.writeFileSync(stateFile(), original);
      mutate((doc) => {
        (doc.sessions![0] as Rec).head2 = 1;
      });
      await rejectsWith(openFileSessionRepository({ storageRoot }), 'integrity_mismatch');
    });

    it('a newer schema version is refused with an upgrade hint', async () => {
      mutate((doc) => {
        doc.schemaVersion = FILE_STATE_SCHEMA_VERSION + 1;
      });
      const err = await rejectsWith(openFileSessionRepository({ storageRoot }), 'io_failure');
      assert.match(err.message, /upgrade/);
    });
  });

  it('persists across reopen', async () => {
    await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: base, lastCommittedActivationId: 'act' });
    const reopened = await openFileSessionRepository({ storageRoot });
    const head = await reopened.checkoutCurrent('s');
    assert.deepEqual(head.ref, { sessionId: 's', revision: 'r2' });
    assert.equal(head.lastCommittedActivationId, 'act');
    assert.equal((fs.statSync(stateFile()).mode & 0o777).toString(8), '600');
    assert.equal((fs.statSync(storageRoot).mode & 0o777).toString(8), '700');
  });

  it('a change that would contradict the state is refused before anything is written', async () => {
    const claim = await repo.activations.claim({ sessionId: 's', activationId: 'a', requestDigest: `sha256:${'a'.repeat(64)}`, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(claim.kind, 'claimed');
    const written = fs.readFileSync(stateFile());
    // Committed without a revision and an outcome: a state no reader would accept.
    const err = await rejectsWith(
      repo.activations.update('s', 'a', claim.record.owner?.token ?? '', (r) => ({ ...r, state: 'committed' })),
      'integrity_mismatch',
    );
    assert.match(err.message, /refusing to write .*committed without a revision.*nothing was written/);
    assert.deepEqual(fs.readFileSync(stateFile()), written);
    assert.equal((await repo.activations.get('s', 'a'))?.state, 'running', 'this instance goes on from what is on disk');
    assert.equal((await (await openFileSessionRepository({ storageRoot })).activations.get('s', 'a'))?.state, 'running');
  });

  it('remembers released objects too young to delete under gc-pending/ (0700), and forgets them once collected', async () => {
    const young = await openFileSessionRepository({ storageRoot, keepRevisions: 1, gcGraceMs: 3_600_000 });
    const next = await publishBundle(young.objects, scratch, 'next');
    await young.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next });
    const pending = path.join(storageRoot, 'gc-pending');
    const released = [young.objects.objectIdOf(base.value.compatibilityBundle), young.objects.objectIdOf(base.manifest)].sort();
    assert.deepEqual(fs.readdirSync(pending).sort(), released);
    assert.equal((fs.statSync(pending).mode & 0o777).toString(8), '700');
    for (const id of released) assert.equal((fs.statSync(path.join(pending, id)).mode & 0o777).toString(8), '600');
    // A later collection past the grace period deletes them and their entries; a stray name there is left alone.
    fs.writeFileSync(path.join(pending, 'not-an-id'), '');
    assert.deepEqual(await repo.collectGarbage(), { deletedObjects: 2 });
    assert.deepEqual(fs.readdirSync(pending), ['not-an-id']);
    assert.equal((await repo.checkoutCurrent('s')).ref.revision, 'r2');
  });

  it("a directory Maka's own file repository uses is refused: nothing is written there, and gc deletes none of its objects", async () => {
    // Maka's file repository: its state document beside an objects/ directory laid out as ours.
    const maka = path.join(scratch, 'maka-repository');
    fs.mkdirSync(path.join(maka, 'objects', 'ab'), { recursive: true });
    const makaObject = path.join(maka, 'objects', 'ab', 'ab'.padEnd(64, '0'));
    fs.writeFileSync(makaObject, 'a bundle only Maka refers to', { mode: 0o600 });
    fs.writeFileSync(path.join(maka, MAKA_STATE_FILE), '{"schemaVersion":1,"sessions":[],"commits":[],"forks":[]}\n', { mode: 0o600 });
    const before = fs.readdirSync(maka).sort();
    const err = await rejectsWith(openFileSessionRepository({ storageRoot: maka, gcGraceMs: 0 }), 'io_failure');
    assert.match(err.message, /holds Maka's own file repository \(session-repository-v1\.json\).*Choose another directory/);
    assert.deepEqual(fs.readdirSync(maka).sort(), before, 'no state document of ours, no shards');

    // A repository of ours that Maka starts to use later: a collection takes none of Maka's objects for garbage.
    fs.mkdirSync(path.join(storageRoot, 'objects', 'cd'), { recursive: true });
    const stray = path.join(storageRoot, 'objects', 'cd', 'cd'.padEnd(64, '0'));
    fs.writeFileSync(stray, 'referenced by Maka', { mode: 0o600 });
    fs.writeFileSync(path.join(storageRoot, MAKA_STATE_FILE), '{}\n');
    await rejectsWith(repo.collectGarbage(), 'io_failure');
    assert.ok(fs.existsSync(stray));
    fs.rmSync(path.join(storageRoot, MAKA_STATE_FILE));
    assert.deepEqual(await repo.collectGarbage(), { deletedObjects: 1 }, 'without it, the same object is garbage');
  });

  it("opening makes the 256 object shards (0700) up front; a publish into a shard removed since makes it again", async () => {
    const objects = path.join(storageRoot, 'objects');
    const shards = fs.readdirSync(objects).filter((n) => /^[0-9a-f]{2}$/.test(n));
    assert.equal(shards.length, 256);
    assert.ok(shards.every((n) => (fs.statSync(path.join(objects, n)).mode & 0o777) === 0o700));
    // Someone removed the (empty) shards; the store still publishes, verifies and reads.
    for (const n of shards) if (fs.readdirSync(path.join(objects, n)).length === 0) fs.rmdirSync(path.join(objects, n));
    const next = await publishBundle(repo.objects, scratch, 'after-removal');
    assert.equal((await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next })).ref.revision, 'r2');
    await repo.objects.assertReadable(next.value.compatibilityBundle);
    // And the next open makes the missing ones again.
    await openFileSessionRepository({ storageRoot });
    assert.equal(fs.readdirSync(objects).filter((n) => /^[0-9a-f]{2}$/.test(n)).length, 256);
  });
});

describe('repository location', () => {
  it('defaults to $XDG_DATA_HOME/sandbox-sessions/repository, else ~/.local/share', () => {
    assert.equal(defaultFileRepositoryRoot({ XDG_DATA_HOME: '/data' }), '/data/sandbox-sessions/repository');
    assert.match(defaultFileRepositoryRoot({}), /\.local\/share\/sandbox-sessions\/repository$/);
    assert.deepEqual(resolveRepositoryLocation({ env: { XDG_DATA_HOME: '/data' } }), { kind: 'file', storageRoot: '/data/sandbox-sessions/repository' });
  });

  it('SANDBOX_SESSIONS_REPOSITORY selects a directory or a postgres URL; --repository wins', () => {
    assert.deepEqual(resolveRepositoryLocation({ env: { SANDBOX_SESSIONS_REPOSITORY: '/srv/repo' } }), { kind: 'file', storageRoot: '/srv/repo' });
    assert.deepEqual(resolveRepositoryLocation({ env: { SANDBOX_SESSIONS_REPOSITORY: 'postgres://u@h/db' } }), { kind: 'postgres', connectionString: 'postgres://u@h/db' });
    assert.deepEqual(resolveRepositoryLocation({ location: '/x', env: { SANDBOX_SESSIONS_REPOSITORY: 'postgres://u@h/db' } }), { kind: 'file', storageRoot: '/x' });
    assert.throws(() => resolveRepositoryLocation({ location: 's3://bucket' }), /postgres:\/\//);
  });
});
