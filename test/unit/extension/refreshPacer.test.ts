// When the changes of a sandbox are compared again: a burst of changes makes one comparison after a quiet
// moment, never two at once, the next no sooner than a few times the last one's duration, and a refresh the user
// asks for runs at once (after the one running) and resolves when a comparison that started after it ends.
import assert from 'node:assert/strict';
import { RefreshPacer } from '../../../extension/changes/refreshPacer';
import { FakeTimers, settle } from '../../fixtures/fakeTimers';

/** A comparison that takes `duration` ms of the fake clock. */
function comparisons(timers: FakeTimers, duration: () => number) {
  const log = { starts: [] as number[], running: 0, maxRunning: 0 };
  const compare = () => {
    log.starts.push(timers.now());
    log.running += 1;
    log.maxRunning = Math.max(log.maxRunning, log.running);
    return new Promise<void>((resolve) =>
      timers.setTimeout(() => {
        log.running -= 1;
        resolve();
      }, duration()),
    );
  };
  return { log, compare };
}

describe('extension: the refresh pacer of sandbox changes', () => {
  it('debounces a burst of changes into one comparison', async () => {
    const timers = new FakeTimers();
    const { log, compare } = comparisons(timers, () => 100);
    const pacer = new RefreshPacer(compare, { timers, debounceMs: 800 });
    for (let i = 0; i < 10; i++) {
      pacer.changed();
      await timers.advance(200);
    }
    assert.deepEqual(log.starts, [], 'nothing while changes keep coming within the quiet time');
    await timers.advance(800);
    assert.deepEqual(log.starts, [2600], '800 ms after the last change (at 1800)');
    await timers.advance(10_000);
    assert.equal(log.starts.length, 1, 'one burst, one comparison');
  });

  it('never runs two at once, and waits a few times the last duration before the next', async () => {
    const timers = new FakeTimers();
    const { log, compare } = comparisons(timers, () => 2000);
    const pacer = new RefreshPacer(compare, { timers, debounceMs: 500, gapFactor: 4, maxGapMs: 60_000 });
    pacer.changed();
    await timers.advance(600); // started at 500, runs until 2500
    pacer.changed();
    await timers.advance(1000);
    assert.equal(log.starts.length, 1, 'a change meanwhile waits for the running one');
    await timers.advance(20_000);
    // The first ended at 2500 after 2000 ms: the next waits 4 × 2000 ms after it.
    assert.deepEqual(log.starts, [500, 10_500]);
    assert.equal(log.maxRunning, 1);
  });

  it('caps the gap, and a refresh asked for runs at once and resolves after a comparison that started after it', async () => {
    const timers = new FakeTimers();
    let duration = 100_000;
    const { log, compare } = comparisons(timers, () => duration);
    const pacer = new RefreshPacer(compare, { timers, debounceMs: 500, gapFactor: 4, maxGapMs: 30_000 });
    let first = false;
    void pacer.now().then(() => (first = true));
    await timers.advance(0);
    assert.deepEqual(log.starts, [0], 'at once');
    let second = false;
    void pacer.now().then(() => (second = true));
    await timers.advance(50_000);
    assert.equal(log.starts.length, 1, 'not while one runs');
    duration = 10;
    await timers.advance(50_000);
    assert.equal(first, true);
    assert.deepEqual(log.starts, [0, 100_000], 'right after the running one, without the gap');
    assert.equal(second, false, 'only a comparison that started after the request counts');
    await timers.advance(10);
    assert.equal(second, true);
    pacer.changed();
    await timers.advance(400);
    assert.equal(log.starts.length, 2, 'the quiet time holds');
    duration = 100_000;
    await timers.advance(200);
    assert.equal(log.starts.length, 3, 'then it runs: the gap after a 10 ms comparison is shorter than that');
    pacer.changed();
    await timers.advance(300_000);
    assert.equal(log.starts[3]! - (log.starts[2]! + 100_000), 30_000, 'a 100 s comparison is followed by at most 30 s of gap');
  });

  it('does nothing after dispose, and releases whoever waits', async () => {
    const timers = new FakeTimers();
    const { log, compare } = comparisons(timers, () => 10);
    const pacer = new RefreshPacer(compare, { timers, debounceMs: 500 });
    pacer.changed();
    const waiting = pacer.now();
    pacer.dispose();
    await waiting;
    pacer.changed();
    await timers.advance(10_000);
    assert.deepEqual(log.starts, []);
  });

  it('keeps going after a comparison fails', async () => {
    const timers = new FakeTimers();
    let calls = 0;
    const pacer = new RefreshPacer(
      () => {
        calls += 1;
        return Promise.reject(new Error('unreachable'));
      },
      { timers, debounceMs: 100 },
    );
    const first = pacer.now();
    await timers.advance(0);
    await first;
    pacer.changed();
    await timers.advance(1000);
    await settle();
    assert.equal(calls, 2);
  });
});
