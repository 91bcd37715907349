// One daemon per state directory, even when several starters find the same stale lock at once
// (the companion's request and its Run watch both restarting a killed daemon): exactly one may
// take the lock, and none may remove another's fresh lock.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { acquireDaemonLock, breakStaleLock } from '../../../server/gateway/daemonLock';
import { bootId, processStartTime } from '../../../server/platform/processIdentity';

describe('local gateway: daemon lock', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'daemon-lock-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const stale of ['a dead owner', 'a damaged file'] as const) {
    it(`8 concurrent starters and a lock left by ${stale}: exactly one acquires it`, async () => {
      const file = path.join(dir, 'gateway.lock');
      // A pid that has just exited is a dead owner.
      const dead = spawnSync('true').pid ?? 999999;
      fs.writeFileSync(file, stale === 'a dead owner' ? JSON.stringify({ pid: dead, startTime: '1', bootId: bootId() }) + '\n' : '{"pid":');
      const results = await Promise.all(Array.from({ length: 8 }, () => acquireDaemonLock(file)));
      assert.equal(results.filter((r) => r.acquired).length, 1, JSON.stringify(results.map((r) => r.acquired)));
      assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).pid, process.pid);
      assert.equal(fs.existsSync(`${file}.break`), false, 'no breaker left behind');
    });
  }

  it('a starter that saw the stale lock never removes the fresh lock another starter took meanwhile', async () => {
    const file = path.join(dir, 'gateway.lock');
    const dead = { pid: spawnSync('true').pid ?? 999999, startTime: '1', bootId: bootId() };
    fs.writeFileSync(file, JSON.stringify(dead) + '\n');
    // Another starter breaks the stale lock and takes it (a live owner: this process) …
    const live = { pid: process.pid, startTime: processStartTime(process.pid) ?? 'unknown', bootId: bootId() };
    fs.rmSync(file);
    fs.writeFileSync(file, JSON.stringify(live) + '\n');
    // … then this starter, still holding the dead owner it read, tries to break "the stale lock".
    await breakStaleLock(file, dead);
    assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), live, 'the live lock survives');
    assert.equal(fs.existsSync(`${file}.break`), false);
  });
});
