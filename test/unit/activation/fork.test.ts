// Fork (spec §11) over real activations: the target gets its own r1 and lineage, a re-keyed state
// identity and no activation records; source and target diverge; a source that moves on (also
// concurrently) never changes what is forked; a retried forkId — also after a crash between
// create and complete — yields one target; deleting the source leaves the target readable.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { defaultRekey, forkSession } from '../../../server/activation/fork';
import { ActivationService } from '../../../server/activation/service';
import { makaCloudIdentity } from '../../../server/activation/stateIdentity';
import { hydrateSessionBundle } from '../../../server/bundle';
import { materializeSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import type { SessionRepository } from '../../../server/repository/contract';
import { isSessionRepositoryError, SessionRepositoryError } from '../../../server/repository/errors';
import { type ActivationWorld, agentCommand, createActivationWorld, message, quietLogger } from '../../fixtures/activation/harness';
import { agentFixtureRekey } from '../../fixtures/agent/rekey';

async function tree(world: ActivationWorld, sessionId: string, revision?: string): Promise<{ root: string; notes: string; envelope: { sessionId: string; lastCommittedActivationId?: string } }> {
  const rev = revision ? await world.repo.checkoutExact({ sessionId, revision }) : await world.repo.checkoutCurrent(sessionId);
  const dir = fs.mkdtempSync(path.join(world.dir, 'fork-checkout-'));
  const bundle = await materializeSessionCheckpointV1({ objectStore: world.repo.objects, checkpoint: rev.checkpoint, destination: path.join(dir, 'b.tar.zst'), maxBytes: 1 << 30 });
  const h = await hydrateSessionBundle({ source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest }, expectedSessionId: sessionId, destinationRoot: path.join(dir, 'tree'), limits: DEFAULT_PEOPLE_LIMITS });
  return { root: h.destinationRoot, notes: fs.readFileSync(path.join(h.workspaceRoot, 'notes.md'), 'utf8'), envelope: h.manifest.envelope };
}

function history(result: { outcome?: { response?: unknown } }): string[] {
  return (result.outcome?.response as { history: string[] }).history;
}

describe('fork (real activations, file repository)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  let service: ActivationService;

  before(async () => {
    world = await createActivationWorld();
    service = new ActivationService({
      repository: world.repo,
      providers: { local: world.provider },
      log: quietLogger(),
      command: agentCommand(world.counterFile),
      scratchParent: world.dir,
      rekey: agentFixtureRekey,
    });
    assert.equal((await service.run(message('src', 's1', 'first'))).revision, 'r1');
    assert.equal((await service.run(message('src', 's2', 'second'))).revision, 'r2');
  });
  after(async () => {
    await world?.dispose();
  });

  it('forks a named revision into a new session with its own r1, lineage and re-keyed identity; source and target diverge', async () => {
    const forked = await service.fork({ forkId: 'f1', source: { sessionId: 'src', revision: 'r2' } });
    assert.equal(forked.deduplicated, false);
    assert.equal(forked.target.revision, 'r1');
    assert.notEqual(forked.target.sessionId, 'src');
    assert.deepEqual(forked.forkedFrom, { sessionId: 'src', revision: 'r2' });
    assert.equal(forked.rekey?.changed, true);
    assert.match(forked.rekey?.note ?? '', /rewrote makaSessionId .* moved state\/sessions/);
    const target = forked.target.sessionId;
    const head = await world.repo.checkoutCurrent(target);
    assert.equal(head.lastCommittedActivationId, undefined);
    assert.deepEqual(head.forkedFrom, { sessionId: 'src', revision: 'r2' });
    assert.equal(head.agentId, (await world.repo.checkoutCurrent('src')).agentId);
    const t = await tree(world, target);
    assert.deepEqual(t.envelope, { sessionId: target });
    assert.equal(t.notes, 'turn 1: first\nturn 2: second\n');
    const sourceIdentity = JSON.parse(fs.readFileSync(path.join((await tree(world, 'src')).root, 'state-identity.json'), 'utf8')).makaSessionId;
    const targetIdentity = JSON.parse(fs.readFileSync(path.join(t.root, 'state-identity.json'), 'utf8')).makaSessionId;
    assert.notEqual(targetIdentity, sourceIdentity);
    assert.equal(await world.repo.activations.get(target, 's2'), undefined, 'no activation records are copied');

    // Diverge.
    const onTarget = await service.run(message(target, 't1', 'on the fork'));
    assert.equal(onTarget.revision, 'r2');
    assert.deepEqual(history(onTarget), ['first', 'second']);
    assert.equal((onTarget.outcome?.response as { makaSessionId: string }).makaSessionId, targetIdentity);
    const onSource = await service.run(message('src', 's3', 'on the source'));
    assert.equal(onSource.revision, 'r3');
    assert.deepEqual(history(onSource), ['first', 'second']);
    assert.equal((await tree(world, target)).notes, 'turn 1: first\nturn 2: second\nturn 3: on the fork\n');
    assert.equal((await tree(world, 'src')).notes, 'turn 1: first\nturn 2: second\nturn 3: on the source\n');

    // A retried forkId is the same target, created once.
    const again = await service.fork({ forkId: 'f1', source: { sessionId: 'src', revision: 'r2' } });
    assert.equal(again.deduplicated, true);
    assert.deepEqual(again.target, forked.target);
    assert.equal((await world.repo.listSessions()).filter((s) => s.createdByForkId === 'f1').length, 1);
    await assert.rejects(service.fork({ forkId: 'f1', source: { sessionId: 'src', revision: 'r1' } }), (err) => isSessionRepositoryError(err, 'idempotency_conflict'));
  });

  it('a source that moved on, or moves during the fork, never changes the forked revision; an unretained revision is refused', async () => {
    const old = await service.fork({ forkId: 'f-old', source: { sessionId: 'src', revision: 'r1' }, targetSessionId: 'from-r1' });
    assert.equal(old.target.sessionId, 'from-r1');
    assert.equal((await tree(world, 'from-r1')).notes, 'turn 1: first\n');

    const head = (await world.repo.checkoutCurrent('src')).ref.revision;
    const expected = (await tree(world, 'src', head)).notes;
    const [raced, advanced] = await Promise.all([
      service.fork({ forkId: 'f-race', source: { sessionId: 'src', revision: head }, targetSessionId: 'raced' }),
      service.run(message('src', 's-race', 'moving on')),
    ]);
    assert.equal(advanced.commit, 'committed');
    assert.notEqual(advanced.revision, head);
    assert.deepEqual(raced.forkedFrom, { sessionId: 'src', revision: head });
    assert.equal((await tree(world, 'raced')).notes, expected, 'the named revision, not the new head');

    await assert.rejects(service.fork({ forkId: 'f-none', source: { sessionId: 'src', revision: 'r99' } }), (err) => isSessionRepositoryError(err, 'source_revision_not_available'));
    await assert.rejects(service.fork({ forkId: 'f-self', source: { sessionId: 'src', revision: 'r1' }, targetSessionId: 'src' }), (err) => isSessionRepositoryError(err, 'invalid_fork_target'));
  });

  it('the same forkId yields the same target after a crash between create and complete; deleting the source leaves targets readable', async () => {
    // A repository whose completeFork "crashes" once.
    let failed = false;
    const crashing: SessionRepository = Object.create(world.repo) as SessionRepository;
    crashing.completeFork = async (input) => {
      if (!failed) {
        failed = true;
        throw new SessionRepositoryError('io_failure', 'simulated crash before completeFork');
      }
      return world.repo.completeFork(input);
    };
    await assert.rejects(forkSession(crashing, { forkId: 'f-crash', source: { sessionId: 'src', revision: 'r2' } }, { rekey: agentFixtureRekey, scratchParent: world.dir }));
    const pending = await world.repo.claimFork({ forkId: 'f-crash', source: { sessionId: 'src', revision: 'r2' }, targetSessionId: (await world.repo.listSessions()).find((s) => s.createdByForkId === 'f-crash')?.sessionId ?? '' });
    assert.equal(pending.state, 'pending');
    const retried = await service.fork({ forkId: 'f-crash', source: { sessionId: 'src', revision: 'r2' } });
    assert.equal(retried.deduplicated, false);
    assert.equal(retried.target.revision, 'r1');
    assert.equal((await world.repo.listSessions()).filter((s) => s.createdByForkId === 'f-crash').length, 1);

    await world.repo.deleteSession('src');
    await assert.rejects(world.repo.checkoutCurrent('src'), (err) => isSessionRepositoryError(err, 'session_not_found'));
    for (const target of [retried.target.sessionId, 'from-r1', 'raced']) {
      const t = await tree(world, target);
      assert.match(t.notes, /^turn 1: first\n/);
    }
    const onTarget = await service.run(message(retried.target.sessionId, 'after-delete', 'still here'));
    assert.equal(onTarget.commit, 'committed');
  });

  it('the default re-key rewrites makaSessionId of the Maka cloud descriptor and leaves unknown media types as they are', () => {
    const base = { forkId: 'f', source: { sessionId: 's', revision: 'r1' }, targetSessionId: 't', stateRoot: '/nonexistent', workspaceRoot: '/nonexistent' };
    const maka = defaultRekey({ ...base, identity: makaCloudIdentity('maka-abc') });
    assert.ok(!(maka instanceof Promise));
    assert.equal(maka.changed, true);
    const again = defaultRekey({ ...base, identity: makaCloudIdentity('maka-abc') });
    assert.ok(!(again instanceof Promise));
    assert.deepEqual(Buffer.from(again.identity.bytes), Buffer.from(maka.identity.bytes), 'deterministic');
    const opaque = { mediaType: 'application/x-something-else', bytes: Buffer.from('opaque') };
    const other = defaultRekey({ ...base, identity: opaque });
    assert.ok(!(other instanceof Promise));
    assert.equal(other.changed, false);
    assert.equal(other.identity, opaque);
    assert.match(other.note, /left as it is/);
  });
});
