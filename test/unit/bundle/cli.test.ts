// `sandbox-sessions bundle …` driven in-process through runBundleCommand: output, error lines with stable
// codes, and exit codes 0/1/2.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAKA_STATE_IDENTITY_MEDIA_TYPE } from '../../../server/bundle/packWorkspace';
import { runBundleCommand, STATE_IDENTITY_MEDIA_TYPE } from '../../../server/cli/bundle';
import { main } from '../../../server/main';
import { createFixture, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing } from '../../fixtures/bundle/harness';
import { captureIo } from '../../fixtures/cliCapture';

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const c = captureIo();
  const code = await runBundleCommand(argv, c.io);
  return { code, stdout: c.out(), stderr: c.err() };
}

describe('bundle/cli', () => {
  let tmp: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  beforeEach(() => {
    tmp = tempDir();
    roots = createFixture(join(tmp.path, 'src'));
  });
  afterEach(() => tmp.cleanup());

  it('packs with an identity file, inspects (text and --json), hydrates, and reproduces the golden digest', async () => {
    const identity = join(tmp.path, 'identity.json');
    writeFileSync(identity, GOLDEN.identityBytes);
    const out = join(tmp.path, 'a.tar.zst');
    const packed = await run([
      'pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', GOLDEN.sessionId,
      '--identity-file', identity, '--identity-media-type', GOLDEN.identityMediaType, '--last-activation-id', GOLDEN.lastCommittedActivationId,
    ]);
    assert.equal(packed.code, 0, packed.stderr);
    assert.match(packed.stdout, new RegExp(`digest ${GOLDEN.archiveDigest}`));

    const text = await run(['inspect', out]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /session cloud-session-1 \(last activation activation-9\)/);
    const json = await run(['inspect', out, '--json', '--expected-digest', GOLDEN.archiveDigest]);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as { archiveDigest: string; entryCount: number };
    assert.equal(parsed.archiveDigest, GOLDEN.archiveDigest);
    assert.equal(parsed.entryCount, 8);

    const dest = join(tmp.path, 'h');
    const hydrated = await run(['hydrate', out, dest, '--session-id', GOLDEN.sessionId]);
    assert.equal(hydrated.code, 0, hydrated.stderr);
    assert.equal(readFileSync(join(dest, 'workspace', 'run.sh'), 'utf8'), '#!/bin/sh\necho ok\n');
    const cleaned = await run(['cleanup', dest]);
    assert.equal(cleaned.code, 0);
    assert.match(cleaned.stdout, /removed 0 staging directories/);
  });

  it('uses the default identity and lists exclusions on stderr', async () => {
    mkdirSync(join(roots.workspaceRoot, 'node_modules'));
    const out = join(tmp.path, 'b.tar.zst');
    const r = await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', 's-1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /excluded: node_modules\/ \(dependency_tree\)/);
    const h = join(tmp.path, 'h');
    assert.equal((await run(['hydrate', out, h, '--session-id', 's-1'])).code, 0);
    assert.equal(readFileSync(join(h, 'state-identity.json'), 'utf8'), '{"schemaVersion":1,"makaSessionId":"s-1"}\n');
  });

  it('the help names the media type pack gives the default identity (written out in the CLI so help does not load the codec)', async () => {
    assert.equal(STATE_IDENTITY_MEDIA_TYPE, MAKA_STATE_IDENTITY_MEDIA_TYPE);
    const c = captureIo();
    assert.equal(await main(['bundle', 'pack', '--help'], c.io), 0);
    assert.ok(c.out().includes(`(${MAKA_STATE_IDENTITY_MEDIA_TYPE})`), c.out());
  });

  it('reports failures as `error [code]: …` with exit 1', async () => {
    writeFileSync(join(roots.workspaceRoot, '.env'), 'SECRET=1');
    const out = join(tmp.path, 'c.tar.zst');
    const secret = await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', 's']);
    assert.equal(secret.code, 1);
    assert.match(secret.stderr, /^error \[policy_rejected\]: refusing to snapshot "workspace\/\.env"/m);
    assert.deepEqual(listing(tmp.path), ['src']);

    const bad = join(tmp.path, 'bad.tar.zst');
    writeFileSync(bad, Buffer.from('not a bundle'));
    const r = await run(['inspect', bad]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[integrity_mismatch\]: /);
    const missing = await run(['inspect', join(tmp.path, 'missing.tar.zst')]);
    assert.match(missing.stderr, /^error \[io_failure\]: /);

    writeFileSync(join(tmp.path, 'exists'), '');
    const rm = await run(['pack', roots.stateRoot, join(tmp.path, 'src', 'state'), '-o', join(tmp.path, 'exists'), '--session-id', 's']);
    assert.equal(rm.code, 1);
    assert.match(rm.stderr, /error \[destination_exists\]/);
  });

  it('names the path the person gave: missing inputs, a file that is not a bundle, a missing destination directory', async () => {
    const out = join(tmp.path, 'x.tar.zst');
    let r = await run(['pack', join(tmp.path, 'nostate'), roots.workspaceRoot, '-o', out, '--session-id', 's']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[invalid_input\]: the state directory .*nostate does not exist \(ENOENT\)\n$/);
    r = await run(['pack', roots.stateRoot, join(tmp.path, 'nows'), '-o', out, '--session-id', 's']);
    assert.match(r.stderr, /^error \[invalid_input\]: the workspace directory .*nows does not exist \(ENOENT\)\n$/);
    r = await run(['pack', roots.stateRoot, join(roots.workspaceRoot, 'run.sh'), '-o', out, '--session-id', 's']);
    assert.match(r.stderr, /^error \[invalid_input\]: the workspace directory .*run\.sh is not a directory\n$/);
    r = await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', join(tmp.path, 'nodir', 'x.tar.zst'), '--session-id', 's']);
    assert.match(r.stderr, /^error \[io_failure\]: cannot write .*nodir\/x\.tar\.zst: the directory .*nodir does not exist \(ENOENT\)\n$/);
    assert.equal((await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', 's'])).code, 0);
    r = await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', 's']);
    assert.match(r.stderr, /^error \[destination_exists\]: .*x\.tar\.zst: the destination already exists/);

    r = await run(['inspect', 'nofile.tar.zst']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[io_failure\]: cannot inspect the bundle: nofile\.tar\.zst does not exist \(ENOENT\)\n$/);
    r = await run(['hydrate', 'nofile.tar.zst', join(tmp.path, 'h'), '--session-id', 's']);
    assert.match(r.stderr, /^error \[io_failure\]: cannot hydrate the bundle: nofile\.tar\.zst does not exist/);
    r = await run(['inspect', tmp.path]);
    assert.match(r.stderr, /^error \[io_failure\]: cannot inspect the bundle: .* is not a regular file\n$/);
    const text = join(tmp.path, 'notes.tar.zst');
    writeFileSync(text, 'just some text, not zstd\n');
    r = await run(['inspect', text]);
    assert.match(r.stderr, /^error \[integrity_mismatch\]: .*notes\.tar\.zst: .*not a Session Bundle: it is not zstd-compressed/);
    r = await run(['hydrate', text, join(tmp.path, 'h'), '--session-id', 's']);
    assert.match(r.stderr, /^error \[integrity_mismatch\]: .*notes\.tar\.zst: .*not a Session Bundle/);
    const truncated = join(tmp.path, 'cut.tar.zst');
    writeFileSync(truncated, readFileSync(out).subarray(0, 100));
    r = await run(['inspect', truncated]);
    assert.match(r.stderr, /^error \[integrity_mismatch\]: .*cut\.tar\.zst: /);
    r = await run(['hydrate', out, join(tmp.path, 'nodir', 'h'), '--session-id', 's']);
    assert.match(r.stderr, /^error \[io_failure\]: cannot hydrate into .*nodir\/h: the directory .*nodir does not exist/);
    r = await run(['hydrate', out, roots.stateRoot, '--session-id', 's']);
    assert.match(r.stderr, /^error \[destination_exists\]: .*state: /);
  });

  it('hydrating as another session names the session the bundle was packed for and the one expected', async () => {
    const out = join(tmp.path, 's.tar.zst');
    assert.equal((await run(['pack', roots.stateRoot, roots.workspaceRoot, '-o', out, '--session-id', 'demo'])).code, 0);
    const r = await run(['hydrate', out, join(tmp.path, 'h'), '--session-id', 'other']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[identity_mismatch\]: .*s\.tar\.zst: the bundle belongs to session "demo", not to the expected session "other"; use it as "demo", or pack it again with session id "other"\n$/);
    assert.deepEqual(listing(tmp.path), ['s.tar.zst', 'src']);
  });

  it('cleanup refuses a destination that does not exist and has no leftovers, or is not a directory', async () => {
    let r = await run(['cleanup', join(tmp.path, 'does-not-exist')]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[io_failure\]: nothing to clean up for .*does-not-exist: it does not exist, and no interrupted hydrate left staging for it in .*; check the path\n$/);
    r = await run(['cleanup', join(tmp.path, 'nodir', 'dest')]);
    assert.match(r.stderr, /^error \[io_failure\]: cannot clean up for .*nodir\/dest: the directory .*nodir does not exist \(ENOENT\)\n$/);
    r = await run(['cleanup', join(roots.workspaceRoot, 'run.sh')]);
    assert.match(r.stderr, /^error \[io_failure\]: cannot clean up for .*run\.sh: it is not a directory/);
    assert.deepEqual(listing(tmp.path).filter((p) => p.includes('.lock')), [], 'a refused cleanup leaves no lock file');
    // A destination an interrupted hydrate never reached, with its staging beside it: cleaned up.
    const owner = join(tmp.path, '.h.maka-session-bundle-staging-00000000-0000-4000-8000-000000000000.owner.json');
    writeFileSync(owner, 'not an ownership record\n');
    r = await run(['cleanup', join(tmp.path, 'h')]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /removed 0 staging directories/);
  });

  it('reports usage errors with exit 2', async () => {
    for (const argv of [[], ['nope'], ['pack', roots.stateRoot], ['pack', roots.stateRoot, roots.workspaceRoot, '-o', 'x'], ['inspect'], ['inspect', 'f', '--expected-digest', 'SHA256:x'], ['hydrate', 'f', 'd'], ['inspect', 'f', '--bogus']]) {
      const r = await run(argv);
      assert.equal(r.code, 2, `${argv.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /usage/);
    }
    // --help is answered by the CLI's dispatcher for every command (test/unit/cli/help.test.ts).
    const c = captureIo();
    assert.equal(await main(['bundle', '--help'], c.io), 0);
    assert.match(c.out(), /bundle pack/);
  });
});
