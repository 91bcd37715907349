// examples/python_client.py — a companion client written with Python's standard library only —
// runs for real against the server, so the example in the README stays true.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { stopGateway } from '../../../server/gateway/daemonClient';

const REPO = path.resolve(__dirname, '../../..');

describe('examples/python_client.py', function () {
  this.timeout(90_000);
  let work: string;
  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'python-example-'));
  });
  after(async () => {
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('creates a sandbox, runs a command, packs the workspace and drains it', async () => {
    const { stdout } = await promisify(execFile)('python3', [path.join(REPO, 'examples/python_client.py'), process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts')], {
      cwd: REPO,
      env: { ...process.env, SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state'), SANDBOX_SESSIONS_LOG_LEVEL: 'warn' },
      timeout: 80_000,
    });
    assert.match(stdout, /^companion server \S+ on Node v\d+/m);
    assert.match(stdout, /^sandbox sbx-\S+ is Ready$/m);
    assert.match(stdout, /^command exit 0: Linux$/m);
    assert.match(stdout, /^packed 4 entries into \d+ bytes, sha256:[0-9a-f]{64}$/m);
    assert.match(stdout, /^sandbox sbx-\S+ is Succeeded$/m);
  });
});
