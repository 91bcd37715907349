// The SessionRepository contract suite (spec §9.2, §11, plus retention), run unchanged against the
// file adapter and against a real PostgreSQL started for this file.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { StoredSessionCheckpoint } from '../../../protocol/repository';
import { materializeSessionCheckpointV1, openSessionCheckpointBundleV1, publishSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import type { SessionRepository } from '../../../server/repository/contract';
import { isSessionRepositoryError, SessionRepositoryError } from '../../../server/repository/errors';
import { type ImmutableObjectStore, objectIdFor } from '../../../server/repository/objectStore';
import { publishBundle, writeBundleFile } from '../../fixtures/repository/bundles';
import { type AdapterHarness, fileHarness, postgresHarness } from '../../fixtures/repository/harness';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';

async function rejectsWith(p: Promise<unknown>, code: string): Promise<SessionRepositoryError> {
  try {
    await p;
  } catch (err) {
    if (isSessionRepositoryError(err) && err.code === code) return err;
    throw new assert.AssertionError({ message: `expected ${code}, got ${err instanceof Error ? `${err.name}: ${(err as SessionRepositoryError).code ?? ''} ${err.message}` : String(err)}` });
  }
  throw new assert.AssertionError({ message: `expected ${code}, but it resolved` });
}

function sha256File(file: string): string {
  return `sha256:${createHash('sha256').update(fs.readFileSync(file)).digest('hex')}`;
}

function contractSuite(makeHarness: () => AdapterHarness): void {
  let h: AdapterHarness;
  let repo: SessionRepository;
  const publish = (content?: string | Uint8Array) => publishBundle(repo.objects, h.scratch, content);

  beforeEach(async () => {
    h = makeHarness();
    repo = await h.open();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('publishes and verifies bundle then manifest before a head is created (publication order)', async () => {
    const calls: string[] = [];
    const spy: ImmutableObjectStore = {
      objectIdOf: (ref) => repo.objects.objectIdOf(ref),
      publish: async (input) => {
        calls.push(`publish ${input.mediaType.split(';')[0]}`);
        return repo.objects.publish(input);
      },
      assertReadable: async (ref) => {
        calls.push(`assertReadable ${ref.mediaType.split(';')[0]}`);
        return repo.objects.assertReadable(ref);
      },
      materialize: (input) => repo.objects.materialize(input),
    };
    const checkpoint = await publishSessionCheckpointV1({ objectStore: spy, compatibilityBundle: writeBundleFile(h.scratch, 'bundle') });
    assert.deepEqual(calls, [
      'publish application/vnd.maka.session-bundle+tar',
      'assertReadable application/vnd.maka.session-bundle+tar',
      'publish application/vnd.maka.session-checkpoint-manifest+json',
      'assertReadable application/vnd.maka.session-checkpoint-manifest+json',
    ]);
    const created = await repo.createSession({ sessionId: 's', agentId: 'agent', checkpoint, lastCommittedActivationId: 'a1' });
    assert.deepEqual(created, { ref: { sessionId: 's', revision: 'r1' }, agentId: 'agent', checkpoint, lastCommittedActivationId: 'a1' });
    assert.deepEqual(await repo.checkoutCurrent('s'), created);
  });

  it('refuses a checkpoint whose objects were never published here (object_not_found) and a forged manifest ref (integrity_mismatch)', async () => {
    const other = makeHarness();
    try {
      const otherRepo = await other.open();
      const foreign = await publishBundle(otherRepo.objects, other.scratch, 'elsewhere');
      await rejectsWith(repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: foreign }), 'object_not_found');
      const good = await publish('here');
      const forged: StoredSessionCheckpoint = { manifest: good.manifest, value: { ...good.value, compatibilityBundle: foreign.value.compatibilityBundle } };
      await rejectsWith(repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: forged }), 'integrity_mismatch');
      await rejectsWith(repo.checkoutCurrent('s'), 'session_not_found');
    } finally {
      await other.dispose();
    }
  });

  it('numbers revisions r1, r2, … per session, independently, and lists them', async () => {
    const c1 = await publish('one');
    const c2 = await publish('two');
    await repo.createSession({ sessionId: 'a', agentId: 'agent', checkpoint: c1 });
    await repo.createSession({ sessionId: 'b', agentId: 'agent', checkpoint: c1 });
    const r2 = await repo.commit({ sessionId: 'a', expectedRevision: 'r1', checkpoint: c2 });
    assert.equal(r2.ref.revision, 'r2');
    assert.equal((await repo.commit({ sessionId: 'a', expectedRevision: 'r2', checkpoint: c1 })).ref.revision, 'r3');
    assert.equal((await repo.commit({ sessionId: 'b', expectedRevision: 'r1', checkpoint: c2 })).ref.revision, 'r2');
    assert.deepEqual((await repo.checkoutExact({ sessionId: 'a', revision: 'r2' })).checkpoint, c2);
    await rejectsWith(repo.checkoutExact({ sessionId: 'a', revision: 'r4' }), 'revision_not_available');
    const sessions = await repo.listSessions();
    assert.deepEqual(
      sessions.map((s) => [s.sessionId, s.head.revision, s.oldestRetained]),
      [
        ['a', 'r3', 'r1'],
        ['b', 'r2', 'r1'],
      ],
    );
    const revisions = await repo.listRevisions('a');
    assert.deepEqual(
      revisions.map((r) => [r.ref.revision, r.isHead]),
      [
        ['r3', true],
        ['r2', false],
        ['r1', false],
      ],
    );
    await rejectsWith(repo.listRevisions('nope'), 'session_not_found');
  });

  it('a concurrent commit cannot substitute the bytes a checkout returns (exact-read race)', async () => {
    const checkpoints = await Promise.all(Array.from({ length: 6 }, (_, i) => publish(`content-${i}`)));
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: checkpoints[0]! });
    const byRevision = new Map<string, StoredSessionCheckpoint>([['r1', checkpoints[0]!]]);
    let head = 'r1';
    for (let i = 1; i < 6; i++) {
      const [read, committed] = await Promise.all([
        repo.checkoutCurrent('s'),
        repo.commit({ sessionId: 's', expectedRevision: head, checkpoint: checkpoints[i]! }),
      ]);
      byRevision.set(committed.ref.revision, checkpoints[i]!);
      head = committed.ref.revision;
      // Whatever revision the read saw, it got exactly that revision's checkpoint and bytes.
      assert.deepEqual(read.checkpoint, byRevision.get(read.ref.revision));
      const dest = path.join(h.scratch, `checkout-${i}.tar.zst`);
      const out = await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: read.checkpoint, destination: dest, maxBytes: 1 << 20 });
      assert.equal(sha256File(dest), out.expectedArchiveDigest);
      const index = checkpoints.findIndex((c) => JSON.stringify(c) === JSON.stringify(read.checkpoint));
      assert.equal(fs.readFileSync(dest, 'utf8'), `content-${index}`);
    }
  });

  it('a stale CAS writer gets revision_conflict and the winner stays the head', async () => {
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: await publish('base') });
    const mine = await publish('mine');
    const theirs = await publish('theirs');
    const start = await repo.checkoutCurrent('s');
    await repo.commit({ sessionId: 's', expectedRevision: start.ref.revision, checkpoint: theirs });
    const err = await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: start.ref.revision, checkpoint: mine }), 'revision_conflict');
    assert.match(err.message, /is at r2, not r1/);
    const head = await repo.checkoutCurrent('s');
    assert.equal(head.ref.revision, 'r2');
    assert.deepEqual(head.checkpoint, theirs);
    await rejectsWith(repo.commit({ sessionId: 'missing', expectedRevision: 'r1', checkpoint: mine }), 'session_not_found');
  });

  it('checks existence and CAS before objects (error precedence)', async () => {
    const base = await publish('base');
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: base });
    await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: base });
    const other = makeHarness();
    try {
      const unpublished = await publishBundle((await other.open()).objects, other.scratch, 'x');
      await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: unpublished }), 'revision_conflict');
      await rejectsWith(repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: unpublished }), 'session_already_exists');
      await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: 'r2', checkpoint: unpublished }), 'object_not_found');
    } finally {
      await other.dispose();
    }
  });

  it('a commitId retry after a crash returns the same revision; different input is idempotency_conflict', async () => {
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: await publish('base') });
    const next = await publish('next');
    const first = await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c-1', lastCommittedActivationId: 'act-1' });
    assert.equal(first.ref.revision, 'r2');
    // The writer "crashed" before seeing the answer: a new process retries with the same input.
    const restarted = await h.open();
    const retried = await restarted.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c-1', lastCommittedActivationId: 'act-1' });
    assert.deepEqual(retried, first);
    await rejectsWith(restarted.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: await publish('other'), commitId: 'c-1' }), 'idempotency_conflict');
    await rejectsWith(restarted.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c-1' }), 'idempotency_conflict');
    const third = await restarted.commit({ sessionId: 's', expectedRevision: 'r2', checkpoint: next, commitId: 'c-2' });
    assert.equal(third.ref.revision, 'r3');
    assert.deepEqual(await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c-1', lastCommittedActivationId: 'act-1' }), first);
  });

  it('16 concurrent writers on the same expected revision: exactly one wins, no lost update over 1,000 rounds', async function () {
    this.timeout(300_000);
    const writers = 16;
    const rounds = 1000;
    // Writers reuse their checkpoints for 1,000 rounds; a realistic GC grace keeps them while unreferenced.
    repo = await h.open({ gcGraceMs: 3_600_000 });
    const checkpoints = await Promise.all(Array.from({ length: writers }, (_, i) => publish(`writer-${i}`)));
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: await publish('base') });
    let head = 'r1';
    for (let round = 0; round < rounds; round++) {
      const results = await Promise.allSettled(
        checkpoints.map((checkpoint, w) => repo.commit({ sessionId: 's', expectedRevision: head, checkpoint, commitId: `round-${round}-w${w}` })),
      );
      const won = results.flatMap((r, w) => (r.status === 'fulfilled' ? [{ w, value: r.value }] : []));
      const lost = results.filter((r) => r.status === 'rejected');
      assert.equal(won.length, 1, `round ${round}: ${won.length} winners`);
      for (const l of lost) assert.ok(isSessionRepositoryError(l.reason, 'revision_conflict'), `round ${round}: ${String(l.reason)}`);
      const winner = won[0]!;
      assert.equal(winner.value.ref.revision, `r${round + 2}`);
      head = winner.value.ref.revision;
      if (round % 97 === 0 || round === rounds - 1) {
        const current = await repo.checkoutCurrent('s');
        assert.equal(current.ref.revision, head);
        assert.deepEqual(current.checkpoint, checkpoints[winner.w]);
      }
    }
    const revisions = await repo.listRevisions('s');
    assert.equal(revisions[0]?.ref.revision, `r${rounds + 1}`);
    assert.equal(revisions.length, repo.keepRevisions);
  });

  it('fork claim → create → complete is idempotent across a crash between any two steps', async () => {
    const base = await publish('source r1');
    await repo.createSession({ sessionId: 'src', agentId: 'agent-1', checkpoint: base, lastCommittedActivationId: 'act-0' });
    await repo.commit({ sessionId: 'src', expectedRevision: 'r1', checkpoint: await publish('source r2') });
    const source = { sessionId: 'src', revision: 'r2' };

    const pending = await repo.claimFork({ forkId: 'f1', source, targetSessionId: 'dst' });
    assert.equal(pending.state, 'pending');
    assert.equal(pending.sourceAgentId, 'agent-1');
    // Crash after the claim: a new process claims again and gets the same pending record.
    const p2 = await h.open();
    assert.deepEqual(await p2.claimFork({ forkId: 'f1', source, targetSessionId: 'dst' }), pending);
    await rejectsWith(p2.claimFork({ forkId: 'f1', source, targetSessionId: 'other' }), 'idempotency_conflict');
    // The source advances meanwhile; the pending claim still materializes its captured checkpoint.
    await p2.commit({ sessionId: 'src', expectedRevision: 'r2', checkpoint: await publish('source r3') });
    const bundle = path.join(h.scratch, 'fork-source.tar.zst');
    await materializeSessionCheckpointV1({ objectStore: p2.objects, checkpoint: pending.sourceCheckpoint, destination: bundle, maxBytes: 1 << 20 });
    assert.equal(fs.readFileSync(bundle, 'utf8'), 'source r2');
    await rejectsWith(p2.completeFork({ forkId: 'f1' }), 'session_not_found');

    const targetCheckpoint = await publish('re-keyed for dst');
    const createInput = { sessionId: 'dst', agentId: 'agent-1', checkpoint: targetCheckpoint, forkedFrom: source, createdByForkId: 'f1' };
    const created = await p2.createSession(createInput);
    assert.deepEqual(created.ref, { sessionId: 'dst', revision: 'r1' });
    assert.deepEqual(created.forkedFrom, source);
    // Crash after the create: the retry returns the same r1.
    const p3 = await h.open();
    assert.deepEqual(await p3.createSession(createInput), created);
    await rejectsWith(p3.createSession({ ...createInput, checkpoint: await publish('different') }), 'session_already_exists');

    const completed = await p3.completeFork({ forkId: 'f1' });
    assert.equal(completed.state, 'completed');
    assert.deepEqual(completed.target, { sessionId: 'dst', revision: 'r1' });
    const p4 = await h.open();
    assert.deepEqual(await p4.completeFork({ forkId: 'f1' }), completed);
    assert.deepEqual(await p4.claimFork({ forkId: 'f1', source, targetSessionId: 'dst' }), completed);
    // The target has its own CAS sequence and inherits agent and lineage.
    const r2 = await p4.commit({ sessionId: 'dst', expectedRevision: 'r1', checkpoint: targetCheckpoint });
    assert.deepEqual(r2.forkedFrom, source);
    assert.equal(r2.agentId, 'agent-1');
  });

  it('concurrent creates of one session and concurrent claims of one fork: one winner, the rest consistent', async () => {
    const c = await publish('x');
    const creates = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => repo.createSession({ sessionId: 'race', agentId: `agent-${i}`, checkpoint: c })));
    const created = creates.filter((r) => r.status === 'fulfilled');
    assert.equal(created.length, 1);
    for (const r of creates) if (r.status === 'rejected') assert.ok(isSessionRepositoryError(r.reason, 'session_already_exists'), String(r.reason));
    const claims = await Promise.all(
      Array.from({ length: 8 }, () => repo.claimFork({ forkId: 'f', source: { sessionId: 'race', revision: 'r1' }, targetSessionId: 'race-fork' })),
    );
    for (const claim of claims) assert.deepEqual(claim, claims[0]);
    const input = { sessionId: 'race-fork', agentId: claims[0]!.sourceAgentId, checkpoint: c, forkedFrom: { sessionId: 'race', revision: 'r1' }, createdByForkId: 'f' };
    const targets = await Promise.all(Array.from({ length: 8 }, () => repo.createSession(input)));
    for (const t of targets) assert.deepEqual(t, targets[0]);
    const completions = await Promise.all(Array.from({ length: 8 }, () => repo.completeFork({ forkId: 'f' })));
    for (const done of completions) assert.deepEqual(done, completions[0]);
  });

  it('fork rules: target ≠ source, source revision retained, agent and claim must match, no activation id', async () => {
    const c = await publish('x');
    await repo.createSession({ sessionId: 'src', agentId: 'agent-1', checkpoint: c });
    await rejectsWith(repo.claimFork({ forkId: 'f0', source: { sessionId: 'src', revision: 'r1' }, targetSessionId: 'src' }), 'invalid_fork_target');
    await rejectsWith(repo.claimFork({ forkId: 'f0', source: { sessionId: 'src', revision: 'r2' }, targetSessionId: 'dst' }), 'source_revision_not_available');
    await rejectsWith(repo.claimFork({ forkId: 'f0', source: { sessionId: 'nope', revision: 'r1' }, targetSessionId: 'dst' }), 'source_revision_not_available');
    await repo.claimFork({ forkId: 'f1', source: { sessionId: 'src', revision: 'r1' }, targetSessionId: 'dst' });
    await repo.claimFork({ forkId: 'f2', source: { sessionId: 'src', revision: 'r1' }, targetSessionId: 'dst' });
    const forkedFrom = { sessionId: 'src', revision: 'r1' };
    await rejectsWith(repo.createSession({ sessionId: 'dst', agentId: 'agent-2', checkpoint: c, forkedFrom, createdByForkId: 'f1' }), 'fork_agent_mismatch');
    await rejectsWith(repo.createSession({ sessionId: 'dst', agentId: 'agent-1', checkpoint: c, forkedFrom, createdByForkId: 'f9' }), 'idempotency_conflict');
    await assert.rejects(repo.createSession({ sessionId: 'dst', agentId: 'agent-1', checkpoint: c, forkedFrom, createdByForkId: 'f1', lastCommittedActivationId: 'a' }), TypeError);
    await assert.rejects(repo.createSession({ sessionId: 'dst', agentId: 'agent-1', checkpoint: c, forkedFrom }), TypeError);
    await repo.createSession({ sessionId: 'dst', agentId: 'agent-1', checkpoint: c, forkedFrom, createdByForkId: 'f1' });
    // A different fork claiming the same target finds it taken.
    await rejectsWith(repo.createSession({ sessionId: 'dst', agentId: 'agent-1', checkpoint: c, forkedFrom, createdByForkId: 'f2' }), 'session_already_exists');
    await rejectsWith(repo.completeFork({ forkId: 'f2' }), 'idempotency_conflict');
    await rejectsWith(repo.completeFork({ forkId: 'unknown' }), 'idempotency_conflict');
    assert.equal((await repo.completeFork({ forkId: 'f1' })).state, 'completed');
    await assert.rejects(repo.commit({ sessionId: 'src', expectedRevision: 'one', checkpoint: c }), TypeError);
    await assert.rejects(repo.createSession({ sessionId: '', agentId: 'a', checkpoint: c }), TypeError);
    await assert.rejects(repo.createSession({ sessionId: 'x'.repeat(513), agentId: 'a', checkpoint: c }), TypeError);
    await assert.rejects(repo.createSession({ sessionId: 'bad\uD800', agentId: 'a', checkpoint: c }), TypeError);
  });

  it('an object with a flipped byte is integrity_mismatch on checkout, and never materializes', async () => {
    const checkpoint = await publish('precious bytes');
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint });
    await h.corruptObject(repo.objects.objectIdOf(checkpoint.value.compatibilityBundle));
    await rejectsWith(repo.checkoutCurrent('s'), 'integrity_mismatch');
    await rejectsWith(repo.checkoutExact({ sessionId: 's', revision: 'r1' }), 'integrity_mismatch');
    const dest = path.join(h.scratch, 'out.tar.zst');
    await rejectsWith(materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: dest, maxBytes: 1 << 20 }), 'integrity_mismatch');
    assert.equal(fs.existsSync(dest), false);
    assert.deepEqual(fs.readdirSync(h.scratch).filter((n) => n.includes('out.tar.zst')), []);
    await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint }), 'integrity_mismatch');
  });

  it('opens a bundle for the codec: the stored file where objects are files, else a verified copy; release removes only a copy', async () => {
    const checkpoint = await publish('bundle bytes');
    const copyTo = path.join(h.scratch, 'open.tar.zst');
    const inPlace = repo.objects.storedFile !== undefined;
    const opened = await openSessionCheckpointBundleV1({ objectStore: repo.objects, checkpoint, copyTo, maxBytes: 1 << 20 });
    assert.equal(fs.readFileSync(opened.path, 'utf8'), 'bundle bytes');
    assert.equal(opened.expectedArchiveDigest, checkpoint.value.compatibilityBundle.digest, 'the recorded digest, for the codec to verify against');
    assert.equal(sha256File(opened.path), opened.expectedArchiveDigest);
    assert.equal(opened.path === copyTo, !inPlace);
    await opened.release();
    assert.equal(fs.existsSync(opened.path), inPlace, 'a copy is removed, a stored object stays');
    await rejectsWith(openSessionCheckpointBundleV1({ objectStore: repo.objects, checkpoint, copyTo: path.join(h.scratch, 'small'), maxBytes: 5 }), 'quota_exceeded');
    if (inPlace) {
      // Read in place, a damaged object no longer matches the recorded digest the codec checks every byte against.
      await h.corruptObject(repo.objects.objectIdOf(checkpoint.value.compatibilityBundle));
      const damaged = await openSessionCheckpointBundleV1({ objectStore: repo.objects, checkpoint, copyTo, maxBytes: 1 << 20 });
      assert.notEqual(sha256File(damaged.path), damaged.expectedArchiveDigest);
    }
  });

  it('a handed-over bundle is moved into a file store (same inode, no copy) and verified; a store of rows copies it', async () => {
    const moves = repo.objects.storedFile !== undefined; // the file store; PostgreSQL keeps rows
    const artifact = writeBundleFile(h.scratch, 'handed over');
    const inode = fs.statSync(artifact.path).ino;
    const checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: artifact, handOverBundle: true });
    await repo.createSession({ sessionId: 'moved', agentId: 'a', checkpoint });
    const copyTo = path.join(h.scratch, 'moved-out.tar.zst');
    const opened = await openSessionCheckpointBundleV1({ objectStore: repo.objects, checkpoint: (await repo.checkoutCurrent('moved')).checkpoint, copyTo, maxBytes: 1 << 20 });
    assert.equal(fs.readFileSync(opened.path, 'utf8'), 'handed over');
    if (moves) {
      assert.equal(fs.statSync(opened.path).ino, inode, 'the object is the handed-over file itself');
      assert.equal(fs.statSync(opened.path).mode & 0o777, 0o600);
      assert.equal(fs.existsSync(artifact.path), false, 'moved, not copied');
    }
    await opened.release();

    // A handed-over file whose bytes do not match its digest publishes nothing.
    const liar = writeBundleFile(h.scratch, 'honest bytes');
    fs.writeFileSync(liar.path, 'other bytes!');
    await rejectsWith(publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: liar, handOverBundle: true }), 'integrity_mismatch');
    const { mediaType, objectRef } = checkpoint.value.compatibilityBundle;
    const liarRef = { objectRef: objectRef.slice(0, -64) + objectIdFor(liar.archiveDigest, mediaType), digest: liar.archiveDigest, bytes: liar.compressedBytes, mediaType };
    await rejectsWith(repo.objects.assertReadable(liarRef), 'object_not_found');

    // A symbolic link is never moved in: its target is copied (and verified), the link and target stay.
    const target = writeBundleFile(h.scratch, 'behind a link');
    const link = path.join(h.scratch, 'link.tar.zst');
    fs.symlinkSync(target.path, link);
    await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: { ...target, path: link }, handOverBundle: true });
    assert.ok(fs.lstatSync(link).isSymbolicLink());
    assert.equal(fs.readFileSync(target.path, 'utf8'), 'behind a link');
  });

  it('materialize never overwrites and enforces maxBytes', async () => {
    const checkpoint = await publish('0123456789');
    const dest = path.join(h.scratch, 'exists.tar.zst');
    fs.writeFileSync(dest, 'mine');
    await rejectsWith(materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: dest, maxBytes: 100 }), 'io_failure');
    assert.equal(fs.readFileSync(dest, 'utf8'), 'mine');
    await rejectsWith(materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: path.join(h.scratch, 'small'), maxBytes: 9 }), 'quota_exceeded');
    const ok = await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: path.join(h.scratch, 'ok'), maxBytes: 10 });
    assert.equal(fs.readFileSync(ok.path, 'utf8'), '0123456789');
  });

  it('round-trips arbitrary binary bytes across chunk boundaries (0 B … 3 MiB + 5)', async () => {
    const MiB = 1024 * 1024;
    for (const size of [0, 1, 255, MiB - 1, MiB, MiB + 1, 3 * MiB + 5]) {
      const content = randomBytes(size);
      const checkpoint = await publish(content);
      await repo.objects.assertReadable(checkpoint.value.compatibilityBundle);
      const dest = path.join(h.scratch, `binary-${size}`);
      await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: dest, maxBytes: size });
      assert.ok(fs.readFileSync(dest).equals(content), `${size} bytes round-trip`);
    }
  });

  it('publish refuses bytes that do not match the declared digest or size', async () => {
    const bundle = writeBundleFile(h.scratch, 'abc');
    await rejectsWith(repo.objects.publish({ digest: `sha256:${'0'.repeat(64)}`, bytes: 3, mediaType: 'x/y', source: { kind: 'file', path: bundle.path } }), 'integrity_mismatch');
    await rejectsWith(repo.objects.publish({ digest: bundle.archiveDigest, bytes: 2, mediaType: 'x/y', source: { kind: 'file', path: bundle.path } }), 'integrity_mismatch');
    await rejectsWith(repo.objects.publish({ digest: bundle.archiveDigest, bytes: 4, mediaType: 'x/y', source: { kind: 'file', path: bundle.path } }), 'integrity_mismatch');
    const ref = await repo.objects.publish({ digest: bundle.archiveDigest, bytes: 3, mediaType: 'x/y', source: { kind: 'file', path: bundle.path } });
    assert.deepEqual(await repo.objects.publish({ digest: bundle.archiveDigest, bytes: 3, mediaType: 'x/y', source: { kind: 'bytes', value: Buffer.from('abc') } }), ref);
    await rejectsWith(repo.objects.assertReadable({ ...ref, objectRef: ref.objectRef.replace(/.$/, '0') }), 'integrity_mismatch');
  });

  it('retains the last N revisions; GC removes only objects no retained revision or fork record references', async () => {
    repo = await h.open({ keepRevisions: 3 });
    const shared = await publish('shared by r1 and r6');
    const cps = [shared, await publish('r2'), await publish('r3 forked'), await publish('r4'), await publish('r5'), shared];
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: cps[0]! });
    await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: cps[1]! });
    await repo.commit({ sessionId: 's', expectedRevision: 'r2', checkpoint: cps[2]! });
    await repo.claimFork({ forkId: 'keep-r3', source: { sessionId: 's', revision: 'r3' }, targetSessionId: 'forked' });
    for (let n = 3; n < 6; n++) {
      // r1's objects were released when r4 dropped r1; the writer of r6 publishes them again (same refs).
      if (n === 5) assert.deepEqual(await publish('shared by r1 and r6'), shared);
      await repo.commit({ sessionId: 's', expectedRevision: `r${n}`, checkpoint: cps[n]! });
    }
    // Head r6; retained r4…r6.
    for (const r of ['r1', 'r2', 'r3']) await rejectsWith(repo.checkoutExact({ sessionId: 's', revision: r }), 'revision_not_available');
    for (const r of ['r4', 'r5', 'r6']) await repo.checkoutExact({ sessionId: 's', revision: r });
    await rejectsWith(repo.claimFork({ forkId: 'too-old', source: { sessionId: 's', revision: 'r2' }, targetSessionId: 'x' }), 'source_revision_not_available');
    const bundleId = (c: StoredSessionCheckpoint) => repo.objects.objectIdOf(c.value.compatibilityBundle);
    const manifestId = (c: StoredSessionCheckpoint) => repo.objects.objectIdOf(c.manifest);
    assert.equal(await h.objectExists(bundleId(cps[1]!)), false, 'r2 objects are collected');
    assert.equal(await h.objectExists(manifestId(cps[1]!)), false);
    assert.equal(await h.objectExists(bundleId(shared)), true, 'r1 objects are shared with r6');
    assert.equal(await h.objectExists(bundleId(cps[2]!)), true, 'r3 objects are pinned by the pending fork');
    // A full collection also leaves every referenced object alone, and collects an orphan.
    const orphan = await publish('published, never committed');
    await repo.collectGarbage();
    assert.equal(await h.objectExists(bundleId(orphan)), false);
    for (const r of ['r4', 'r5', 'r6']) await repo.checkoutExact({ sessionId: 's', revision: r });
    const dest = path.join(h.scratch, 'fork.tar.zst');
    const fork = await repo.claimFork({ forkId: 'keep-r3', source: { sessionId: 's', revision: 'r3' }, targetSessionId: 'forked' });
    await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: fork.sourceCheckpoint, destination: dest, maxBytes: 1000 });
    assert.equal(fs.readFileSync(dest, 'utf8'), 'r3 forked');
    // Deleting the session releases its objects (but not the fork's) and retires its id.
    assert.deepEqual(await repo.deleteSession('s'), { sessionId: 's', deletedRevisions: 3 });
    assert.equal(await h.objectExists(bundleId(shared)), false);
    assert.equal(await h.objectExists(bundleId(cps[2]!)), true);
    await rejectsWith(repo.checkoutCurrent('s'), 'session_not_found');
    await rejectsWith(repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: cps[2]! }), 'session_already_exists');
    await rejectsWith(repo.deleteSession('s'), 'session_not_found');
  });

  it('objects of revisions dropped while too young to delete are collected by a later commit once old enough', async () => {
    const graceMs = 2_000;
    repo = await h.open({ keepRevisions: 2, gcGraceMs: graceMs });
    const cps: StoredSessionCheckpoint[] = [];
    for (let i = 0; i < 6; i++) cps.push(await publish(`young ${i}`));
    const publishedBy = Date.now();
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: cps[0]! });
    for (let n = 1; n < 6; n++) await repo.commit({ sessionId: 's', expectedRevision: `r${n}`, checkpoint: cps[n]! });
    const ids = (c: StoredSessionCheckpoint) => [repo.objects.objectIdOf(c.value.compatibilityBundle), repo.objects.objectIdOf(c.manifest)];
    // r1…r4 were dropped within their grace period: still stored.
    for (const c of cps.slice(0, 4)) for (const id of ids(c)) assert.equal(await h.objectExists(id), true, 'too young to delete at the drop');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, publishedBy + graceMs + 200 - Date.now())));
    // The next commit drops r5 and collects what earlier drops left.
    await repo.commit({ sessionId: 's', expectedRevision: 'r6', checkpoint: await publish('young 6') });
    for (const c of cps.slice(0, 5)) for (const id of ids(c)) assert.equal(await h.objectExists(id), false, 'collected once old enough');
    for (const id of ids(cps[5]!)) assert.equal(await h.objectExists(id), true, 'r6 is retained');
  });

  it('GC respects the grace period for freshly published objects', async () => {
    repo = await h.open({ gcGraceMs: 3_600_000 });
    const fresh = await publish('fresh');
    assert.deepEqual(await repo.collectGarbage(), { deletedObjects: 0 });
    assert.equal(await h.objectExists(repo.objects.objectIdOf(fresh.value.compatibilityBundle)), true);
  });

  it('a commit whose objects were collected between verification and CAS fails closed (object_not_found)', async () => {
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: await publish('base') });
    const orphan = await publish('will be collected');
    await repo.collectGarbage();
    await rejectsWith(repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: orphan }), 'object_not_found');
    // Publishing again heals it.
    const again = await publish('will be collected');
    assert.equal((await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: again })).ref.revision, 'r2');
  });
}

describe('SessionRepository contract: file adapter', function () {
  contractSuite(() => fileHarness());
});

describe('SessionRepository contract: postgres adapter', function () {
  let server: PostgresServer | undefined;
  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
  });
  after(async function () {
    this.timeout(60_000);
    await server?.stop();
  });
  contractSuite(() => {
    if (!server) throw new Error('the PostgreSQL test server did not start');
    return postgresHarness(server.url);
  });
});
