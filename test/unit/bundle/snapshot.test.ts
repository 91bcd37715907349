// The snapshot step (spec §13 V1 workspace policy): exclusions reported by category, secrets refuse the
// snapshot naming the file, and no path leads to a packed secret.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import { classifyWorkspacePath, hydrateSessionBundle, packSessionBundle, prepareWorkspaceSnapshot, SessionSnapshotError } from '../../../server/bundle';
import { createFixture, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing } from '../../fixtures/bundle/harness';

async function snapshotRejects(work: Promise<unknown>, code: string): Promise<SessionSnapshotError> {
  try {
    await work;
  } catch (err) {
    assert.ok(err instanceof SessionSnapshotError, String(err));
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`expected SessionSnapshotError(${code})`);
}

describe('bundle/snapshot', () => {
  let tmp: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let staging: string;
  beforeEach(() => {
    tmp = tempDir();
    roots = createFixture(join(tmp.path, 'src'));
    staging = join(tmp.path, 'staging');
    mkdirSync(staging, { mode: 0o700 });
  });
  afterEach(() => tmp.cleanup());
  const snapshot = () => prepareWorkspaceSnapshot({ ...roots, stagingParent: staging });

  it('excludes .git, node_modules, caches, logs and runtime scratch, reporting them by category', async () => {
    const w = roots.workspaceRoot;
    for (const d of ['.git/objects', 'node_modules/left-pad', 'pkg/node_modules/x', '.cache', '.turbo', 'logs', '.maka-runtime', 'src/.Git']) mkdirSync(join(w, d), { recursive: true });
    writeFileSync(join(w, '.git', 'config'), '[core]');
    writeFileSync(join(w, 'node_modules', 'left-pad', 'index.js'), '');
    writeFileSync(join(w, 'build.log'), 'log');
    writeFileSync(join(w, 'src', 'main.ts'), 'export {};');
    const s = await snapshot();
    try {
      assert.deepEqual(s.workspace.excludedEntries, [
        { path: '.cache/', category: 'cache' },
        { path: '.git/', category: 'source_control' },
        { path: '.maka-runtime/', category: 'runtime_scratch' },
        { path: '.turbo/', category: 'cache' },
        { path: 'build.log', category: 'log' },
        { path: 'logs/', category: 'log' },
        { path: 'node_modules/', category: 'dependency_tree' },
        { path: 'pkg/node_modules/', category: 'dependency_tree' },
        { path: 'src/.Git/', category: 'source_control' },
      ]);
      assert.deepEqual(s.workspace.excludedEntriesByCategory, { source_control: 2, dependency_tree: 2, cache: 2, log: 2, runtime_scratch: 1 });
      assert.equal(s.workspace.policyVersion, 1);
      assert.deepEqual(readdirSync(s.snapshot.workspaceRoot).sort(), ['pkg', 'run.sh', 'src', '深']);
      assert.equal(s.workspace.payloadBytes, 18 + 3 + 'export {};'.length);
      const packed = await packSessionBundle({
        stateRoot: s.snapshot.stateRoot,
        workspaceRoot: s.snapshot.workspaceRoot,
        stateIdentity: { mediaType: GOLDEN.identityMediaType, bytes: GOLDEN.identityBytes },
        envelope: { sessionId: GOLDEN.sessionId },
        destination: join(tmp.path, 'b.tar.zst'),
        limits: CODEC_TEST_LIMITS,
      });
      const h = await hydrateSessionBundle({ source: { path: packed.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(tmp.path, 'h'), limits: CODEC_TEST_LIMITS });
      assert.deepEqual(readdirSync(h.workspaceRoot).sort(), ['pkg', 'run.sh', 'src', '深']);
    } finally {
      await s.release();
    }
    assert.deepEqual(listing(staging), []);
  });

  it('refuses known secret files with policy_rejected naming the file, leaving no snapshot', async () => {
    const secrets = [
      '.env', '.env.local', 'config/.ENV.production', '.npmrc', '.netrc', '.pypirc', '.terraformrc', '.git-credentials',
      'credentials.json', 'secrets.yaml', 'id_rsa', 'keys/id_ed25519', 'deploy.key', 'cert.p12', 'cert.pfx', 'my-private-key.pem',
      '.ssh/known_hosts', 'service-account.json', '.docker/config.json', '.aws/credentials', '.kube/config',
      '.config/gcloud/application_default_credentials.json', 'logs-are-fine/secret.log',
    ];
    for (const rel of secrets) {
      const t = tempDir();
      try {
        const r = createFixture(t.path);
        const p = join(r.workspaceRoot, rel);
        mkdirSync(join(p, '..'), { recursive: true });
        writeFileSync(p, 'TOKEN=sk-live-123');
        const st = join(t.path, 'staging');
        mkdirSync(st, { mode: 0o700 });
        const err = await snapshotRejects(prepareWorkspaceSnapshot({ ...r, stagingParent: st }), 'policy_rejected');
        assert.equal(err.path, `workspace/${rel}`);
        assert.ok(err.message.includes(`workspace/${rel}`), err.message);
        assert.deepEqual(listing(st), [], `${rel}: no snapshot is left`);
      } finally {
        t.cleanup();
      }
    }
  });

  it('does not mistake ordinary files for secrets', () => {
    for (const rel of ['src/environment.ts', 'id_rsa.pub', 'docs/keys.md', 'src/creds.ts', 'README.md', 'keyboard.ts']) {
      assert.deepEqual(classifyWorkspacePath(rel.split('/'), false), { verdict: 'include' }, rel);
    }
  });

  it('has no option that packs a secret: the policy is not configurable', () => {
    // prepareWorkspaceSnapshot accepts exactly these options; unknown ones are ignored by design, never a bypass.
    writeFileSync(join(roots.workspaceRoot, '.env'), 'SECRET=1');
    const options = { ...roots, stagingParent: staging, allowSecrets: true, policy: 'none' } as Parameters<typeof prepareWorkspaceSnapshot>[0];
    return snapshotRejects(prepareWorkspaceSnapshot(options), 'policy_rejected');
  });

  it('refuses symlinks (unsafe_source naming them) and a staging parent that is not private', async () => {
    symlinkSync('/etc/passwd', join(roots.workspaceRoot, 'link'));
    const err = await snapshotRejects(snapshot(), 'unsafe_source');
    assert.equal(err.path, 'workspace/link');
    chmodSync(staging, 0o755);
    await snapshotRejects(snapshot(), 'invalid_input');
    assert.deepEqual(listing(staging), []);
  });
});
