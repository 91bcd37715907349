// Seed 000's validation sequence as tests, on the real local gateway with real processes and the
// file repository: fresh-sandbox E2E, dedupe without invoking the agent, a sandbox killed before
// commit, a CAS loser, serialized concurrent activations, agent failures that commit nothing, and
// outcomes that do commit.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { ActivationEvent } from '../../../protocol/activation';
import { keptTreeName } from '../../../server/activation/keptSessionTrees';
import { newOwnerToken } from '../../../server/repository/activationStore';
import { encodeJcs } from '../../../server/repository/jcs';
import { hydrateSessionBundle } from '../../../server/bundle';
import { materializeSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { type ActivationWorld, createActivationWorld, message } from '../../fixtures/activation/harness';
import { clockPast } from '../../fixtures/clock';
import { until } from '../../fixtures/waits';

async function checkoutTree(world: ActivationWorld, sessionId: string, revision?: string): Promise<string> {
  const rev = revision ? await world.repo.checkoutExact({ sessionId, revision }) : await world.repo.checkoutCurrent(sessionId);
  const dir = fs.mkdtempSync(path.join(world.dir, 'checkout-'));
  const bundle = await materializeSessionCheckpointV1({ objectStore: world.repo.objects, checkpoint: rev.checkpoint, destination: path.join(dir, 'b.tar.zst'), maxBytes: 1 << 30 });
  const h = await hydrateSessionBundle({ source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest }, expectedSessionId: sessionId, destinationRoot: path.join(dir, 'tree'), limits: DEFAULT_PEOPLE_LIMITS });
  return h.destinationRoot;
}

async function sandboxNames(world: ActivationWorld): Promise<string[]> {
  return (await world.provider.list({})).map((s) => s.ref.name);
}

function response(result: { outcome?: { response?: unknown } }): { text: string; turn: number; history: string[]; makaSessionId: string } {
  return result.outcome?.response as { text: string; turn: number; history: string[]; makaSessionId: string };
}

describe('activation runner (real local gateway, fresh sandboxes)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;

  before(async () => {
    world = await createActivationWorld();
  });
  after(async () => {
    await world?.dispose();
  });

  it('fresh-sandbox E2E: create → activate → commit → sandbox gone → activate in another fresh sandbox sees state and files; a retry is deduplicated', async () => {
    const runner = world.runner();
    const events: ActivationEvent[] = [];
    const phases: string[] = [];
    const first = await runner.run(message('e2e', 'a1', 'hello'), { onEvent: (e) => events.push(e), onProgress: (p) => phases.push(p) });
    assert.equal(first.commit, 'committed', JSON.stringify(first));
    assert.equal(first.revision, 'r1');
    assert.equal(first.deduplicated, false);
    assert.equal(first.outcome?.status, 'completed');
    assert.deepEqual(
      events.map((e) => e.type),
      ['start', 'runtime_event', 'runtime_event', 'outcome'],
    );
    assert.equal(response(first).turn, 1);
    assert.deepEqual(await sandboxNames(world), [], 'the first sandbox is gone');
    // The agent has exited: the sandbox's directory is packed in place, without a snapshot copy.
    assert.deepEqual(phases, ['admission', 'checkout', 'sandbox', 'hydrate', 'agent', 'download', 'pack', 'commit', 'done', 'cleanup']);

    const second = await runner.run(message('e2e', 'a2', 'again'));
    assert.equal(second.commit, 'committed');
    assert.equal(second.revision, 'r2');
    const r = response(second);
    assert.equal(r.turn, 2);
    assert.deepEqual(r.history, ['hello'], 'the agent saw the first turn');
    assert.equal(r.makaSessionId, response(first).makaSessionId, 'the Maka session id was carried by the identity descriptor');
    assert.deepEqual(await sandboxNames(world), []);

    const tree = await checkoutTree(world, 'e2e');
    assert.equal(fs.readFileSync(path.join(tree, 'workspace/notes.md'), 'utf8'), 'turn 1: hello\nturn 2: again\n');
    assert.equal(JSON.parse(fs.readFileSync(path.join(tree, 'state-identity.json'), 'utf8')).makaSessionId, r.makaSessionId);
    const head = await world.repo.checkoutCurrent('e2e');
    assert.equal(head.lastCommittedActivationId, 'a2');

    // Retrying a committed id: the stored outcome, the agent is not invoked.
    const before = world.invocations().length;
    const retryEvents: ActivationEvent[] = [];
    const retry = await runner.run(message('e2e', 'a2', 'again'), { onEvent: (e) => retryEvents.push(e) });
    assert.equal(retry.deduplicated, true);
    assert.equal(retry.revision, 'r2');
    assert.deepEqual(retry.outcome, second.outcome);
    assert.equal(world.invocations().length, before, 'the agent was not invoked');
    assert.equal(retryEvents.length, 0);
    assert.equal((await world.repo.checkoutCurrent('e2e')).ref.revision, 'r2');
    assert.deepEqual(world.invocations(), ['a1', 'a2']);
  });

  it('the sandbox is destroyed while the session is committed, and is gone when the run returns', async () => {
    const runner = world.runner();
    assert.equal((await runner.run(message('overlap', 'o1', 'first'))).commit, 'committed');
    const provider = world.provider;
    const repo = world.repo;
    const deleteSandbox = provider.delete.bind(provider);
    const commit = repo.commit.bind(repo);
    let calledBeforeCommit: boolean | undefined;
    let deletedAfterCommit = false;
    let deletionStarted!: () => void;
    const deletionStart = new Promise<void>((resolve) => (deletionStarted = resolve));
    // Each side waits for the other, so the two can only finish if they overlap: the commit of r2 is held until the
    // deletion has started (a runner that deleted only after committing would fail here), and the deletion waits
    // until r2 is committed (one that committed only after deleting would never get there); the run must still
    // wait for the deletion before it returns.
    repo.commit = async (input) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the commit waited 30 s for the deletion to start: they do not overlap')), 30_000);
      });
      try {
        await Promise.race([deletionStart, late]);
      } finally {
        clearTimeout(timer);
      }
      return commit(input);
    };
    provider.delete = async (ref) => {
      calledBeforeCommit = (await repo.checkoutCurrent('overlap')).ref.revision === 'r1';
      deletionStarted();
      await until('r2 is committed while the sandbox is being deleted', async () => (await repo.checkoutCurrent('overlap')).ref.revision === 'r2', 30_000);
      deletedAfterCommit = true;
      return deleteSandbox(ref);
    };
    const phases: string[] = [];
    try {
      const second = await runner.run(message('overlap', 'o2', 'second'), { onProgress: (p) => phases.push(p) });
      assert.equal(second.commit, 'committed', JSON.stringify(second));
      assert.equal(second.revision, 'r2');
    } finally {
      provider.delete = deleteSandbox;
      repo.commit = commit;
    }
    assert.equal(calledBeforeCommit, true, 'the deletion started before the commit was in (they overlap)');
    assert.ok(deletedAfterCommit);
    assert.deepEqual(await sandboxNames(world), [], 'the sandbox is gone when the run returns');
    assert.deepEqual(phases.slice(-3), ['commit', 'done', 'cleanup']);
  });

  it('moves the session into a local sandbox through its directory, and through the gateway when there is none: same turns either way', async () => {
    const provider = world.provider;
    const original = provider.hostDirectory.bind(provider);
    const placed: string[] = [];
    try {
      provider.hostDirectory = async (ref) => {
        const dir = await original(ref);
        if (dir !== undefined) placed.push(dir);
        return dir;
      };
      const runner = world.runner();
      const how: string[] = [];
      const out: string[] = [];
      const onProgress = (phase: string, text?: string): void => void (phase === 'hydrate' ? how.push(text ?? '') : phase === 'download' && out.push(text ?? ''));
      assert.equal((await runner.run(message('paths', 'p1', 'by directory'), { onProgress })).commit, 'committed');
      assert.equal(placed.length, 1, 'the local sandbox offered its directory');
      assert.deepEqual(how, ["hydrating the session in the sandbox's directory"]);
      assert.ok(!fs.existsSync(placed[0] as string), 'the sandbox (and its directory) is gone afterwards');

      provider.hostDirectory = async () => undefined; // as for a sandbox on a cluster
      const second = await runner.run(message('paths', 'p2', 'by gateway'), { onProgress });
      assert.equal(second.commit, 'committed');
      // No directory here: the image has tar and zstd, so the bundle goes in as one file, unpacked by tar.
      assert.deepEqual(how.slice(1), ['uploading the session bundle as one file and unpacking it with tar in the sandbox']);
      assert.deepEqual(out.slice(-1), ['packing state and workspace with tar in the sandbox and downloading them as one file']);
      assert.deepEqual(response(second).history, ['by directory'], 'the turn placed by directory reached the gateway-fed turn');

      provider.hostDirectory = original;
      const third = await runner.run(message('paths', 'p3', 'by directory again'));
      assert.deepEqual(response(third).history, ['by directory', 'by gateway']);
      const tree = await checkoutTree(world, 'paths');
      assert.equal(fs.readFileSync(path.join(tree, 'workspace/notes.md'), 'utf8'), 'turn 1: by directory\nturn 2: by gateway\nturn 3: by directory again\n');
    } finally {
      provider.hostDirectory = original;
    }
  });

  it("keeps the packed tree for the session's next activation here: taken when it is that revision, unchanged; else hydrated", async () => {
    const runner = world.runner();
    const how: string[] = [];
    const onProgress = (phase: string, text?: string): void => void (phase === 'hydrate' && how.push(text ?? ''));
    const keptTree = path.join(world.stateDir, 'kept-sessions', keptTreeName('kept'));
    assert.equal((await runner.run(message('kept', 'keep1', 'one'), { onProgress })).commit, 'committed');
    assert.ok(fs.existsSync(keptTree), 'the tree the first activation packed is kept');
    const second = await runner.run(message('kept', 'keep2', 'two'), { onProgress });
    assert.equal(second.commit, 'committed');
    assert.deepEqual(response(second).history, ['one']);
    assert.equal(how[1], 'using the session tree the last activation on this machine left (unchanged since)');

    // A kept tree changed by anyone is not used: the revision is hydrated, and the change is nowhere.
    fs.appendFileSync(path.join(keptTree, 'session/workspace/notes.md'), 'forged\n');
    const third = await runner.run(message('kept', 'keep3', 'three'), { onProgress });
    assert.deepEqual(response(third).history, ['one', 'two']);
    assert.equal(how[2], "hydrating the session in the sandbox's directory");
    assert.equal(fs.readFileSync(path.join(await checkoutTree(world, 'kept'), 'workspace/notes.md'), 'utf8'), 'turn 1: one\nturn 2: two\nturn 3: three\n');

    // Another writer moved the session on (back to r1's bundle): the kept tree of r3 is not that revision.
    const r1 = await world.repo.checkoutExact({ sessionId: 'kept', revision: 'r1' });
    await world.repo.commit({ sessionId: 'kept', expectedRevision: 'r3', checkpoint: r1.checkpoint, lastCommittedActivationId: 'outside' });
    const fourth = await runner.run(message('kept', 'keep4', 'four'), { onProgress });
    assert.deepEqual(response(fourth).history, ['one'], 'the agent saw the current revision, not the kept tree');
    assert.equal(how[3], "hydrating the session in the sandbox's directory");
    assert.ok(fs.existsSync(keptTree), "the fourth turn's tree is kept in its place");
  });

  it('a symbolic link left in a local sandbox takes the gateway path back, as on a cluster: it returns as the file it names', async () => {
    const how: string[] = [];
    const result = await world.runner().run(message('linked', 'l1', '!link latest'), {
      onProgress: (phase, text) => void (phase === 'download' && how.push(text ?? '')),
    });
    assert.equal(result.commit, 'committed', JSON.stringify(result));
    assert.deepEqual(how, ["reading state and workspace in the sandbox's directory", 'copying state and workspace out of the sandbox, file by file']);
    const tree = await checkoutTree(world, 'linked');
    const latest = fs.lstatSync(path.join(tree, 'workspace/latest'));
    assert.ok(latest.isFile(), 'a regular file in the bundle');
    assert.equal(fs.readFileSync(path.join(tree, 'workspace/latest'), 'utf8'), 'turn 1: !link latest\n');
  });

  it('a sandbox killed before commit: nothing committed, the previous revision intact; retrying the id runs once and commits once', async () => {
    const runner = world.runner();
    await runner.run(message('kill', 'k1', 'base'));
    const gate = path.join(world.dir, 'kill-gate');
    const request = message('kill', 'k2', `!waitfor ${gate}`);
    let killed = false;
    const result = await runner.run(request, {
      onEvent: (e) => {
        if (e.type === 'runtime_event' && !killed) {
          killed = true;
          void (async () => {
            const record = await world.repo.activations.get('kill', 'k2');
            assert.ok(record?.sandbox, 'the activation record names its sandbox');
            await world.provider.terminate(record.sandbox, 'Immediate', { wait: false });
          })();
        }
      },
    });
    assert.equal(killed, true);
    assert.equal(result.commit, 'not_committed');
    assert.ok(['sandbox_lost', 'agent_failed'].includes(result.error?.code ?? ''), JSON.stringify(result.error));
    assert.equal(result.outcome, undefined);
    const head = await world.repo.checkoutCurrent('kill');
    assert.equal(head.ref.revision, 'r1');
    const tree = await checkoutTree(world, 'kill');
    assert.equal(fs.readFileSync(path.join(tree, 'workspace/notes.md'), 'utf8'), 'turn 1: base\n');
    assert.equal((await world.repo.activations.get('kill', 'k2'))?.state, 'aborted');
    assert.deepEqual(await sandboxNames(world), [], 'the killed sandbox was removed too');

    fs.writeFileSync(gate, '');
    const retry = await runner.run(request);
    assert.equal(retry.commit, 'committed', JSON.stringify(retry));
    assert.equal(retry.revision, 'r2');
    assert.equal(retry.attempt, 2);
    assert.equal(retry.deduplicated, false);
    const again = await runner.run(request);
    assert.equal(again.deduplicated, true);
    assert.deepEqual(world.invocations().filter((id) => id === 'k2').length, 2, 'killed once, run once after');
    const revisions = await world.repo.listRevisions('kill');
    assert.deepEqual(
      revisions.map((r) => r.lastCommittedActivationId),
      ['k2', 'k1'],
      'k2 committed exactly once',
    );
  });

  it('a CAS loser returns revision_conflict and never its output', async () => {
    const runner = world.runner();
    await runner.run(message('cas', 'c1', 'base'));
    const gate = path.join(world.dir, 'cas-gate');
    const events: ActivationEvent[] = [];
    const running = runner.run(message('cas', 'c2', `!waitfor ${gate}`), {
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'runtime_event' && events.filter((x) => x.type === 'runtime_event').length === 1) {
          void (async () => {
            // Another writer (not going through the lease) commits first.
            const head = await world.repo.checkoutCurrent('cas');
            await world.repo.commit({ sessionId: 'cas', expectedRevision: head.ref.revision, checkpoint: head.checkpoint, lastCommittedActivationId: 'outside' });
            fs.writeFileSync(gate, '');
          })();
        }
      },
    });
    const result = await running;
    assert.equal(result.commit, 'not_committed');
    assert.equal(result.error?.code, 'revision_conflict');
    assert.equal(result.outcome, undefined, 'no output from a loser');
    assert.equal(result.revision, undefined);
    assert.ok(events.some((e) => e.type === 'outcome'), 'the provisional outcome was streamed');
    const head = await world.repo.checkoutCurrent('cas');
    assert.equal(head.ref.revision, 'r2');
    assert.equal(head.lastCommittedActivationId, 'outside');
    assert.equal((await world.repo.activations.get('cas', 'c2'))?.state, 'aborted');
  });

  it('two concurrent activations of one session are serialized (the second waits for the lease)', async () => {
    const runner = world.runner();
    const [x, y] = await Promise.all([runner.run(message('conc', 'x', 'one')), runner.run(message('conc', 'y', 'two'))]);
    assert.equal(x.commit, 'committed', JSON.stringify(x));
    assert.equal(y.commit, 'committed', JSON.stringify(y));
    assert.deepEqual([x.revision, y.revision].sort(), ['r1', 'r2']);
    const later = x.revision === 'r2' ? x : y;
    const earlier = later === x ? y : x;
    assert.deepEqual(response(later).history, [response(earlier).text.replace(/^turn 1: /, '')], 'the later one saw the earlier one');
    // With no queueing allowed, the second is refused outright.
    const refusing = world.runner({ lease: { queueTimeoutMs: 0 } });
    const gate = path.join(world.dir, 'conc-gate');
    const holding = runner.run(message('conc', 'z1', `!waitfor ${gate}`));
    while (!world.invocations().includes('z1')) await new Promise((r) => setTimeout(r, 20));
    await assert.rejects(refusing.run(message('conc', 'z2', 'refused')), (err: Error & { code?: string }) => err.code === 'session_busy');
    await assert.rejects(refusing.run(message('conc', 'z1', `!waitfor ${gate}`)), (err: Error & { code?: string }) => err.code === 'activation_in_progress');
    fs.writeFileSync(gate, '');
    assert.equal((await holding).commit, 'committed');
    assert.equal(world.invocations().includes('z2'), false);
    // A refused id can run later.
    assert.equal((await refusing.run(message('conc', 'z2', 'refused'))).revision, 'r4');
  });

  it('agent failures commit nothing: crash, hang (timeout), a secret in the workspace (policy); outcomes commit: blocked', async () => {
    const runner = world.runner({ timeoutMs: 4_000 });
    await runner.run(message('fail', 'f0', 'base'));
    const crash = await runner.run(message('fail', 'f1', '!crash'));
    assert.equal(crash.error?.code, 'agent_failed');
    assert.match(crash.error?.message ?? '', /exited with 70.*crashing on purpose/s);
    const hang = await runner.run(message('fail', 'f2', '!hang'));
    assert.equal(hang.error?.code, 'activation_timeout');
    const secret = await runner.run(message('fail', 'f3', '!write .env'));
    assert.equal(secret.error?.code, 'policy_rejected');
    assert.match(secret.error?.message ?? '', /\.env/);
    assert.equal((await world.repo.checkoutCurrent('fail')).ref.revision, 'r1', 'nothing was committed');
    assert.deepEqual(await sandboxNames(world), []);
    const blocked = await runner.run(message('fail', 'f4', '!block'));
    assert.equal(blocked.commit, 'committed');
    assert.equal(blocked.outcome?.status, 'blocked');
    assert.equal(blocked.outcome?.requiredAction, 'grant_permission');
    const failed = await runner.run(message('fail', 'f5', '!fail'));
    assert.equal(failed.outcome?.status, 'retryable_failure');
    assert.equal(failed.revision, 'r3');
    await assert.rejects(runner.run(message('fail', 'f5', 'different stimulus')), (err: Error & { code?: string }) => err.code === 'idempotency_conflict');
  });

  it('a predecessor that died after publishing: its pending commit is finished (same commitId) without running the agent, or run again when it lost', async () => {
    const runner = world.runner();
    await runner.run(message('pend', 'p0', 'base'));
    const head = await world.repo.checkoutCurrent('pend');
    const leave = async (activationId: string, text: string, expectedRevision: string, alsoCommit: boolean) => {
      const token = newOwnerToken();
      const stimulus = message('pend', activationId, text).stimulus;
      const requestDigest = `sha256:${createHash('sha256').update(encodeJcs(stimulus)).digest('hex')}`;
      const claim = await world.repo.activations.claim({ sessionId: 'pend', activationId, requestDigest, token, ttlMs: 1 });
      assert.equal(claim.kind, 'claimed');
      const pending = { commitId: `dead-${activationId}`, expectedRevision, agentId: head.agentId, checkpoint: head.checkpoint };
      const outcome = { protocol: 'maka.activation', schemaVersion: 1, type: 'outcome', activationId, cloudSessionId: 'pend', status: 'completed', response: `from the dead ${activationId}` };
      await world.repo.activations.update('pend', activationId, token, (r) => ({ ...r, state: 'committing', pending, outcome }));
      if (alsoCommit) await world.repo.commit({ sessionId: 'pend', expectedRevision, checkpoint: head.checkpoint, lastCommittedActivationId: activationId, commitId: pending.commitId });
      // The dead owner's 1 ms claim expires as the clock passes its expiresAt: then a retry may take over.
      await clockPast(Date.parse((await world.repo.activations.get('pend', activationId))?.owner?.expiresAt ?? ''));
    };
    // Died after the CAS, before marking the outcome committed.
    await leave('p1', 'one', 'r1', true);
    const before = world.invocations().length;
    const p1 = await runner.run(message('pend', 'p1', 'one'));
    assert.equal(p1.commit, 'committed', JSON.stringify(p1));
    assert.equal(p1.revision, 'r2');
    assert.equal(p1.outcome?.response, 'from the dead p1');
    assert.equal(p1.deduplicated, true);
    // Died after publishing, before the CAS: finished now.
    await leave('p2', 'two', 'r2', false);
    const p2 = await runner.run(message('pend', 'p2', 'two'));
    assert.equal(p2.revision, 'r3');
    assert.equal(p2.outcome?.response, 'from the dead p2');
    assert.equal(world.invocations().length, before, 'the agent was not invoked');
    // A pending commit that lost (the head moved): the activation runs again.
    await leave('p3', 'three', 'r1', false);
    const p3 = await runner.run(message('pend', 'p3', 'three'));
    assert.equal(p3.commit, 'committed', JSON.stringify(p3));
    assert.equal(p3.revision, 'r4');
    assert.equal(p3.deduplicated, false);
    assert.match(String((p3.outcome?.response as { text: string }).text), /three/);
    assert.deepEqual(world.invocations().slice(before), ['p3']);
    assert.deepEqual((await world.repo.listRevisions('pend')).map((r) => r.lastCommittedActivationId), ['p3', 'p2', 'p1', 'p0']);
  });

  it('an activation taken over by another server while its agent ran commits nothing; the revision and the outcome go together', async () => {
    const runner = world.runner();
    const base = await runner.run(message('taken', 't0', 'base'));
    assert.equal(base.revision, 'r1');
    // The turn's record, its lease and its revision were one write: no lease is left, the outcome is stored.
    assert.equal(await world.repo.activations.getLease('taken'), undefined);
    assert.equal((await world.repo.activations.get('taken', 't0'))?.revision, 'r1');
    // Another server takes t1 over while its agent waits (as after an expiry): a new owner token on the record. Then
    // the agent goes on and finishes its turn.
    const gate = path.join(world.dir, 'taken-gate');
    let takenOver: Promise<unknown> | undefined;
    const result = await runner.run(message('taken', 't1', `!waitfor ${gate}`), {
      onEvent: (e) => {
        if (e.type !== 'runtime_event' || takenOver !== undefined) return;
        takenOver = (async () => {
          const token = (await world.repo.activations.get('taken', 't1'))?.owner?.token ?? '';
          const changed = await world.repo.activations.update('taken', 't1', token, (r) => ({ ...r, owner: { ...(r.owner as NonNullable<typeof r.owner>), token: newOwnerToken() } }));
          assert.ok(changed, 'the record was taken over');
          fs.writeFileSync(gate, '');
        })();
      },
    });
    await takenOver;
    assert.equal(result.commit, 'not_committed', JSON.stringify(result));
    assert.equal(result.error?.code, 'ownership_lost');
    assert.equal((await world.repo.checkoutCurrent('taken')).ref.revision, 'r1', 'its output was not committed');
    assert.equal((await world.repo.activations.get('taken', 't1'))?.state, 'running', 'the new owner’s record is untouched');
    assert.equal(await world.repo.activations.getLease('taken'), undefined, 'the lease was given back');
    assert.deepEqual(await sandboxNames(world), []);
  });

  it('cancelling with the caller signal stops the agent, commits nothing and removes the sandbox; a throwing listener does not fail the run', async () => {
    const runner = world.runner();
    await runner.run(message('cancel', 'x0', 'base'), {
      onEvent: () => {
        throw new Error('listener bug');
      },
    });
    const controller = new AbortController();
    const result = await runner.run(message('cancel', 'x1', '!hang'), {
      signal: controller.signal,
      onEvent: (e) => {
        if (e.type === 'runtime_event') controller.abort();
      },
    });
    assert.equal(result.commit, 'not_committed');
    assert.equal(result.error?.code, 'activation_cancelled');
    assert.equal((await world.repo.checkoutCurrent('cancel')).ref.revision, 'r1');
    assert.deepEqual(await sandboxNames(world), []);
    assert.equal(await world.repo.activations.getLease('cancel'), undefined, 'the lease was released');
  });
});
