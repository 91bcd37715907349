// A normal start logs no errors: after the extension has activated (and its companion server is up, which a first
// request makes sure of), no error-level line of the window's logs comes from this extension — neither its own
// "Sandbox Sessions" log nor the extension host's lines about it (zod's JIT probe of `navigator` once produced a
// PendingMigrationError there on every start).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { api, EXTENSION_ID } from './helpers';

function logFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? logFiles(full) : e.name.endsWith('.log') ? [full] : [];
  });
}

describe('start-up log', () => {
  it('has no error-level line from this extension after activation', async () => {
    // The companion server starts on the first request (and the local gateway daemon with it): make one, as the
    // Sandboxes view does. This suite runs first (index.ts), so the logs hold the start and nothing after.
    await (await api()).companion.request('sandboxes/list', { provider: 'local' });
    const work = process.env.SANDBOX_SESSIONS_IT_WORK;
    assert.ok(work, 'SANDBOX_SESSIONS_IT_WORK names the suite folder');
    const files = logFiles(path.join(work, 'user-data', 'logs'));
    const own = files.filter((f) => f.includes(EXTENSION_ID));
    assert.notDeepEqual(own, [], `the extension's own log file exists among:\n${files.join('\n')}`);
    const errors: string[] = [];
    for (const file of files) {
      const ours = file.includes(EXTENSION_ID);
      for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
        if (!/\[error\]/i.test(line)) continue;
        if (ours || /sandbox-sessions|sandboxSessions|dist\/extension\.js|PendingMigrationError/.test(line)) errors.push(`${path.basename(file)}: ${line}`);
      }
    }
    assert.deepEqual(errors, []);
  });
});
