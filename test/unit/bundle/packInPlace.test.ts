// packWorkspace on a quiet tree (issue 25: activation without needless copies): packed in place, the V1 policy
// applied as the pack scans, with Maka's bytes and the snapshot's report — and the cases where the snapshot copy
// cannot be skipped (a hard-linked file, a symbolic link) or where "quiet" turns out to be false.
import assert from 'node:assert/strict';
import { existsSync, linkSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import { SessionBundleError, SessionSnapshotError } from '../../../server/bundle';
import { packWorkspace, type PackWorkspaceOptions } from '../../../server/bundle/packWorkspace';
import { createFixture, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';

describe('bundle/packWorkspace on a quiet tree', () => {
  let tmp: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let staging: string;
  let n = 0;
  beforeEach(() => {
    tmp = tempDir();
    roots = createFixture(join(tmp.path, 'src'));
    staging = join(tmp.path, 'staging');
    mkdirSync(staging, { mode: 0o700 });
  });
  afterEach(() => tmp.cleanup());

  /** Packs the fixture's roots; `steps` hears the steps, `copies` how many snapshot copies existed during the pack. */
  async function pack(quiet: boolean, extra: Partial<PackWorkspaceOptions> = {}) {
    const steps: string[] = [];
    let copies = 0;
    const destination = join(tmp.path, `out-${n++}.tar.zst`);
    const packed = await packWorkspace({
      ...roots,
      destination,
      sessionId: GOLDEN.sessionId,
      lastCommittedActivationId: GOLDEN.lastCommittedActivationId,
      stateIdentity: { mediaType: GOLDEN.identityMediaType, bytes: GOLDEN.identityBytes },
      limits: CODEC_TEST_LIMITS,
      stagingParent: staging,
      quiet,
      onStep: (step) => steps.push(step),
      onProgress: () => void (copies = Math.max(copies, readdirSync(staging).length)),
      ...extra,
    });
    return { ...packed, steps, copies, destination };
  }

  function addExcludedEntries(): void {
    const w = roots.workspaceRoot;
    for (const d of ['.git/objects', 'node_modules/left-pad', '深/node_modules/x', '.cache', 'logs']) mkdirSync(join(w, d), { recursive: true });
    writeFileSync(join(w, '.git', 'config'), '[core]');
    writeFileSync(join(w, 'node_modules', 'left-pad', 'index.js'), 'module.exports = 1;');
    writeFileSync(join(w, '深', 'build.log'), 'log');
    // A secret or a symbolic link inside an excluded directory is never looked at, in place as in a copy.
    writeFileSync(join(w, 'node_modules', '.npmrc'), '//registry/:_authToken=x');
    symlinkSync('/etc/passwd', join(w, '.cache', 'link'));
  }

  it('packs in place, without a snapshot copy: Maka\'s golden bytes and the report the snapshot gives', async () => {
    addExcludedEntries();
    const inPlace = await pack(true);
    const copied = await pack(false);
    assert.deepEqual(inPlace.steps, ['pack']);
    assert.equal(inPlace.copies, 0, 'no snapshot directory while packing in place');
    assert.deepEqual(copied.steps, ['snapshot', 'pack']);
    assert.equal(copied.copies, 1, 'the snapshot path copies (the measure works)');
    assert.equal(inPlace.artifact.archiveDigest, GOLDEN.archiveDigest, 'byte-identical with Maka\'s codec, exclusions left out');
    assert.equal(copied.artifact.archiveDigest, GOLDEN.archiveDigest);
    assert.deepEqual(inPlace.workspace, copied.workspace);
    assert.deepEqual(inPlace.workspace.excludedEntries, [
      { path: '.cache/', category: 'cache' },
      { path: '.git/', category: 'source_control' },
      { path: 'logs/', category: 'log' },
      { path: 'node_modules/', category: 'dependency_tree' },
      { path: '深/build.log', category: 'log' },
      { path: '深/node_modules/', category: 'dependency_tree' },
    ]);
  });

  it('refuses a known secret in place as the snapshot does (policy_rejected naming it); nothing is published', async () => {
    writeFileSync(join(roots.workspaceRoot, '深', '.env'), 'TOKEN=x');
    const attempt = pack(true);
    await assert.rejects(attempt, (err: unknown) => err instanceof SessionSnapshotError && err.code === 'policy_rejected' && err.path === 'workspace/深/.env');
    assert.deepEqual(readdirSync(tmp.path).filter((name) => name.includes('out-')), []);
  });

  it('cannot skip the copy for a hard-linked file (pack refuses nlink > 1, the snapshot copies it): it takes the snapshot, same bundle', async () => {
    writeFileSync(join(tmp.path, 'outside.txt'), 'shared');
    linkSync(join(tmp.path, 'outside.txt'), join(roots.workspaceRoot, 'shared.txt'));
    const inPlace = await pack(true);
    assert.deepEqual(inPlace.steps, ['pack', 'snapshot', 'pack']);
    const copied = await pack(false);
    assert.equal(inPlace.artifact.archiveDigest, copied.artifact.archiveDigest);
    assert.equal(inPlace.artifact.entryCount, GOLDEN.entryCount + 1, 'the linked file is in the bundle');
    assert.deepEqual(inPlace.workspace, copied.workspace);
  });

  it('reports a symbolic link as the snapshot does (unsafe_source), so the mover brings it back through the gateway', async () => {
    symlinkSync('run.sh', join(roots.workspaceRoot, 'latest'));
    const steps: string[] = [];
    await assert.rejects(pack(true, { onStep: (step) => steps.push(step) }), (err: unknown) => err instanceof SessionSnapshotError && err.code === 'unsafe_source' && err.path === 'workspace/latest');
    assert.deepEqual(steps, ['pack', 'snapshot']);
  });

  it('checks "quiet" rather than trusting it: a tree that changes while it is packed in place is refused (source_changed)', async () => {
    let touched = false;
    const attempt = pack(true, {
      onProgress: (p) => {
        if (p.phase !== 'write' || touched) return;
        touched = true;
        writeFileSync(join(roots.workspaceRoot, 'late.txt'), 'written while packing');
      },
    });
    await assert.rejects(attempt, (err: unknown) => err instanceof SessionBundleError && err.code === 'source_changed');
    assert.ok(touched);
    assert.ok(!existsSync(join(tmp.path, `out-${n - 1}.tar.zst`)), 'nothing published');
  });
});
