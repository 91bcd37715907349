// The CLI's compile cache (server/cli/compileCache.ts): kept in the user's own cache directory, created 0700,
// refused when the directory is not a private one of this user, and never in the way: a CLI whose cache
// directory cannot be had runs and answers the same, with nothing on stderr.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compileCacheDir, enableCompileCache } from '../../../server/cli/compileCache';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/** `sandbox-sessions bundle cleanup <dir>` as a real process, with `XDG_CACHE_HOME` set to `cacheHome`. */
async function cleanup(dir: string, cacheHome: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: cacheHome };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'server/main.ts'), 'bundle', 'cleanup', dir], { cwd: REPO_ROOT, env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr };
}

describe('cli: compile cache', function () {
  this.timeout(60_000);
  let work: string;
  beforeEach(() => (work = fs.mkdtempSync(path.join(os.tmpdir(), 'compile-cache-'))));
  afterEach(() => fs.rmSync(work, { recursive: true, force: true }));

  it('lives under $XDG_CACHE_HOME (absolute), else ~/.cache; nowhere without an absolute base', () => {
    assert.equal(compileCacheDir({ XDG_CACHE_HOME: '/x/cache' }, '/home/u'), '/x/cache/sandbox-sessions/compile-cache');
    assert.equal(compileCacheDir({ XDG_CACHE_HOME: 'relative' }, '/home/u'), '/home/u/.cache/sandbox-sessions/compile-cache');
    assert.equal(compileCacheDir({}, '/home/u'), '/home/u/.cache/sandbox-sessions/compile-cache');
    assert.equal(compileCacheDir({}, ''), undefined);
  });

  it('is refused in a directory others may write, and through a symlink', () => {
    const open = path.join(work, 'open');
    fs.mkdirSync(open, { mode: 0o700 });
    fs.chmodSync(open, 0o770);
    assert.equal(enableCompileCache(open), false);
    const real = path.join(work, 'real');
    fs.mkdirSync(real, { mode: 0o700 });
    const link = path.join(work, 'link');
    fs.symlinkSync(real, link);
    assert.equal(enableCompileCache(link), false);
  });

  it('a CLI call creates it 0700 and fills it; an unusable cache directory changes nothing of the answer', async () => {
    const empty = path.join(work, 'empty');
    fs.mkdirSync(empty);
    const cached = await cleanup(empty, path.join(work, 'cache'));
    assert.equal(cached.code, 0, cached.stderr);
    const dir = path.join(work, 'cache', 'sandbox-sessions', 'compile-cache');
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    const entries = fs.readdirSync(dir, { recursive: true }).filter((f) => fs.statSync(path.join(dir, String(f))).isFile());
    assert.ok(entries.length > 0, 'the cache holds compiled code after a call');

    const file = path.join(work, 'not-a-directory');
    fs.writeFileSync(file, '');
    const uncached = await cleanup(empty, file);
    assert.deepEqual(uncached, { code: 0, stdout: cached.stdout, stderr: '' });
  });
});
