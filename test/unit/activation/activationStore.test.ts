// The activation store (dedupe table) and the per-Session lease, run unchanged against the file
// adapter and a real PostgreSQL: claim/dedupe/takeover, ownership, lease exclusion and expiry, the lease taken with a
// claim and given back by the commit that marks the activation committed (one write each),
// concurrent claims from several repository instances, forgetting all but a Session's newest finished
// records, and the file state migration from v1.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { newOwnerToken } from '../../../server/repository/activationStore';
import type { SessionRepository } from '../../../server/repository/contract';
import { openFileSessionRepository, STATE_FILE } from '../../../server/repository/fileRepository';
import { type AdapterHarness, fileHarness, postgresHarness } from '../../fixtures/repository/harness';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';
import { clockPast } from '../../fixtures/clock';
import { publishBundle } from '../../fixtures/repository/bundles';

const DIGEST_A = `sha256:${'a'.repeat(64)}`;
const DIGEST_B = `sha256:${'b'.repeat(64)}`;

function storeSuite(makeHarness: () => AdapterHarness): void {
  let h: AdapterHarness;
  let repo: SessionRepository;
  beforeEach(async () => {
    h = makeHarness();
    repo = await h.open();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('claims a new id, reports a live owner as in progress, a different stimulus as a conflict', async () => {
    const t1 = newOwnerToken();
    const first = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: t1, ttlMs: 60_000 });
    assert.equal(first.kind, 'claimed');
    assert.equal(first.record.attempt, 1);
    assert.equal(first.record.state, 'running');
    const again = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(again.kind, 'in_progress');
    const other = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_B, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(other.kind, 'conflict');
    // The same id in another session is another activation.
    const elsewhere = await repo.activations.claim({ sessionId: 's2', activationId: 'a1', requestDigest: DIGEST_B, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(elsewhere.kind, 'claimed');
  });

  it('a committed id returns the stored record; an aborted or expired one is taken over with attempt + 1', async () => {
    const t1 = newOwnerToken();
    await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: t1, ttlMs: 60_000 });
    const aborted = await repo.activations.update('s', 'a1', t1, (r) => ({ ...r, state: 'aborted', error: { code: 'sandbox_lost', message: 'gone' } }));
    assert.equal(aborted?.state, 'aborted');
    const t2 = newOwnerToken();
    const retry = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: t2, ttlMs: 1 });
    assert.equal(retry.kind, 'claimed');
    assert.equal(retry.record.attempt, 2);
    assert.equal(retry.kind === 'claimed' ? retry.previous?.state : undefined, 'aborted');
    assert.equal(retry.record.error, undefined);
    // t1 no longer owns it: its updates are refused.
    assert.equal(await repo.activations.update('s', 'a1', t1, (r) => r), undefined);
    // t2's 1 ms claim expires as the clock passes its expiresAt.
    await clockPast(Date.parse(retry.record.owner?.expiresAt ?? ''));
    const t3 = newOwnerToken();
    const takeover = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: t3, ttlMs: 60_000 });
    assert.equal(takeover.kind, 'claimed', 'an expired owner is taken over');
    assert.equal(takeover.record.attempt, 3);
    const committed = await repo.activations.update('s', 'a1', t3, (r) => ({
      ...r,
      state: 'committed',
      revision: 'r2',
      outcome: { type: 'outcome', status: 'completed' },
    }));
    assert.equal(committed?.state, 'committed');
    const dedupe = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(dedupe.kind, 'committed');
    assert.equal(dedupe.record.revision, 'r2');
    assert.equal(await repo.activations.update('s', 'a1', t3, (r) => ({ ...r, state: 'aborted' })), undefined, 'a committed record is final');
    // Survives reopening (another process would see the same).
    const reopened = await h.open();
    assert.equal((await reopened.activations.get('s', 'a1'))?.state, 'committed');
  });

  it('the lease admits one holder; heartbeat extends it; release and expiry free it', async () => {
    const t1 = newOwnerToken();
    const t2 = newOwnerToken();
    const a = await repo.activations.acquireLease({ sessionId: 's', activationId: 'a1', token: t1, ttlMs: 60_000 });
    assert.equal(a.acquired, true);
    const b = await repo.activations.acquireLease({ sessionId: 's', activationId: 'a2', token: t2, ttlMs: 60_000 });
    assert.equal(b.acquired, false);
    assert.equal(b.acquired ? undefined : b.holder.activationId, 'a1');
    assert.deepEqual(await repo.activations.heartbeat({ sessionId: 's', activationId: 'a1', token: t1, ttlMs: 1, lease: true }), { activation: false, lease: true });
    // The 1 ms lease expires as the clock passes its expiresAt.
    await clockPast(Date.parse((await repo.activations.getLease('s'))?.owner.expiresAt ?? ''));
    const c = await repo.activations.acquireLease({ sessionId: 's', activationId: 'a2', token: t2, ttlMs: 60_000 });
    assert.equal(c.acquired, true, 'an expired lease is taken over');
    assert.deepEqual(await repo.activations.heartbeat({ sessionId: 's', activationId: 'a1', token: t1, ttlMs: 60_000, lease: true }), { activation: false, lease: false });
    await repo.activations.releaseLease({ sessionId: 's', token: t1 });
    assert.equal((await repo.activations.getLease('s'))?.activationId, 'a2', 'a former holder cannot release it');
    await repo.activations.releaseLease({ sessionId: 's', token: t2 });
    assert.equal(await repo.activations.getLease('s'), undefined);
  });

  it('a claim takes a free lease in the same write, not a held one; the commit that finishes it marks it and gives the lease back', async () => {
    const outcome = { type: 'outcome', status: 'completed', response: 'done' };
    const t1 = newOwnerToken();
    const first = await repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest: DIGEST_A, token: t1, ttlMs: 60_000, lease: true });
    assert.equal(first.kind === 'claimed' ? first.lease?.activationId : undefined, 'a1', 'the free lease came with the claim');
    assert.equal((await repo.activations.getLease('s'))?.owner.token, t1);
    // Another activation of the session: its claim succeeds, the lease stays with a1.
    const t2 = newOwnerToken();
    const second = await repo.activations.claim({ sessionId: 's', activationId: 'a2', requestDigest: DIGEST_A, token: t2, ttlMs: 60_000, lease: true });
    assert.equal(second.kind, 'claimed');
    assert.equal(second.kind === 'claimed' ? second.lease : 'not claimed', undefined, 'a held lease is not taken');
    assert.equal((await repo.activations.getLease('s'))?.owner.token, t1);

    // The session's first revision, created by a1 and marking it in the same write.
    const r1 = await repo.createSession({ sessionId: 's', agentId: 'agent', checkpoint: await publishBundle(repo.objects, h.scratch), lastCommittedActivationId: 'a1', activation: { activationId: 'a1', token: t1, outcome } });
    assert.equal(r1.ref.revision, 'r1');
    const a1 = await repo.activations.get('s', 'a1');
    assert.deepEqual([a1?.state, a1?.revision, a1?.outcome, a1?.owner], ['committed', 'r1', outcome, undefined]);
    assert.equal(await repo.activations.getLease('s'), undefined, 'the lease went with the commit');

    // A commit finishing an activation that is no longer this attempt's writes nothing: no revision, no record change.
    const t3 = newOwnerToken();
    const checkpoint = await publishBundle(repo.objects, h.scratch);
    await assert.rejects(
      repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint, lastCommittedActivationId: 'a2', commitId: 'c2', activation: { activationId: 'a2', token: t3, outcome } }),
      (err: Error & { code?: string }) => err.code === 'idempotency_conflict' && /no longer this attempt's/.test(err.message),
    );
    assert.equal((await repo.checkoutCurrent('s')).ref.revision, 'r1', 'nothing was committed');
    assert.equal((await repo.activations.get('s', 'a2'))?.state, 'running');
    // The mark must name the revision's lastCommittedActivationId.
    await assert.rejects(repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint, lastCommittedActivationId: 'a1', activation: { activationId: 'a2', token: t2, outcome } }), TypeError);

    // a2 took the lease meanwhile (another holder's is left alone by the commit), then commits as its owner.
    assert.equal((await repo.activations.acquireLease({ sessionId: 's', activationId: 'a2', token: t2, ttlMs: 60_000 })).acquired, true);
    const r2 = await repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint, lastCommittedActivationId: 'a2', commitId: 'c2', activation: { activationId: 'a2', token: t2, outcome } });
    assert.equal(r2.ref.revision, 'r2');
    const reopened = await h.open();
    assert.equal(await reopened.activations.getLease('s'), undefined, 'the release was stored with the commit');
    assert.deepEqual([(await reopened.activations.get('s', 'a2'))?.state, (await reopened.activations.get('s', 'a2'))?.revision], ['committed', 'r2']);
    // A claim without `lease` never takes one.
    const third = await repo.activations.claim({ sessionId: 's', activationId: 'a3', requestDigest: DIGEST_A, token: newOwnerToken(), ttlMs: 60_000 });
    assert.equal(third.kind === 'claimed' ? third.lease : 'not claimed', undefined);
    assert.equal(await repo.activations.getLease('s'), undefined);
  });

  it("remembers a Session's newest finished activations only; running ones and other Sessions' are kept", async () => {
    const small = await h.open({ finishedActivationsKept: 3 });
    const claim = (sessionId: string, activationId: string, requestDigest = DIGEST_A) =>
      small.activations.claim({ sessionId, activationId, requestDigest, token: newOwnerToken(), ttlMs: 60_000 });
    const finish = async (sessionId: string, activationId: string, state: 'committed' | 'aborted') => {
      const claimed = await claim(sessionId, activationId);
      assert.equal(claimed.kind, 'claimed');
      const token = claimed.kind === 'claimed' ? (claimed.record.owner?.token ?? '') : '';
      const done = await small.activations.update(sessionId, activationId, token, (r) => ({ ...r, state, ...(state === 'committed' ? { revision: 'r2', outcome: { type: 'outcome', status: 'completed' } } : {}) }));
      assert.equal(done?.state, state);
    };
    // Finished in this order; a later update has a later (or, within a millisecond, equal) updatedAt.
    await finish('other', 'o1', 'committed');
    const running = await claim('s', 'still-running');
    assert.equal(running.kind, 'claimed');
    const ids = ['f1', 'f2', 'f3', 'f4', 'f5'];
    for (const [i, id] of ids.entries()) {
      await finish('s', id, i === 1 ? 'aborted' : 'committed');
      await clockPast(Date.now());
    }
    // f1 and f2 are forgotten; f3–f5 answer retries as before.
    assert.equal(await small.activations.get('s', 'f1'), undefined);
    assert.equal(await small.activations.get('s', 'f2'), undefined);
    for (const id of ['f3', 'f4', 'f5']) assert.equal((await claim('s', id)).kind, 'committed', `${id} is remembered`);
    assert.equal((await claim('s', 'f4', DIGEST_B)).kind, 'conflict', 'a remembered id with another stimulus is still a conflict');
    // A forgotten id is a new activation (the one retry rule a forgotten turn can meet).
    const again = await claim('s', 'f1');
    assert.equal(again.kind, 'claimed');
    assert.equal(again.record.attempt, 1);
    // The running record and the other Session's finished one are untouched; so is a reopened view of the same store.
    const reopened = await h.open();
    assert.equal((await reopened.activations.get('s', 'still-running'))?.state, 'running');
    assert.equal((await reopened.activations.get('other', 'o1'))?.state, 'committed');
    assert.equal((await reopened.activations.get('s', 'f2')), undefined);
  });

  it('concurrent claims of one id from separate repository instances: exactly one wins', async () => {
    const repos = [repo, await h.open(), await h.open(), await h.open()];
    const results = await Promise.all(
      repos.flatMap((r) =>
        [0, 1].map(() => r.activations.claim({ sessionId: 's', activationId: 'race', requestDigest: DIGEST_A, token: newOwnerToken(), ttlMs: 60_000 })),
      ),
    );
    assert.equal(results.filter((r) => r.kind === 'claimed').length, 1);
    assert.equal(results.filter((r) => r.kind === 'in_progress').length, results.length - 1);
    const leases = await Promise.all(
      repos.map((r, i) => r.activations.acquireLease({ sessionId: 's', activationId: `l${i}`, token: newOwnerToken(), ttlMs: 60_000 })),
    );
    assert.equal(leases.filter((l) => l.acquired).length, 1);
  });
}

describe('activation store: file adapter', function () {
  storeSuite(() => fileHarness());

  it('migrates a version-1 state document (no activations) and keeps its sessions', async () => {
    const h = fileHarness();
    try {
      const root = path.join(h.scratch, 'repository');
      fs.mkdirSync(root, { recursive: true });
      fs.writeFileSync(path.join(root, STATE_FILE), JSON.stringify({ schemaVersion: 1, sessions: [], revisions: [], commits: [], forks: [], tombstones: [] }) + '\n');
      const repo = await openFileSessionRepository({ storageRoot: root });
      const claim = await repo.activations.claim({ sessionId: 's', activationId: 'a', requestDigest: DIGEST_A, token: newOwnerToken(), ttlMs: 1000 });
      assert.equal(claim.kind, 'claimed');
      const doc = JSON.parse(fs.readFileSync(path.join(root, STATE_FILE), 'utf8')) as { schemaVersion: number; activations: unknown[] };
      assert.equal(doc.schemaVersion, 2);
      assert.equal(doc.activations.length, 1);
      await repo.close();
    } finally {
      await h.dispose();
    }
  });
});

describe('activation store: postgres adapter', function () {
  let server: PostgresServer | undefined;
  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
  });
  after(async function () {
    this.timeout(60_000);
    await server?.stop();
  });
  storeSuite(() => {
    if (!server) throw new Error('the PostgreSQL test server did not start');
    return postgresHarness(server.url);
  });
});
