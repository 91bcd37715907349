// The one date format of the views and messages.
import assert from 'node:assert/strict';
import { formatTime, formatTimeAndAge, timeAgo } from '../../../extension/views/dateText';

describe('date text', () => {
  it('shows a time as local YYYY-MM-DD HH:MM whatever its input form', () => {
    const d = new Date(2026, 11, 1, 9, 5, 42);
    assert.equal(formatTime(d), '2026-12-01 09:05');
    assert.equal(formatTime(d.toISOString()), '2026-12-01 09:05');
    assert.equal(formatTime(d.getTime()), '2026-12-01 09:05');
    assert.equal(formatTime('not a time'), 'not a time');
  });

  it('adds how long ago it was', () => {
    const now = new Date(2026, 11, 1, 12, 0).getTime();
    assert.equal(timeAgo(now - 20_000, now), 'just now');
    assert.equal(timeAgo(now - 5 * 60_000, now), '5 min ago');
    assert.equal(timeAgo(now - 3 * 3600_000, now), '3 h ago');
    assert.equal(timeAgo(now - 4 * 86400_000, now), '4 days ago');
    assert.equal(formatTimeAndAge(now - 5 * 60_000, now), '2026-12-01 11:55 (5 min ago)');
  });
});
