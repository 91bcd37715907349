// The snapshot step (spec §13 V1 workspace policy): exclusions reported by category, secrets refuse the
// snapshot naming the file, and no path leads to a packed secret.
import assert from 'node:assert/strict';
import { appendFileSync, chmodSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
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

  it('copies big trees byte for byte while the event loop keeps turning', async () => {
    const big = Buffer.alloc(24 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    writeFileSync(join(roots.workspaceRoot, 'big.bin'), big);
    for (let i = 0; i < 600; i++) writeFileSync(join(roots.stateRoot, `n${i}.txt`), `note ${i}\n`);
    // Other work gets turns while the copy runs: one of them sees big.bin half copied.
    let sawHalfCopied = false;
    let ticking = true;
    const tick = (): void => {
      const preparing = readdirSync(staging).find((n) => n.endsWith('.preparing'));
      const st = preparing === undefined ? undefined : statSync(join(staging, preparing, 'workspace', 'big.bin'), { throwIfNoEntry: false });
      if (st !== undefined && st.size > 0 && st.size < big.length) sawHalfCopied = true;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const prepared = await snapshot();
    ticking = false;
    try {
      assert.ok(sawHalfCopied, 'the event loop turned in the middle of copying a 24 MiB file');
      assert.ok(readFileSync(join(prepared.snapshot.workspaceRoot, 'big.bin')).equals(big));
      assert.equal(readFileSync(join(prepared.snapshot.stateRoot, 'n599.txt'), 'utf8'), 'note 599\n');
      assert.equal(prepared.workspace.payloadBytes > big.length, true);
    } finally {
      await prepared.release();
    }
  });

  it('refuses a file that changes while it is copied (source_changed) and leaves no snapshot', async () => {
    const file = join(roots.workspaceRoot, 'growing.bin');
    writeFileSync(file, Buffer.alloc(32 * 1024 * 1024, 7));
    let appending = true;
    const append = (): void => {
      appendFileSync(file, 'more\n');
      if (appending) setImmediate(append);
    };
    setImmediate(append);
    try {
      const err = await snapshotRejects(snapshot(), 'source_changed');
      assert.equal(err.path, 'workspace/growing.bin');
    } finally {
      appending = false;
    }
    assert.deepEqual(listing(staging), []);
  });
});
