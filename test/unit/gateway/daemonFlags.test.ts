// The daemon's young-generation cap (DAEMON_NODE_FLAGS): a per-user background process must not keep the
// tens of MB of new space V8 grows to under a burst of executes (issue 25, bench/daemonSoak.ts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { DAEMON_NODE_FLAGS, defaultGatewayCommand } from '../../../server/gateway/daemonClient';

/** Short-lived objects at a high rate, a few thousand alive at a time (as requests are); prints new space in MiB. */
const CHURN = `
const keep = [];
for (let i = 0; i < 1.5e6; i++) { keep.push({ a: i, b: 'x' + i }); if (keep.length > 20000) keep.splice(0, 10000); }
const ns = require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
console.log(ns.space_size / 1048576);`;

const newSpaceMib = (flags: readonly string[]): number => Number(execFileSync(process.execPath, [...flags, '-e', CHURN], { encoding: 'utf8' }).trim());

describe('gateway daemon: Node flags', () => {
  it('a daemon started the default way runs with the flags, which keep new space small under allocation churn', () => {
    const command = defaultGatewayCommand();
    const script = command.indexOf(process.argv[1] ?? '');
    for (const flag of DAEMON_NODE_FLAGS) {
      const at = command.indexOf(flag);
      assert.ok(at > 0 && at < script, `${flag} is a Node option of the daemon command: ${command.join(' ')}`);
    }
    const capped = newSpaceMib(DAEMON_NODE_FLAGS);
    assert.ok(capped <= 4, `new space with ${DAEMON_NODE_FLAGS.join(' ')}: ${capped} MiB`);
  });
});
