// The status bar's gateway round trips: the median of the last few per sandbox, shown in the item only when above
// the threshold (with a warning) or when asked for always (0, without one), and always in the tooltip.
import assert from 'node:assert/strict';
import { KEPT_ROUND_TRIPS, RoundTrips, roundTripText } from '../../../extension/views/roundTrips';

describe('extension: gateway round trips in the status bar', () => {
  it('keeps the last few per sandbox and gives their median', () => {
    const trips = new RoundTrips();
    assert.equal(trips.of('a'), undefined);
    trips.add('a', 10);
    assert.deepEqual(trips.of('a'), { medianMs: 10, count: 1 });
    trips.add('a', 30);
    assert.deepEqual(trips.of('a'), { medianMs: 20, count: 2 });
    trips.add('a', 1000);
    assert.deepEqual(trips.of('a'), { medianMs: 30, count: 3 }, 'one slow answer does not make the median slow');
    for (let i = 0; i < KEPT_ROUND_TRIPS; i++) trips.add('a', 400);
    assert.deepEqual(trips.of('a'), { medianMs: 400, count: KEPT_ROUND_TRIPS }, 'only the last ones count');
    trips.add('b', 5);
    assert.equal(trips.of('b')?.medianMs, 5);
    trips.forget('a');
    assert.equal(trips.of('a'), undefined);
  });

  it('says it in the item only when slow, or always when the threshold is 0', () => {
    assert.deepEqual(roundTripText(undefined, 250), { tip: 'Gateway round trip: not measured yet.', slow: false });
    const fast = roundTripText({ medianMs: 12, count: 3 }, 250);
    assert.deepEqual([fast.part, fast.slow], [undefined, false]);
    assert.equal(fast.tip, 'Gateway round trip: 12 ms (median of the last 3 status checks).');
    const slow = roundTripText({ medianMs: 400, count: 8 }, 250);
    assert.deepEqual([slow.part, slow.slow], ['$(pulse) 400 ms', true]);
    assert.match(slow.tip, /above 250 ms: files, listings and commands wait about that long each/);
    const always = roundTripText({ medianMs: 12, count: 1 }, 0);
    assert.deepEqual([always.part, always.slow], ['$(pulse) 12 ms', false]);
    assert.match(always.tip, /status check\)/);
  });
});
