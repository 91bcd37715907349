// Workspace path rules in isolation: the lexical refusals and symlink escapes, including a
// dangling link and createParents through a link.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GatewayMessages } from '../../../protocol/kruntimes/gateway';
import { cleanRelative, resolveFollow, resolveWorkspacePath } from '../../../server/local/workspacePaths';

describe('local runtime: workspace paths', () => {
  let dir: string;
  let ws: string;
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-paths-'));
    ws = path.join(dir, 'ws');
    await fs.mkdir(path.join(ws, 'sub'), { recursive: true });
    await fs.writeFile(path.join(dir, 'outside.txt'), 'secret');
    await fs.symlink('../outside.txt', path.join(ws, 'out-file'));
    await fs.symlink('..', path.join(ws, 'up'));
    await fs.symlink('sub', path.join(ws, 'in-dir'));
    await fs.symlink('/nonexistent/place', path.join(ws, 'dangling'));
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('refuses empty, absolute, escaping and root paths with the kruntimes messages', () => {
    assert.throws(() => cleanRelative('', { allowRoot: false }), { message: GatewayMessages.pathRequired });
    assert.throws(() => cleanRelative('/etc', { allowRoot: false }), { message: GatewayMessages.pathRelative });
    assert.throws(() => cleanRelative('../x', { allowRoot: false }), { message: GatewayMessages.pathEscape });
    assert.throws(() => cleanRelative('a/../../x', { allowRoot: false }), { message: GatewayMessages.pathEscape });
    assert.throws(() => cleanRelative('a/..', { allowRoot: false }), { message: GatewayMessages.pathRoot });
    assert.equal(cleanRelative('a//b/./c/', { allowRoot: false }), 'a/b/c');
    assert.equal(cleanRelative('', { allowRoot: true }), '');
  });

  it('refuses symlink escapes, follows links that stay inside', async () => {
    await assert.rejects(resolveFollow(ws, 'out-file'), { message: GatewayMessages.pathSymlinkEscape });
    await assert.rejects(resolveWorkspacePath(ws, 'up/outside.txt'), { message: GatewayMessages.pathSymlinkEscape });
    await assert.rejects(resolveFollow(ws, 'up', { allowRoot: true }), { message: GatewayMessages.pathSymlinkEscape });
    await assert.rejects(resolveFollow(ws, 'dangling'), { message: GatewayMessages.pathSymlinkEscape });
    await assert.rejects(resolveWorkspacePath(ws, 'dangling/x', { createParents: true }), { message: GatewayMessages.pathSymlinkEscape });
    const inside = await resolveFollow(ws, 'in-dir');
    assert.equal(inside.abs, path.join(await fs.realpath(ws), 'sub'));
  });

  it('createParents creates what is missing; without it a missing parent is a resolve error', async () => {
    await assert.rejects(resolveWorkspacePath(ws, 'new/deep/f.txt'), /^Error: resolve file parent: lstat .*\/new: no such file or directory$|resolve file parent/);
    const r = await resolveWorkspacePath(ws, 'in-dir/new/deep/f.txt', { createParents: true });
    assert.equal(r.abs, path.join(await fs.realpath(ws), 'sub/new/deep/f.txt'));
    assert.ok((await fs.stat(path.join(ws, 'sub/new/deep'))).isDirectory());
  });
});
