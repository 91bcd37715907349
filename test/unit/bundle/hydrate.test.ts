// hydrate and cleanup (spec §8): the result on disk, destination refusal, the destination lock, a SIGKILL in the
// middle of extraction, and cleanup touching only staging it can authenticate.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsPromises, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import { cleanupHydrationStaging, hydrateSessionBundle, packSessionBundle } from '../../../server/bundle';
import { destinationLockPath } from '../../../server/bundle/destinationLock';
import { processStartTime } from '../../../server/platform/processIdentity';
import { createHydrationStaging } from '../../../server/bundle/hydrationStaging';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing, rejectsWith } from '../../fixtures/bundle/harness';

const mode = (path: string): number => statSync(path).mode & 0o777;

describe('bundle/hydrate + cleanup', () => {
  let tmp: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let bundle: string;
  let parent: string;
  const hydrate = (destinationRoot = join(parent, 'h')) =>
    hydrateSessionBundle({ source: { path: bundle }, expectedSessionId: GOLDEN.sessionId, destinationRoot, limits: CODEC_TEST_LIMITS });

  beforeEach(async () => {
    tmp = tempDir();
    roots = createFixture(join(tmp.path, 'src'));
    bundle = join(tmp.path, 'golden.tar.zst');
    await packSessionBundle({ ...fixturePackOptions(roots, bundle), limits: CODEC_TEST_LIMITS });
    parent = join(tmp.path, 'dest');
    mkdirSync(parent);
  });
  afterEach(() => tmp.cleanup());

  it('writes the payload with exact modes, no manifest, destination 0700, and nothing else', async () => {
    const process_ = process as NodeJS.Process & { umask(mask?: number): number };
    const old = process_.umask(0o077); // modes must not depend on the umask
    let result;
    try {
      result = await hydrate();
    } finally {
      process_.umask(old);
    }
    const h = join(parent, 'h');
    assert.equal(result.destinationRoot, h);
    assert.equal(result.stateRoot, join(h, 'state'));
    assert.equal(result.workspaceRoot, join(h, 'workspace'));
    assert.equal(result.archiveDigest, GOLDEN.archiveDigest);
    assert.deepEqual(listing(parent), ['h']);
    assert.deepEqual(listing(h), ['state', 'state-identity.json', 'workspace']);
    assert.equal(mode(h), 0o700);
    assert.equal(mode(join(h, 'state-identity.json')), 0o644);
    assert.equal(mode(join(h, 'state')), 0o755);
    assert.equal(mode(join(h, 'state', 'empty')), 0o755);
    assert.equal(mode(join(h, 'state', 'session.bin')), 0o644);
    assert.equal(mode(join(h, 'workspace', 'run.sh')), 0o755);
    assert.equal(mode(join(h, 'workspace', '深')), 0o755);
    assert.deepEqual(readFileSync(join(h, 'state-identity.json')), GOLDEN.identityBytes);
    assert.equal(readFileSync(join(h, 'workspace', '深', 'x.txt'), 'utf8'), '好');
    assert.deepEqual(readdirSync(join(h, 'state', 'empty')), []);
  });

  it('refuses a destination that exists, even an empty directory', async () => {
    mkdirSync(join(parent, 'h'));
    await rejectsWith(hydrate(), 'destination_exists');
    assert.deepEqual(listing(parent), ['h']);
    assert.deepEqual(listing(join(parent, 'h')), []);
  });

  it('two concurrent hydrates to one destination: one wins, the other gets destination_exists', async () => {
    const results = await Promise.allSettled([hydrate(), hydrate()]);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    const rejected = results.find((r) => r.status === 'rejected');
    assert.equal((rejected?.reason as { code?: string }).code, 'destination_exists');
    assert.deepEqual(listing(parent), ['h']);
  });

  it('a failure while reserving staging is io_failure and leaves nothing behind', async () => {
    const original = fsPromises.link;
    fsPromises.link = () => Promise.reject(Object.assign(new Error('EMLINK: too many links'), { code: 'EMLINK' }));
    try {
      const err = await rejectsWith(hydrate(), 'io_failure');
      assert.match(err.message, /EMLINK/);
    } finally {
      fsPromises.link = original;
    }
    assert.deepEqual(listing(parent), []);
  });

  it('names the destination lock as Maka does', () => {
    assert.equal(
      destinationLockPath('/x/hydrated'),
      '/x/.maka-session-bundle-publish-a1273e0f0d8f28cdc66f72c8bd70dbf7f196ce9cb09333939031227265b95a26.lock',
    );
    assert.equal(destinationLockPath('/x/HYDRATED'), destinationLockPath('/x/hydrated'));
  });

  it('breaks a lock left by a dead owner, and waits for a live one', async () => {
    const lock = destinationLockPath(join(parent, 'h'));
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(lock, JSON.stringify({ pid: Number(dead.stdout), startTime: '1', bootId: null }), { mode: 0o600 });
    await hydrate();
    assert.deepEqual(listing(parent), ['h']);

    writeFileSync(lock, JSON.stringify({ pid: process.pid, startTime: processStartTime(process.pid), bootId: null }), { mode: 0o600 });
    let released = false;
    // The live owner (another process, played by this timer) releases its lock later: an action, not a wait.
    setTimeout(() => {
      released = true;
      renameSync(lock, join(tmp.path, 'released.lock'));
    }, 300);
    await rejectsWith(hydrate(), 'destination_exists');
    assert.ok(released, 'hydrate must wait for the live owner');
  });

  it('a hydrate killed with SIGKILL mid-way leaves only staging (and its lock), which cleanup removes', async function () {
    this.timeout(60_000);
    const bigRoots = createFixture(join(tmp.path, 'big'));
    for (let i = 0; i < 40; i++) {
      writeFileSync(join(bigRoots.workspaceRoot, `f${String(i).padStart(2, '0')}.bin`), randomBytes(64 * 1024)); // incompressible
    }
    const big = join(tmp.path, 'big.tar.zst');
    await packSessionBundle({ ...fixturePackOptions(bigRoots, big), limits: { ...CODEC_TEST_LIMITS, maxCompressedBytes: 1 << 30 } });
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../../fixtures/bundle/hydrateChild.ts'), big, join(parent, 'h'), GOLDEN.sessionId, String(1024 * 1024)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        if (d.toString().includes('mid-hydrate')) resolve();
      });
      child.on('exit', (codeOrNull) => reject(new Error(`child exited early (${codeOrNull}): ${stderr}`)));
    });
    const exited = new Promise((resolve) => child.once('exit', (_c, signal) => resolve(signal)));
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');

    const left = listing(parent);
    const staging = left.filter((n) => /^\.h\.maka-session-bundle-staging-[0-9a-f-]{36}$/.test(n));
    assert.equal(staging.length, 1, left.join(', '));
    assert.ok(readdirSync(join(parent, staging[0] as string)).length > 0, 'the child had started writing into staging');
    assert.deepEqual(left.filter((n) => !n.startsWith('.h.maka-session-bundle-staging-')), [`${destinationLockPath(join(parent, 'h')).split('/').pop()}`]);
    assert.ok(!left.includes('h'), 'nothing was published');

    const cleaned = await cleanupHydrationStaging({ destinationRoot: join(parent, 'h') });
    assert.deepEqual(cleaned, { destinationRoot: join(parent, 'h'), removedStagingDirectories: 1, removedOwnershipRecords: 1 });
    assert.deepEqual(listing(parent), []);
    bundle = big;
    await hydrate();
    assert.deepEqual(listing(parent), ['h']);
  });

  it('cleanup removes authenticated staging and quarantine, never decoys, symlinks or replaced directories', async () => {
    const h = join(parent, 'h');
    // A real orphan, and a real orphan caught mid-quarantine.
    const orphan = await createHydrationStaging(parent, 'h');
    writeFileSync(join(orphan.stagingPath, 'partial'), 'x');
    const quarantined = await createHydrationStaging(parent, 'h');
    renameSync(quarantined.stagingPath, `${quarantined.stagingPath}.cleanup`);
    // A decoy without a record, a symlink swapped in for a staging dir, a directory replaced after binding.
    const decoy = join(parent, '.h.maka-session-bundle-staging-00000000-0000-4000-8000-000000000000');
    mkdirSync(decoy);
    const victim = join(tmp.path, 'victim');
    mkdirSync(victim);
    writeFileSync(join(victim, 'keep'), 'keep');
    const swapped = await createHydrationStaging(parent, 'h');
    renameSync(swapped.stagingPath, join(tmp.path, 'moved-away'));
    symlinkSync(victim, swapped.stagingPath);
    const replaced = await createHydrationStaging(parent, 'h');
    renameSync(replaced.stagingPath, join(tmp.path, 'moved-away-2'));
    mkdirSync(replaced.stagingPath);
    writeFileSync(join(replaced.stagingPath, 'foreign'), 'keep');
    // Staging of another destination is not this destination's business.
    const other = await createHydrationStaging(parent, 'other');

    const result = await cleanupHydrationStaging({ destinationRoot: h });
    assert.deepEqual(result, { destinationRoot: h, removedStagingDirectories: 2, removedOwnershipRecords: 2 });
    const left = listing(parent);
    assert.ok(!left.some((n) => n.startsWith(orphan.stagingPath.split('/').pop() as string)));
    assert.ok(!left.some((n) => n.startsWith(quarantined.stagingPath.split('/').pop() as string)));
    assert.ok(left.includes(decoy.split('/').pop() as string));
    assert.equal(readFileSync(join(victim, 'keep'), 'utf8'), 'keep');
    assert.ok(left.includes(swapped.stagingPath.split('/').pop() as string));
    assert.equal(readFileSync(join(replaced.stagingPath, 'foreign'), 'utf8'), 'keep');
    assert.ok(left.includes(other.stagingPath.split('/').pop() as string));
    // A torn binding line still authenticates through the anchor.
    const torn = await createHydrationStaging(parent, 't');
    const record = readFileSync(torn.ownerPath, 'utf8').split('\n')[0] as string;
    writeFileSync(torn.ownerPath, `${record}\n{"schemaVersion":1,"kind":"maka-sess`);
    const anchorTarget = join(torn.stagingPath, '.maka-session-bundle-owner');
    (await import('node:fs')).linkSync(torn.ownerPath, anchorTarget);
    assert.deepEqual(await cleanupHydrationStaging({ destinationRoot: join(parent, 't') }), {
      destinationRoot: join(parent, 't'),
      removedStagingDirectories: 1,
      removedOwnershipRecords: 1,
    });
  });
});
