// The idle warning comes within the last quarter of a sandbox's idle timeout (at most its last 5 minutes), never
// before and never once the sandbox is already due to stop.
import assert from 'node:assert/strict';
import { idleWarningDue, idleWarningLeadMs } from '../../../extension/views/idleWarningDue';

describe('extension: when the idle warning is due', () => {
  it('a quarter of the idle timeout, at most 5 minutes', () => {
    assert.equal(idleWarningLeadMs(20), 5_000);
    assert.equal(idleWarningLeadMs(600), 150_000);
    assert.equal(idleWarningLeadMs(3600), 300_000);
  });

  it('due only inside that lead, with the time left', () => {
    const last = 1_000_000;
    assert.equal(idleWarningDue(600, last, last + 449_999), undefined, 'more than 150 s left');
    assert.equal(idleWarningDue(600, last, last + 450_000), 150_000);
    assert.equal(idleWarningDue(600, last, last + 599_000), 1_000);
    assert.equal(idleWarningDue(600, last, last + 600_000), undefined, 'already due to stop');
    assert.equal(idleWarningDue(3600, last, last + 3_300_001), 299_999);
  });
});
