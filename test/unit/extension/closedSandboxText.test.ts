// What a window says about a sandbox that has ended: that its files are read-only and what to do, and — for one
// that did not end by a Drain — why it ended, in the Run's own words (idle, lease expired, timed out, cancelled).
import assert from 'node:assert/strict';
import { closedSandboxText } from '../../../extension/sandboxes/errorText';
import { RunMessages } from '../../../protocol/kruntimes/run';

describe('extension: the text for a closed sandbox', () => {
  it('says why a sandbox that timed out, failed or was cancelled ended', () => {
    assert.match(closedSandboxText('sbx-1', 'Timeout', RunMessages.idleTimeout), /^sbx-1 is closed \(Timeout: session idle timeout exceeded\): its files are read-only and it runs no commands\./);
    assert.match(closedSandboxText('sbx-1', 'Timeout', RunMessages.leaseExpired), /^sbx-1 is closed \(Timeout: session lease expired\): /);
    assert.match(closedSandboxText('sbx-1', 'Cancelled', RunMessages.cancelled), /^sbx-1 is closed \(Cancelled: cancelled by user\): /);
  });

  it('a drained sandbox (Succeeded) and one without a message say only the phase', () => {
    assert.match(closedSandboxText('sbx-1', 'Succeeded', RunMessages.finalized), /^sbx-1 is closed \(Succeeded\): /);
    assert.match(closedSandboxText('sbx-1', 'Failed'), /^sbx-1 is closed \(Failed\): /);
    assert.match(closedSandboxText('sbx-1', 'Failed', '  '), /^sbx-1 is closed \(Failed\): /);
    assert.match(closedSandboxText('sbx-1', 'Deleted', 'ignored'), /^sbx-1 was deleted/);
  });
});
