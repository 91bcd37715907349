// Moving a hydrated session straight into a local sandbox's directory: by rename on one file system and by copy
// across two (/dev/shm is tmpfs here, the temp directory is not), modes and empty directories kept, nothing
// replaced; and the host directory is used only when it is the very root commands see.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { confirmedHostRoot, placeSession, placeTree } from '../../../server/sandboxes/hostPlacement';

function hydratedTree(parent: string): string {
  const root = fs.mkdtempSync(path.join(parent, 'hydrated-'));
  fs.mkdirSync(path.join(root, 'state/empty'), { recursive: true });
  fs.mkdirSync(path.join(root, 'workspace/src'), { recursive: true });
  fs.writeFileSync(path.join(root, 'state/session.bin'), Buffer.from([0, 1, 2, 255]), { mode: 0o644 });
  fs.writeFileSync(path.join(root, 'workspace/run.sh'), '#!/bin/sh\necho ok\n', { mode: 0o755 });
  fs.writeFileSync(path.join(root, 'workspace/src/a.txt'), 'a', { mode: 0o644 });
  return root;
}

function describeTree(root: string): string[] {
  const out: string[] = [];
  const visit = (rel: string): void => {
    for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
      const child = rel === '' ? name : `${rel}/${name}`;
      const st = fs.lstatSync(path.join(root, child));
      const mode = (st.mode & 0o777).toString(8);
      if (st.isDirectory()) {
        out.push(`${child}/ ${mode}`);
        visit(child);
      } else out.push(`${child} ${mode} ${fs.readFileSync(path.join(root, child)).toString('hex')}`);
    }
  };
  visit('');
  return out;
}

describe('host placement of a session (local sandboxes)', () => {
  let work: string;
  const shm = fs.existsSync('/dev/shm') ? fs.mkdtempSync('/dev/shm/placement-') : undefined;
  beforeEach(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'placement-'));
  });
  afterEach(() => fs.rmSync(work, { recursive: true, force: true }));
  after(() => shm && fs.rmSync(shm, { recursive: true, force: true }));

  it('renames state and workspace into the session directory, modes and empty directories kept', async () => {
    const hydrated = hydratedTree(work);
    const expected = describeTree(hydrated).filter((l) => l.startsWith('state') || l.startsWith('workspace'));
    const sandboxRoot = path.join(work, 'sandbox');
    fs.mkdirSync(sandboxRoot);
    await placeSession(hydrated, path.join(sandboxRoot, 'session'));
    assert.deepEqual(describeTree(path.join(sandboxRoot, 'session')), expected);
    assert.deepEqual(fs.readdirSync(hydrated), [], 'moved, not copied');
    assert.equal(fs.statSync(path.join(sandboxRoot, 'session')).mode & 0o777, 0o755);
  });

  it('copies across file systems (EXDEV) with the same result, and removes the source', async () => {
    assert.ok(shm !== undefined, 'this test needs /dev/shm (tmpfs) beside the temp directory');
    const hydrated = hydratedTree(shm);
    assert.notEqual(fs.statSync(hydrated).dev, fs.statSync(work).dev, 'the two roots are on different file systems');
    const expected = describeTree(hydrated).filter((l) => l.startsWith('state') || l.startsWith('workspace'));
    await placeSession(hydrated, path.join(work, 'session'));
    assert.deepEqual(describeTree(path.join(work, 'session')), expected);
    assert.deepEqual(fs.readdirSync(hydrated), []);
  });

  it('never replaces: an existing session directory or target is refused and left as it was', async () => {
    const hydrated = hydratedTree(work);
    fs.mkdirSync(path.join(work, 'session'));
    await assert.rejects(placeSession(hydrated, path.join(work, 'session')), (e: NodeJS.ErrnoException) => e.code === 'EEXIST');
    fs.mkdirSync(path.join(work, 'taken'));
    fs.writeFileSync(path.join(work, 'taken/keep.txt'), 'mine');
    await assert.rejects(placeTree(path.join(hydrated, 'workspace'), path.join(work, 'taken')), (e: NodeJS.ErrnoException) => e.code === 'EEXIST');
    assert.deepEqual(fs.readdirSync(path.join(work, 'taken')), ['keep.txt']);
    fs.mkdirSync(path.join(work, 'empty')); // rename(2) alone would replace an empty directory
    await assert.rejects(placeTree(path.join(hydrated, 'workspace'), path.join(work, 'empty')), (e: NodeJS.ErrnoException) => e.code === 'EEXIST');
    assert.ok(fs.existsSync(path.join(hydrated, 'workspace/run.sh')), 'the source is intact');
  });

  it('uses the host directory only when it is the root commands see', async () => {
    const root = path.join(work, 'root');
    fs.mkdirSync(root);
    fs.symlinkSync(root, path.join(work, 'alias'));
    assert.equal(await confirmedHostRoot(root, path.join(work, 'alias')), fs.realpathSync(root));
    assert.equal(await confirmedHostRoot(root, path.join(work, 'elsewhere')), undefined, 'a root this machine does not have');
    fs.mkdirSync(path.join(work, 'other'));
    assert.equal(await confirmedHostRoot(root, path.join(work, 'other')), undefined);
    assert.equal(await confirmedHostRoot(undefined, root), undefined);
  });
});
