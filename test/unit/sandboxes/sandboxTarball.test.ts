// The strict reader of a session tarball that a sandbox's own tar made (sandboxTarball.ts): what it carries back
// (files, directories, execute bits; policy-excluded workspace entries read past and reported) and what it refuses
// (links, escaping or absolute paths, a truncated archive, more than the limits), compressed or plain. The archives
// are made by this machine's GNU tar with the very flags the sandbox uses.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { readSessionTarball } from '../../../server/sandboxes/sandboxTarball';

const FLAGS = ['--zstd', '--format=ustar', '--numeric-owner', '--owner=0', '--group=0'];

describe('a session tarball from a sandbox, read strictly', () => {
  let dir: string;
  let n = 0;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-tarball-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A session dir with `files` (relative path → contents; a trailing `*` marks an executable). */
  function session(files: Record<string, string>): string {
    const root = path.join(dir, `src-${++n}`);
    fs.mkdirSync(path.join(root, 'state'), { recursive: true });
    fs.mkdirSync(path.join(root, 'workspace'), { recursive: true });
    for (const [rel, text] of Object.entries(files)) {
      const exec = rel.endsWith('*');
      const p = path.join(root, exec ? rel.slice(0, -1) : rel);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, text, { mode: exec ? 0o755 : 0o644 });
    }
    return root;
  }

  function tarOf(root: string, extra: string[] = [], members = ['state', 'workspace']): string {
    const out = path.join(dir, `t-${++n}.tar.zst`);
    execFileSync('tar', [...FLAGS, ...extra, '-cf', out, '-C', root, ...members]);
    return out;
  }

  it('carries files, directories and execute bits; skips and reports what the workspace policy excludes', async () => {
    const root = session({ 'state/s.json': '{}', 'workspace/src/main.ts': 'x', 'workspace/run.sh*': '#!/bin/sh\n', 'workspace/node_modules/p/i.js': 'big', 'workspace/debug.log': 'noise' });
    fs.mkdirSync(path.join(root, 'workspace/empty'));
    const got = await readSessionTarball(tarOf(root), path.join(dir, 'out'), DEFAULT_PEOPLE_LIMITS);
    assert.equal(fs.readFileSync(path.join(got.stateRoot, 's.json'), 'utf8'), '{}');
    assert.equal(fs.readFileSync(path.join(got.workspaceRoot, 'src/main.ts'), 'utf8'), 'x');
    assert.equal(fs.statSync(path.join(got.workspaceRoot, 'run.sh')).mode & 0o777, 0o755);
    assert.equal(fs.statSync(path.join(got.workspaceRoot, 'src/main.ts')).mode & 0o777, 0o644);
    assert.ok(fs.statSync(path.join(got.workspaceRoot, 'empty')).isDirectory());
    assert.ok(!fs.existsSync(path.join(got.workspaceRoot, 'node_modules')));
    assert.ok(!fs.existsSync(path.join(got.workspaceRoot, 'debug.log')));
    assert.deepEqual(got.skipped.map((s) => s.path).sort(), ['debug.log', 'node_modules/']);
  });

  it('reads the plain tar of an image without zstd the same way, and refuses a zstd one read as plain', async () => {
    const root = session({ 'state/s.json': '{}', 'workspace/run.sh*': '#!/bin/sh\n', 'workspace/debug.log': 'noise' });
    const plain = path.join(dir, `t-${++n}.tar`);
    execFileSync('tar', [...FLAGS.filter((f) => f !== '--zstd'), '-cf', plain, '-C', root, 'state', 'workspace']);
    const got = await readSessionTarball(plain, path.join(dir, 'plain'), DEFAULT_PEOPLE_LIMITS, 'none');
    assert.equal(fs.readFileSync(path.join(got.stateRoot, 's.json'), 'utf8'), '{}');
    assert.equal(fs.statSync(path.join(got.workspaceRoot, 'run.sh')).mode & 0o777, 0o755);
    assert.deepEqual(got.skipped.map((s) => s.path), ['debug.log']);
    await assert.rejects(readSessionTarball(tarOf(root), path.join(dir, 'mixed'), DEFAULT_PEOPLE_LIMITS, 'none'), /tarball/);
    assert.ok(!fs.existsSync(path.join(dir, 'mixed')), 'nothing left of a refused read');
  });

  it('refuses a symbolic link, a path out of the session, an absolute path, a truncated archive and more than the limits', async () => {
    const linked = session({ 'workspace/a': 'a' });
    fs.symlinkSync('a', path.join(linked, 'workspace/link'));
    await assert.rejects(readSessionTarball(tarOf(linked), path.join(dir, 'o1'), DEFAULT_PEOPLE_LIMITS), /workspace\/link is a symbolic link/);
    assert.ok(!fs.existsSync(path.join(dir, 'o1')), 'nothing is left of a refused read');

    const plain = session({ 'workspace/a': 'a' });
    const escaping = tarOf(plain, ['--transform', 's,^workspace/a,workspace/../../evil,', '-P']);
    await assert.rejects(readSessionTarball(escaping, path.join(dir, 'o2'), DEFAULT_PEOPLE_LIMITS), /unsafe path "workspace\/..\/..\/evil"/);
    assert.ok(!fs.existsSync(path.join(dir, 'evil')));
    const absolute = tarOf(plain, ['--transform', 's,^workspace/a,/tmp/evil,', '-P']);
    await assert.rejects(readSessionTarball(absolute, path.join(dir, 'o3'), DEFAULT_PEOPLE_LIMITS), /unsafe path "\/tmp\/evil"/);
    const other = tarOf(plain, ['--transform', 's,^workspace/a,etc/passwd,']);
    await assert.rejects(readSessionTarball(other, path.join(dir, 'o4'), DEFAULT_PEOPLE_LIMITS), /unsafe path "etc\/passwd"/);

    const big = session({ 'workspace/big': 'x'.repeat(200_000) });
    const whole = fs.readFileSync(tarOf(big));
    const cut = path.join(dir, 'cut.tar.zst');
    // A zstd frame cut short: the decompressor or the reader notices, never a half session.
    fs.writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
    await assert.rejects(readSessionTarball(cut, path.join(dir, 'o5'), DEFAULT_PEOPLE_LIMITS), /tarball/);
    await assert.rejects(readSessionTarball(tarOf(big), path.join(dir, 'o6'), { ...DEFAULT_PEOPLE_LIMITS, maxFileBytes: 1000 }), /workspace\/big is 200000 bytes, more than the bundle limit of 1000/);
    await assert.rejects(readSessionTarball(tarOf(big), path.join(dir, 'o7'), { ...DEFAULT_PEOPLE_LIMITS, maxEntryCount: 2 }), /more than 2 entries/);
  });
});
