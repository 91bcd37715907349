// The window's three ways of writing a duration (extension/views/durationText.ts), at their edges.
import assert from 'node:assert/strict';
import { durationInWords, formatRemaining, formatSeconds } from '../../../extension/views/durationText';

describe('durations as the window writes them', () => {
  it('a countdown: m:ss, h:mm:ss from an hour, never negative', () => {
    assert.deepEqual([-5, 0, 999, 59_999, 60_000, 3_599_999, 3_600_000, 5_430_000].map(formatRemaining), ['0:00', '0:00', '0:00', '0:59', '1:00', '59:59', '1:00:00', '1:30:30']);
  });

  it('a timeout: 45s, 5m, 1h30m, and 0s for none', () => {
    assert.deepEqual([0, 45, 300, 5400, 3661].map(formatSeconds), ['0s', '45s', '5m', '1h30m', '1h1m1s']);
  });

  it('in a sentence: 4m 50s, 45s, at least 1s', () => {
    assert.deepEqual([0, 400, 45_000, 60_000, 290_000, 1_200_000].map(durationInWords), ['1s', '1s', '45s', '1m', '4m 50s', '20m']);
  });
});
