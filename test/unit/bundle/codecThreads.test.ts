// Warm codec threads (server/bundle/codecThreads.ts): a thread whose job ended is reused by the next codec job of the
// process (an activation's hydrate and pack no longer start five threads every turn), a job abandoned midway ends its
// thread, idle threads end on their own and never keep a process alive — and the bytes are the same either way.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS, type SessionBundleLimits } from '../../../protocol/bundle';
import { hydrateSessionBundle, packSessionBundle } from '../../../server/bundle';
import { type CodecThread, codecThreadStats, endIdleCodecThreads, startCodecWorker } from '../../../server/bundle/codecThreads';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { rejectsWith } from '../../fixtures/bundle/harness';
import { until } from '../../fixtures/waits';
import { THREADS_EVERYWHERE, threadCount, tune } from './threadTuning';

const LIMITS: SessionBundleLimits = { ...CODEC_TEST_LIMITS, maxCompressedBytes: 64 << 20, maxDecompressedTarBytes: 64 << 20, maxPayloadBytes: 64 << 20, maxFileBytes: 8 << 20 };
const HEAP = { youngMb: 2, oldMb: 16 };

/** A job answering each message with its thread's id and a count of the messages it got (its own state). */
const ECHO = `
'use strict';
const { threadId } = require('node:worker_threads');
let seen = 0;
parentPort.on('message', (m) => {
  seen += 1;
  if (m === 'spin') for (;;) {}
  parentPort.postMessage({ threadId, seen });
});`;

function ask(job: CodecThread, message: string): Promise<{ threadId: number; seen: number }> {
  return new Promise((resolve, reject) => {
    job.on('message', resolve);
    job.on('error', reject);
    job.postMessage(message);
  });
}

describe('bundle/warm codec threads', function () {
  this.timeout(120_000);
  let dir: ReturnType<typeof tempDir>;
  let restore: (() => void) | undefined;

  beforeEach(async () => {
    dir = tempDir();
    await endIdleCodecThreads();
  });
  afterEach(async () => {
    restore?.();
    restore = undefined;
    await endIdleCodecThreads();
    dir.cleanup();
  });

  it('a job that ended is followed on the same thread by the next one, which sees none of its state', async () => {
    const started = codecThreadStats().started;
    const first = startCodecWorker(ECHO, {}, HEAP);
    const a = await ask(first, 'hello');
    first.release();
    assert.deepEqual(codecThreadStats(), { started: started + 1, leased: 0, idle: 1 });
    const second = startCodecWorker(ECHO, {}, HEAP);
    const b = await ask(second, 'hello');
    assert.equal(b.threadId, a.threadId, 'the warm thread ran the second job');
    assert.equal(b.seen, 1, "the second job starts from its own state, not the first job's");
    assert.equal(codecThreadStats().started, started + 1, 'no new thread was started');
    // The first job's handle is spent: terminating it must not stop the thread the second job now runs on.
    await first.terminate();
    assert.equal((await ask(second, 'again')).seen, 2);
    second.release();
  });

  it('a job abandoned midway ends its thread (even inside a synchronous loop) and is never handed on', async () => {
    const job = startCodecWorker(ECHO, {}, HEAP);
    const { threadId } = await ask(job, 'hello');
    job.postMessage('spin');
    const threads = threadCount();
    await job.terminate();
    job.release(); // too late: a terminated job's thread is gone, not parked
    await until('the thread is joined', () => threadCount() === threads - 1, 5000);
    assert.deepEqual({ leased: codecThreadStats().leased, idle: codecThreadStats().idle }, { leased: 0, idle: 0 });
    const next = startCodecWorker(ECHO, {}, HEAP);
    assert.notEqual((await ask(next, 'hello')).threadId, threadId);
    next.release();
  });

  it('hydrate and pack on warm threads start no new thread and give the same bytes; a failed hydrate ends the threads it used', async () => {
    restore = tune(THREADS_EVERYWHERE);
    const roots = createFixture(join(dir.path, 'src'));
    const cold = await packSessionBundle({ ...fixturePackOptions(roots, join(dir.path, 'cold.tar.zst')), limits: LIMITS });
    const h1 = await hydrateSessionBundle({ source: { path: cold.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h1'), limits: LIMITS });
    const started = codecThreadStats().started;
    assert.ok(codecThreadStats().idle >= 3, `threads came back: ${JSON.stringify(codecThreadStats())}`);
    const warm = await packSessionBundle({ ...fixturePackOptions(roots, join(dir.path, 'warm.tar.zst')), limits: LIMITS });
    const h2 = await hydrateSessionBundle({ source: { path: warm.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h2'), limits: LIMITS });
    assert.equal(codecThreadStats().started, started, 'the second pack and hydrate ran on the threads the first ones left');
    assert.ok(readFileSync(warm.path).equals(readFileSync(cold.path)), 'the same archive, byte for byte');
    assert.equal(warm.archiveDigest, GOLDEN.archiveDigest);
    for (const file of ['workspace/run.sh', 'workspace/深/x.txt', 'state/session.bin']) {
      assert.ok(readFileSync(join(h2.destinationRoot, file)).equals(readFileSync(join(h1.destinationRoot, file))), file);
    }

    const idle = codecThreadStats().idle;
    truncateSync(warm.path, statSync(warm.path).size - 64);
    await rejectsWith(hydrateSessionBundle({ source: { path: warm.path }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(dir.path, 'h3'), limits: LIMITS }), 'integrity_mismatch');
    assert.equal(codecThreadStats().leased, 0);
    // Reader and writers (THREADS_EVERYWHERE: 2) were abandoned midway: none of them went back.
    assert.equal(codecThreadStats().idle, idle - 3, 'the failed hydrate ended its three threads');
    rmSync(join(dir.path, 'h1'), { recursive: true });
  });

  it('idle threads end after idleThreadMs', async () => {
    restore = tune({ idleThreadMs: 100 });
    const threads = threadCount();
    const job = startCodecWorker(ECHO, {}, HEAP);
    await ask(job, 'hello');
    job.release();
    assert.equal(codecThreadStats().idle, 1);
    await until('the idle thread ends', () => codecThreadStats().idle === 0 && threadCount() === threads, 10_000);
  });

  it('idle threads never keep a process alive: a CLI-like process that packs on worker threads exits by itself', async () => {
    const script = join(dir.path, 'pack.ts');
    const repo = join(__dirname, '../../..');
    writeFileSync(
      script,
      `import { bundleTuning } from ${JSON.stringify(join(repo, 'server/bundle/tuning'))};
import { packSessionBundle } from ${JSON.stringify(join(repo, 'server/bundle'))};
import { codecThreadStats } from ${JSON.stringify(join(repo, 'server/bundle/codecThreads'))};
import { createFixture, fixturePackOptions } from ${JSON.stringify(join(repo, 'test/fixtures/bundle/goldenFixture'))};
Object.assign(bundleTuning, ${JSON.stringify(THREADS_EVERYWHERE)});
const roots = createFixture(${JSON.stringify(join(dir.path, 'child'))});
void packSessionBundle({ ...fixturePackOptions(roots, ${JSON.stringify(join(dir.path, 'child.tar.zst'))}), limits: ${JSON.stringify(LIMITS)} }).then(() => {
  console.log(JSON.stringify(codecThreadStats()));
});
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    // A process held by an idle thread would never exit: give up (and fail) after a minute, however slow the machine.
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearTimeout(killer);
    const stats = JSON.parse(out) as { idle: number };
    assert.equal(code, 0, 'the process exited by itself');
    assert.ok(stats.idle > 0, 'the pack left idle threads behind, and the process still exited');
  });
});
