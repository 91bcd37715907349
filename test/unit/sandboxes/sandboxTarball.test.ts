// The strict reader of a session tarball that a sandbox's own tar made (sandboxTarball.ts): what it carries back
// (files, directories, execute bits; policy-excluded workspace entries read past and reported; BusyBox's long names
// and hard links, the links as copies) and what it refuses (symbolic links, escaping or absolute paths, hard links to
// anything but a file carried before them, long names past the limits, a truncated archive, more than the limits),
// compressed or plain. The archives are made by this machine's GNU tar and Debian's BusyBox with the very flags the
// sandbox uses, or written header by header where no tar writes them.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { readSessionTarball } from '../../../server/sandboxes/sandboxTarball';
import { header, pad } from '../../fixtures/bundle/maliciousArchive';

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

  it("reads BusyBox's tarball: GNU long names and long link names, hard links as copies, symbolic links followed", async () => {
    const deep = `workspace/${'d'.repeat(60)}/${'e'.repeat(60)}`;
    const root = session({ 'state/s.json': '{}', [`${deep}/first.txt`]: 'shared', 'workspace/tool*': '#!/bin/sh\n' });
    fs.linkSync(path.join(root, deep, 'first.txt'), path.join(root, deep, 'second.txt'));
    fs.symlinkSync('tool', path.join(root, 'workspace/tool-link'));
    const plain = path.join(dir, `t-${++n}.tar`);
    execFileSync('busybox', ['tar', '-c', '-h', '-f', plain, '-C', root, 'state', 'workspace']);
    const types = new Set<string>();
    const bytes = fs.readFileSync(plain);
    for (let at = 0; at + 512 <= bytes.length; at += 512) types.add(String.fromCharCode(bytes[at + 156] as number));
    assert.ok(['L', 'K', '1'].every((t) => types.has(t)), `BusyBox wrote long names, long link names and hard links (${[...types].join('')})`);

    const got = await readSessionTarball(plain, path.join(dir, 'busybox'), DEFAULT_PEOPLE_LIMITS, 'none');
    for (const name of ['first.txt', 'second.txt']) {
      const file = path.join(got.workspaceRoot, deep.slice('workspace/'.length), name);
      assert.equal(fs.readFileSync(file, 'utf8'), 'shared');
      assert.equal(fs.statSync(file).nlink, 1, `${name} is a file of its own`);
    }
    assert.ok(fs.lstatSync(path.join(got.workspaceRoot, 'tool-link')).isFile());
    assert.equal(fs.statSync(path.join(got.workspaceRoot, 'tool')).mode & 0o777, 0o755);
    assert.equal(fs.readFileSync(path.join(got.stateRoot, 's.json'), 'utf8'), '{}');
  });

  /** A plain tar written header by header: GNU magic, as BusyBox writes it. */
  function crafted(entries: { path: string; type?: string; content?: string; link?: string; size?: number }[], end = true): string {
    const parts: Buffer[] = [];
    for (const e of entries) {
      const content = Buffer.from(e.content ?? '');
      const size = e.size ?? content.length;
      const kind = e.type === '5' ? 'directory' : 'file';
      parts.push(header({ path: e.path, kind, mode: 0o644, size }, { typeflag: e.type ?? '0', linkname: e.link ?? '', magic: 'ustar  \0' }), content, pad(content.length));
    }
    if (end) parts.push(Buffer.alloc(1024));
    const file = path.join(dir, `c-${++n}.tar`);
    fs.writeFileSync(file, Buffer.concat(parts));
    return file;
  }
  const longName = (name: string) => ({ path: '././@LongLink', type: 'L', content: `${name}\0` });
  const longLink = (name: string) => ({ path: '././@LongLink', type: 'K', content: `${name}\0` });

  it('refuses a hard link to anything but a file carried before it, a long name past the limits or left without an entry, and what they name out of the session', async () => {
    const dirs = [
      { path: 'state/', type: '5' },
      { path: 'workspace/', type: '5' },
    ];
    const cases: [string, Parameters<typeof crafted>[0], RegExp, boolean?][] = [
      ['a link to a file named later', [...dirs, { path: 'workspace/a', type: '1', link: 'workspace/b' }, { path: 'workspace/b', content: 'b' }], /workspace\/a is a hard link to workspace\/b, which is not a file the tarball carried before it/],
      ['a link to a directory', [...dirs, { path: 'workspace/d/', type: '5' }, { path: 'workspace/a', type: '1', link: 'workspace/d' }], /workspace\/a is a hard link to workspace\/d, which is not a file/],
      ['a link out of the session', [...dirs, { path: 'workspace/a', type: '1', link: '../../etc/passwd' }], /unsafe path "..\/..\/etc\/passwd"/],
      ['a link by a long link name out of the session', [...dirs, longLink(`workspace/${'x/'.repeat(60)}../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../etc/passwd`), { path: 'workspace/a', type: '1' }], /unsafe path/],
      ['a link with content', [...dirs, { path: 'workspace/b', content: 'b' }, { path: 'workspace/a', type: '1', link: 'workspace/b', content: 'sneaked in' }], /workspace\/a: a hard link entry with content/],
      ['a link to a file the policy left out', [...dirs, { path: 'workspace/debug.log', content: 'log' }, { path: 'workspace/a', type: '1', link: 'workspace/debug.log' }], /which is not a file the tarball carried before it/],
      ['a long name out of the session', [...dirs, longName(`workspace/${'y'.repeat(120)}/../../../evil`), { path: 'workspace/a', content: 'a' }], /unsafe path/],
      ['a long name past the limit', [...dirs, longName(`workspace/${'z'.repeat(5000)}`), { path: 'workspace/a', content: 'a' }], /a GNU long name of 5011 bytes: longer than the bundle limits allow/],
      ['two long names for one entry', [...dirs, longName('workspace/a'), longName('workspace/b'), { path: 'workspace/c', content: 'c' }], /two GNU long names for one entry/],
      ['a long link name before a file', [...dirs, longLink('workspace/a'), { path: 'workspace/c', content: 'c' }], /a GNU long link name before an entry that is not a link/],
      ['a long name and then the end', [...dirs, longName('workspace/a')], /truncated/],
    ];
    for (const [what, entries, message] of cases) {
      const into = path.join(dir, `refused-${++n}`);
      await assert.rejects(readSessionTarball(crafted(entries), into, DEFAULT_PEOPLE_LIMITS, 'none'), message, what);
      assert.ok(!fs.existsSync(into), `${what}: nothing is left of a refused read`);
    }
    // The same tarball shapes read when they are sound: a long name, and a link (by a long link name) to a file before it.
    const name = `workspace/${'q'.repeat(150)}`;
    const got = await readSessionTarball(
      crafted([...dirs, longName(name), { path: 'workspace/q', content: 'long' }, longLink(name), { path: 'workspace/r', type: '1' }]),
      path.join(dir, 'sound'),
      DEFAULT_PEOPLE_LIMITS,
      'none',
    );
    assert.equal(fs.readFileSync(path.join(got.workspaceRoot, 'q'.repeat(150)), 'utf8'), 'long');
    assert.equal(fs.readFileSync(path.join(got.workspaceRoot, 'r'), 'utf8'), 'long');
    assert.ok(!fs.existsSync(path.join(got.workspaceRoot, 'q')), 'the long name is the entry\'s name, not the header\'s');
  });
});
