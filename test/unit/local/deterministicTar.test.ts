// Directory artifacts are deterministic: the same tree gives the same tar bytes whatever the
// mtimes, owners or creation order; names over 100 bytes use the USTAR prefix; special files
// are refused.
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { tarDirectory } from '../../../server/local/deterministicTar';

async function tarBytes(dir: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of tarDirectory(dir)) parts.push(p);
  return Buffer.concat(parts);
}

describe('local runtime: deterministic tar', () => {
  let dir: string;
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-tar-'));
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives identical bytes for identical content, and GNU tar reads it back', async () => {
    const long = `${'d'.repeat(80)}/${'f'.repeat(60)}.txt`;
    for (const [root, order, when] of [
      ['one', ['b', 'a/x', long], new Date(2020, 1, 1)],
      ['two', [long, 'a/x', 'b'], new Date(2024, 5, 5)],
    ] as const) {
      for (const rel of order) {
        const file = path.join(dir, root, rel);
        await fs.mkdir(path.dirname(file), { recursive: true });
        await fs.writeFile(file, `content of ${rel}`);
        await fs.utimes(file, when, when);
      }
    }
    const a = await tarBytes(path.join(dir, 'one'));
    const b = await tarBytes(path.join(dir, 'two'));
    assert.ok(a.equals(b));
    assert.equal(a.length % 512, 0);
    await fs.writeFile(path.join(dir, 'one.tar'), a);
    const listing = execFileSync('tar', ['-tvf', path.join(dir, 'one.tar')], { encoding: 'utf8' });
    assert.match(listing, /root\/root|0\/0/);
    assert.match(listing, /1970-01-01/);
    assert.ok(listing.includes(long));
  });

  it('refuses a FIFO', async () => {
    const d = path.join(dir, 'fifo');
    await fs.mkdir(d);
    execFileSync('mkfifo', [path.join(d, 'pipe')]);
    await assert.rejects(tarBytes(d), /not a regular file, directory or symlink/);
  });
});
