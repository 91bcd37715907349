// The live change feed of a shown sandbox: other clients' audit lines re-check the window's folders
// (debounced: one re-check per burst, at least one per second of a steady stream), this window's own
// operations do not (and a mix-up never loses a change), a failed follow is retried with backoff
// and warned about once, and what it remembers is bounded.
import assert from 'node:assert/strict';
import { type FeedFollow, MAX_REPLAY_LINES, SandboxChangeFeed, timeNs } from '../../../extension/fs/sandboxChangeFeed';
import { KEEP_MS, MAX_PER_SANDBOX, OwnOperations, OwnOperationsClient } from '../../../extension/sandboxes/ownOperations';
import { FakeTimers } from '../../fixtures/fakeTimers';

const T0 = Date.parse('2030-01-01T00:00:00Z');
const KEY = 'local.local.default.sbx';


/** A sandbox log the feed follows: the test writes lines and ends or breaks follows. */
class FakeLog {
  readonly follows: { query: { sinceTime: string; tailLines: number }; deliver: (lines: string[]) => void; end: () => void; fail: (e: Error) => void; stopped: boolean }[] = [];
  follow = (query: { sinceTime: string; tailLines: number }, onLines: (lines: string[]) => void): FeedFollow => {
    let end!: () => void;
    let fail!: (e: Error) => void;
    const done = new Promise<void>((resolve, reject) => {
      end = resolve;
      fail = reject;
    });
    const f = { query, deliver: onLines, end, fail, stopped: false };
    this.follows.push(f);
    return { done, stop: () => (f.stopped = true) };
  };
  get current() {
    const f = this.follows.at(-1);
    assert.ok(f, 'a follow');
    return f;
  }
}

/** runtimed's audit line of one operation, as `kubectl logs --timestamps` prints it (ns precision). */
function audit(operation: string, atMs: number, extra = '123456'): string {
  const time = new Date(atMs).toISOString().replace('Z', `${extra}Z`);
  return `${time} ${JSON.stringify({
    run_uid: 'u',
    run_name: 'sbx',
    namespace: 'default',
    runtime: 'process',
    pod: 'local-process',
    stream: 'audit',
    message: 'session operation completed',
    operation,
    outcome: 'succeeded',
    duration_milliseconds: 3,
  })}`;
}

function stdout(atMs: number, message: string): string {
  return `${new Date(atMs).toISOString()} ${JSON.stringify({ run_uid: 'u', run_name: 'sbx', namespace: 'default', runtime: 'process', pod: 'p', stream: 'stdout', message })}`;
}

function setup(options: { ended?: () => boolean; recheck?: () => Promise<void> } = {}) {
  const timers = new FakeTimers(T0);
  const log = new FakeLog();
  const own = new OwnOperations();
  const messages: string[] = [];
  let rechecks = 0;
  const feed = new SandboxChangeFeed({
    label: 'sbx',
    follow: log.follow,
    isOwn: (kind, at) => own.claim(KEY, kind, at, timers.now()),
    recheck:
      options.recheck ??
      (() => {
        rechecks += 1;
        return Promise.resolve();
      }),
    ended: options.ended ?? (() => false),
    log: { info: (m) => messages.push(`info: ${m}`), warn: (m) => messages.push(`warn: ${m}`) },
    timers,
  });
  return { timers, log, own, feed, messages, rechecks: () => rechecks };
}

describe('live sandbox changes: the change feed', () => {
  it('re-checks once per burst of other clients’ changes, 150 ms after the last, and at least once a second while they go on', async () => {
    const { timers, log, feed, rechecks } = setup();
    // The follow starts shortly before now (whole seconds), bounded to the last lines.
    assert.equal(log.current.query.sinceTime, '2029-12-31T23:59:58Z');
    assert.equal(log.current.query.tailLines, MAX_REPLAY_LINES);

    log.current.deliver([stdout(timers.t, 'hi'), audit('command', timers.t)]);
    await timers.advance(100);
    log.current.deliver([audit('write_file', timers.t), audit('write_file', timers.t + 1)]);
    await timers.advance(149);
    assert.equal(rechecks(), 0, 'still within the burst');
    await timers.advance(1);
    assert.equal(rechecks(), 1, 'one re-check for the whole burst');
    assert.equal(feed.counters.foreign, 3, 'the stdout line is no operation');

    // A steady stream (a line every 100 ms) still re-checks within a second of its first line.
    const start = timers.t;
    for (let i = 0; i < 25; i++) {
      log.current.deliver([audit('command', timers.t)]);
      await timers.advance(100);
    }
    assert.ok(rechecks() >= 3, `re-checked ${rechecks()} times in 2.5 s of lines`);
    assert.ok(timers.t - start >= 2500);
    feed.stop();
  });

  it('runs one re-check at a time, and one more after it for lines that came meanwhile', async () => {
    let release: (() => void) | undefined;
    let started = 0;
    const { timers, log } = setup({
      recheck: () => {
        started += 1;
        return new Promise<void>((r) => (release = r));
      },
    });
    log.current.deliver([audit('command', timers.t)]);
    await timers.advance(150);
    assert.equal(started, 1);
    log.current.deliver([audit('command', timers.t)]);
    await timers.advance(150);
    log.current.deliver([audit('delete_file', timers.t)]);
    await timers.advance(150);
    assert.equal(started, 1, 'no second re-check while one runs');
    release?.();
    await timers.advance(0);
    assert.equal(started, 2, 'one more for both lines that came meanwhile');
    release?.();
    await timers.advance(1000);
    assert.equal(started, 2);
  });

  it("skips this window's own operations, and a mix-up with another client's only delays a re-check", async () => {
    const { timers, log, own, feed, rechecks } = setup();
    // This window saves a file: sent at t, answered 20 ms later; its line is logged in between.
    const sent = timers.t;
    own.begin(KEY, 'write_file', sent)(sent + 20);
    log.current.deliver([audit('write_file', sent + 10)]);
    await timers.advance(1000);
    assert.deepEqual([rechecks(), feed.counters.own, feed.counters.foreign], [0, 1, 0], 'its own write re-checks nothing');

    // Another client's write of the same kind, logged long after: foreign.
    await timers.advance(10_000);
    log.current.deliver([audit('write_file', timers.t)]);
    await timers.advance(150);
    assert.equal(rechecks(), 1);

    // A command of this window is in flight (queued behind an agent's write): an agent's write is no command.
    const end = own.begin(KEY, 'command', timers.t);
    log.current.deliver([audit('write_file', timers.t + 5)]);
    await timers.advance(150);
    assert.equal(rechecks(), 2, "another kind of operation is never this window's");
    end(timers.t);
    log.current.deliver([audit('command', timers.t - 1)]);
    await timers.advance(150);
    assert.equal(rechecks(), 2, 'the command was its own');

    // Two of this window's writes in flight; an agent's write runs between them and claims one:
    // the window's second line then finds nothing to claim, and re-checks (after the agent's change).
    const t = timers.t;
    const endA = own.begin(KEY, 'write_file', t);
    const endB = own.begin(KEY, 'write_file', t + 1);
    log.current.deliver([audit('write_file', t + 5)]); // ours (A)
    log.current.deliver([audit('write_file', t + 6)]); // the agent's: claims B by mistake
    endA(t + 7);
    await timers.advance(150);
    assert.equal(rechecks(), 2);
    log.current.deliver([audit('write_file', t + 200)]); // ours (B), logged within its [sent, answered]
    endB(t + 210);
    await timers.advance(150);
    assert.equal(rechecks(), 3, 'the agent’s change is re-checked one line later, not lost');
    assert.equal(own.size(KEY), 0, 'nothing left over');
  });

  it('an operation of an unknown kind, or one logged outside what this window sent, is foreign', () => {
    const own = new OwnOperations();
    own.begin(KEY, 'command', 10_000)(10_500);
    const now = 11_000;
    assert.equal(own.claim(KEY, 'unknown', 10_100, now), false);
    assert.equal(own.claim(KEY, 'command', 10_500 + 2001, now), false, 'after it was answered (beyond the clock slack)');
    assert.equal(own.claim(KEY, 'command', 10_000 - 2001, now), false, 'before it was sent');
    assert.equal(own.claim('local.local.default.other', 'command', 10_100, now), false, 'another sandbox');
    assert.equal(own.claim(KEY, 'command', 10_100, now), true);
    assert.equal(own.claim(KEY, 'command', 10_100, now), false, 'each operation claims one line');
  });

  it('remembers at most 1024 operations per sandbox, each up to a minute after it ended', () => {
    const own = new OwnOperations();
    for (let i = 0; i < MAX_PER_SANDBOX + 500; i++) own.begin(KEY, 'write_file', 1000)(1001);
    assert.equal(own.size(KEY), MAX_PER_SANDBOX);
    const running = own.begin(KEY, 'command', 2000);
    assert.equal(own.claim(KEY, 'write_file', 1001, 1001 + KEEP_MS + 1), false, 'ended more than a minute ago: gone');
    assert.equal(own.size(KEY), 1, 'only the one still running is left');
    assert.equal(own.claim(KEY, 'command', 2000 + 10 * KEEP_MS, 2000 + 10 * KEEP_MS), true, 'a long command still claims its line');
    running();
    assert.equal(own.size(KEY), 0);
  });

  it('retries a failed follow with backoff from the last line seen, warns once per outage, and skips lines read again', async () => {
    const { timers, log, feed, messages, rechecks } = setup();
    log.current.deliver([audit('command', timers.t, '000500')]);
    await timers.advance(150);
    assert.equal(rechecks(), 1);
    const seenAt = timers.t - 150;

    const gaps: number[] = [];
    for (let i = 0; i < 9; i++) {
      const before = log.follows.length;
      const failedAt = timers.t;
      log.current.fail(new Error('the companion server restarted'));
      while (log.follows.length === before) await timers.advance(100);
      gaps.push(timers.t - failedAt);
    }
    assert.deepEqual(gaps, [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
    assert.equal(messages.filter((m) => m.startsWith('warn:')).length, 1, 'one warning for the outage, not one per retry');
    assert.match(messages[0] ?? '', /live changes of sbx: following its log failed \(the companion server restarted\)/);
    assert.equal(feed.counters.failures, 9);
    // From the last line handled, in whole seconds: that line comes again and is skipped.
    assert.equal(log.current.query.sinceTime, new Date(Math.floor(seenAt / 1000) * 1000).toISOString().replace('.000Z', 'Z'));
    log.current.deliver([audit('command', seenAt, '000500'), audit('command', seenAt + 5000)]);
    await timers.advance(150);
    assert.equal(feed.counters.foreign, 2, 'the line read again is not counted twice');
    assert.equal(rechecks(), 2);
    assert.equal(messages.at(-1), 'info: live changes of sbx: following its log again');

    // Back to a short delay once lines come again.
    const before = log.follows.length;
    log.current.fail(new Error('again'));
    await timers.advance(1000);
    assert.equal(log.follows.length, before + 1);
    feed.stop();
  });

  it('stops when the sandbox ended (its log is complete) or when stopped, and follows no more', async () => {
    let ended = false;
    const a = setup({ ended: () => ended });
    ended = true;
    a.log.current.end();
    await a.timers.advance(120_000);
    assert.equal(a.log.follows.length, 1);
    assert.equal(a.feed.active, false);

    const b = setup();
    b.log.current.deliver([audit('command', b.timers.t)]);
    b.feed.stop();
    assert.equal(b.log.current.stopped, true, 'the follow request is cancelled');
    b.log.current.deliver([audit('command', b.timers.t)]);
    await b.timers.advance(120_000);
    assert.equal(b.rechecks(), 0, 'no re-check after stop, also not the one pending');
    assert.equal(b.log.follows.length, 1);
  });

  it('parses the log times runtimed and the kubelet write (any number of fractional digits)', () => {
    assert.equal(timeNs('2030-01-01T00:00:00Z'), BigInt(T0) * 1_000_000n);
    assert.equal(timeNs('2030-01-01T00:00:00.5Z'), BigInt(T0) * 1_000_000n + 500_000_000n);
    assert.equal(timeNs('2030-01-01T00:00:00.000000001Z'), BigInt(T0) * 1_000_000n + 1n);
    assert.equal(timeNs('2030-01-01T01:00:00+01:00'), BigInt(T0) * 1_000_000n);
    assert.equal(timeNs('yesterday'), undefined);
  });

  it("records every mutation the window's gateway client sends, also one that fails", async () => {
    const own = new OwnOperations();
    // Nothing listens on port 9 of loopback: the call fails, and was still this window's.
    const client = new OwnOperationsClient({ endpoint: { url: 'http://127.0.0.1:9/v1/namespaces/default/runtimes/r/sessions/u' } }, KEY, own);
    await assert.rejects(client.writeFile('a.txt', new Uint8Array([1])));
    await assert.rejects(client.runCommand({ argv: ['true'] }));
    const events = client.stream({ createDirectory: { path: 'd' } });
    await assert.rejects(events.next());
    await client.close();
    assert.equal(own.size(KEY), 3);
    const now = Date.now();
    assert.equal(own.claim(KEY, 'write_file', now), true);
    assert.equal(own.claim(KEY, 'command', now), true);
    assert.equal(own.claim(KEY, 'create_directory', now), true);
  });
});
