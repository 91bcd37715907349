// The companion's watch of a local sandbox's folders (server/sandboxes/folderWatch.ts): changes another process
// makes are reported by folder, a few times a second at most; only the folders asked for, confined to the workspace
// (a link leading out is not watched, nor is `..`); nothing after close.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SandboxFolderWatch } from '../../../server/sandboxes/folderWatch';

describe('SandboxFolderWatch (a local sandbox\'s folders, watched in place)', () => {
  let dir: string;
  let root: string;
  let reports: string[][];
  let watch: SandboxFolderWatch;
  /** Woken on every report, so a wait re-checks its condition then (no polling). */
  let wake: (() => void)[] = [];
  const onReport = (folders: string[]): void => {
    reports.push([...folders].sort());
    for (const w of wake.splice(0)) w();
  };

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-watch-'));
    root = path.join(dir, 'workspace');
    fs.mkdirSync(path.join(root, 'src', 'deep'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'outside'));
    fs.symlinkSync(path.join(dir, 'outside'), path.join(root, 'out'));
    fs.symlinkSync('src', path.join(root, 'inner'));
    reports = [];
    wake = [];
    watch = new SandboxFolderWatch(root, onReport, { intervalMs: 50 });
  });
  afterEach(() => {
    watch.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `script` in the workspace as another process would. */
  const sh = (script: string): void => void execFileSync('sh', ['-c', script], { cwd: root });
  const reported = (): string[] => [...new Set(reports.flat())].sort();
  /** Resolves once `cond` holds, re-checked on each report; fails after 10 s without it. */
  async function until(what: string, cond: () => boolean): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!cond()) {
      const left = deadline - Date.now();
      assert.ok(left > 0, `${what}; reports: ${JSON.stringify(reports)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left); // the deadline, not a pause: a report wakes this at once
        wake.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  it('reports the folders another process changed, each once per interval', async () => {
    // A second's interval: the eight writes below (milliseconds apart) fall into one or two reports, never eight.
    watch.close();
    watch = new SandboxFolderWatch(root, onReport, { intervalMs: 1000 });
    assert.deepEqual(await watch.set(['', 'src']), ['', 'src']);
    sh('echo x > src/new.txt; for i in 1 2 3 4 5; do echo $i >> src/new.txt; done; mkdir made');
    await until('both folders reported', () => reported().includes('') && reported().includes('src'));
    assert.ok(reports.length <= 2, `one report per interval, not one per write: ${JSON.stringify(reports)}`);
  });

  it('watches only the folders asked for: not their subfolders, and after a new set only the new ones', async () => {
    await watch.set(['src/deep']);
    sh('echo x > src/not-watched.txt; echo y > src/deep/watched.txt');
    await until('src/deep reported', () => reported().includes('src/deep'));
    assert.deepEqual(reported(), ['src/deep']);

    reports = [];
    assert.deepEqual(await watch.set(['']), ['']);
    sh('echo z > src/deep/again.txt; echo w > top.txt');
    await until('the root reported', () => reported().includes(''));
    assert.deepEqual(reported(), ['']);
  });

  it('does not watch outside the workspace: a link leading out, `..`, an absolute path, a file, a missing folder', async () => {
    assert.deepEqual(await watch.set(['out', '..', path.join(dir, 'outside'), '../outside', 'src/deep/../../..', 'missing', 'inner']), ['inner']);
    fs.writeFileSync(path.join(dir, 'outside', 'secret.txt'), 'x');
    sh('echo x > src/through-link.txt'); // `inner` is a link to src, inside: watched
    await until('the folder behind the inner link reported', () => reported().includes('inner'));
    assert.deepEqual(reported(), ['inner']);
  });

  it('reports a watched folder that is removed, and nothing after close', async () => {
    await watch.set(['src/deep']);
    sh('rm -r src/deep');
    await until('the removed folder reported', () => reported().includes('src/deep'));
    reports = [];
    await watch.set(['src']);
    watch.close();
    sh('echo late > src/late.txt');
    // A second watch of the same folder hears a write made after that one: events of the earlier write were due first.
    const later: string[][] = [];
    const witness = new SandboxFolderWatch(root, (folders) => {
      later.push(folders);
      for (const w of wake.splice(0)) w();
    }, { intervalMs: 50 });
    try {
      await witness.set(['src']);
      sh('echo later > src/later.txt');
      await until('the second watch reports the later write', () => later.length > 0);
    } finally {
      witness.close();
    }
    assert.deepEqual(reports, [], 'no report after close');
    assert.deepEqual(watch.folders, []);
  });
});
