// When the file repository waits for the disk (fileRepository.ts save, storage.ts WriteOptions): every state write
// fsyncs the new state file before renaming it over the old one (after a crash the state is one whole document), a
// commit — and any write that outlives its process, like the sandbox an activation created — also fsyncs the
// directory after the rename before it returns (it survives a crash of the machine), while claims and leases, which
// die with their process, leave that to the next durable write. Observed by recording the fsyncs of this process.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { newOwnerToken } from '../../../server/repository/activationStore';
import type { SessionRepository } from '../../../server/repository/contract';
import { openFileSessionRepository, STATE_FILE } from '../../../server/repository/fileRepository';
import { publishBundle } from '../../fixtures/repository/bundles';
import { scratchBase } from '../../fixtures/repository/harness';
import { type DiskStep, recordDiskWaits } from '../../fixtures/diskWaits';

describe('file repository: what a state write waits for', function () {
  this.timeout(60_000);
  let scratch: string;
  let storageRoot: string;
  let stateFile: string;
  let repo: SessionRepository;

  beforeEach(async () => {
    scratch = fs.mkdtempSync(path.join(scratchBase(), 'ss-durability-'));
    storageRoot = path.join(scratch, 'repository');
    stateFile = path.join(storageRoot, STATE_FILE);
    repo = await openFileSessionRepository({ storageRoot, gcGraceMs: 0 });
    await repo.createSession({ sessionId: 's', agentId: 'a', checkpoint: await publishBundle(repo.objects, scratch, 'base') });
  });
  afterEach(() => {
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  /** The fsyncs around the state file's rename: of the new state file before it, of the repository directory after it. */
  function around(steps: DiskStep[]): { fileBefore: boolean; directoryAfter: boolean } {
    const at = steps.findIndex((s) => 'rename' in s && s.rename === stateFile);
    assert.ok(at >= 0, `the state file was replaced: ${JSON.stringify(steps)}`);
    return {
      fileBefore: steps.slice(0, at).some((s) => 'fsync' in s && s.fsync.startsWith(`${stateFile}.`) && s.fsync.endsWith('.tmp')),
      directoryAfter: steps.slice(at + 1).some((s) => 'fsync' in s && s.fsync === storageRoot),
    };
  }

  it('a commit fsyncs the new state file before its rename and the directory after it, before it returns', async () => {
    const next = await publishBundle(repo.objects, scratch, 'next');
    const { result, steps } = await recordDiskWaits(() => repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint: next, commitId: 'c1' }));
    assert.equal(result.ref.revision, 'r2');
    assert.deepEqual(around(steps), { fileBefore: true, directoryAfter: true });
  });

  it('a durable activation update (the sandbox it created) fsyncs like a commit; claims and leases only fsync the state file', async () => {
    const token = newOwnerToken();
    const requestDigest = `sha256:${'0'.repeat(64)}`;
    const claim = await recordDiskWaits(() => repo.activations.claim({ sessionId: 's', activationId: 'a1', requestDigest, token, ttlMs: 30_000 }));
    assert.equal(claim.result.kind, 'claimed');
    assert.deepEqual(around(claim.steps), { fileBefore: true, directoryAfter: false }, 'a claim dies with its process');

    const lease = await recordDiskWaits(() => repo.activations.acquireLease({ sessionId: 's', activationId: 'a1', token, ttlMs: 30_000 }));
    assert.equal(lease.result.acquired, true);
    assert.deepEqual(around(lease.steps), { fileBefore: true, directoryAfter: false }, 'a lease dies with its process');

    const sandbox = { provider: 'local', context: 'local', namespace: 'default', name: 'sb-1' } as const;
    const recorded = await recordDiskWaits(() => repo.activations.update('s', 'a1', token, (r) => ({ ...r, sandbox })));
    assert.deepEqual(recorded.result?.sandbox, sandbox);
    assert.deepEqual(around(recorded.steps), { fileBefore: true, directoryAfter: true }, 'the sandbox outlives the process: a successor must find it');

    const released = await recordDiskWaits(() => repo.activations.releaseLease({ sessionId: 's', token }));
    assert.deepEqual(around(released.steps), { fileBefore: true, directoryAfter: false });
    assert.equal(await repo.activations.getLease('s'), undefined);

    // The next turn: its claim takes the lease in the same write; its commit marks it and gives the lease back in one.
    const token2 = newOwnerToken();
    const claimed = await recordDiskWaits(() => repo.activations.claim({ sessionId: 's', activationId: 'a2', requestDigest, token: token2, ttlMs: 30_000, lease: true }));
    assert.equal(claimed.result.kind === 'claimed' ? claimed.result.lease?.activationId : undefined, 'a2');
    assert.deepEqual(around(claimed.steps), { fileBefore: true, directoryAfter: false });
    assert.equal(claimed.steps.filter((s) => 'rename' in s && s.rename === stateFile).length, 1, 'one write');
    const checkpoint = await publishBundle(repo.objects, scratch, 'turn 2');
    const outcome = { type: 'outcome', status: 'completed' };
    const committed = await recordDiskWaits(() =>
      repo.commit({ sessionId: 's', expectedRevision: 'r1', checkpoint, lastCommittedActivationId: 'a2', activation: { activationId: 'a2', token: token2, outcome } }),
    );
    assert.equal(committed.result.ref.revision, 'r2');
    assert.deepEqual(around(committed.steps), { fileBefore: true, directoryAfter: true });
    assert.equal(committed.steps.filter((s) => 'rename' in s && s.rename === stateFile).length, 1, 'one write');
    assert.equal((await repo.activations.get('s', 'a2'))?.state, 'committed');
    assert.equal(await repo.activations.getLease('s'), undefined);
  });
});
