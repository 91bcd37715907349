// The companion's in-place reads of a sandbox's workspace (`sandboxes/files/*`) while a command in the sandbox
// keeps swapping a folder for a symbolic link to a folder outside (a Drain lets accepted commands finish, so
// the workspace may still change while it is read): the path is checked, then opened, and whatever the swap
// does between the two, no name or byte from outside comes back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CompanionError } from '../../../protocol/companion';
import { listInWorkspace, readInWorkspace, statInWorkspace } from '../../../server/sandboxes/workspaceReads';

describe('workspace reads in place: a folder swapped for a link leading out meanwhile', function () {
  this.timeout(30_000);
  let work: string;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'workspace-reads-'));
  });

  after(() => {
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('never returns what is outside (the opened descriptor is checked, through Linux /proc/self/fd)', async () => {
    const ws = path.join(work, 'ws');
    const outside = path.join(work, 'outside');
    fs.mkdirSync(path.join(ws, 'd'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(ws, 'd/f'), 'inside');
    fs.writeFileSync(path.join(outside, 'f'), 'OUTSIDE');
    fs.writeFileSync(path.join(outside, 'only-outside'), 'x');
    // Swaps ws/d between the folder and a link to `outside` as fast as it can, until killed.
    const swapper = spawn('sh', ['-c', `cd '${ws}' && mkdir -p keep && while :; do mv d keep/d && ln -s '${outside}' d && rm d && mv keep/d d; done`], { stdio: 'ignore' });
    const seen = { inside: 0, refused: 0, outside: 0 };
    try {
      const deadline = Date.now() + 4000;
      while (Date.now() < deadline) {
        for (const attempt of [
          async () => (await readInWorkspace(ws, 'd/f', 0, 100)).contents.toString(),
          async () => (await listInWorkspace(ws, 'd', 100, '')).entries.map((e) => e.name).join(','),
          async () => String((await statInWorkspace(ws, 'd/f')).sizeBytes),
        ]) {
          try {
            const got = await attempt();
            if (got.includes('OUTSIDE') || got.includes('only-outside') || got === '7') seen.outside += 1;
            else seen.inside += 1;
          } catch (err) {
            assert.ok(err instanceof CompanionError, String(err));
            seen.refused += 1;
          }
        }
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    assert.equal(seen.outside, 0, JSON.stringify(seen));
    assert.ok(seen.inside > 0 && seen.refused > 0, `the swap raced the reads both ways: ${JSON.stringify(seen)}`);
  });
});
