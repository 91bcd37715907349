// A `shell` command of a local sandbox runs without the host user's shell start-up files: bash
// sources ~/.bashrc even non-interactively when its stdin is a socket (as Node's pipes are), so
// without --norc every command would run (and depend on) the user's dotfiles.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, readyRun, startTestGateway, type TestGateway } from './harness';

describe('local gateway: shell commands and the host dotfiles', function () {
  this.timeout(30_000);
  let t: TestGateway;
  let home: string;
  before(async () => {
    t = await startTestGateway({});
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-dotfiles-'));
    for (const f of ['.bashrc', '.bash_profile', '.profile']) fs.writeFileSync(path.join(home, f), `touch "${home}/sourced${f}"\n`);
  });
  after(async () => {
    await t.cleanup();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('runs `shell` with bash but sources none of ~/.bashrc, ~/.bash_profile, ~/.profile', async () => {
    const { P } = await readyRun(t.gw);
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { command: { shell: 'echo "$BASH_VERSION" | cut -c1', env: { HOME: home } } },
    });
    assert.equal(r.status, 200, r.text);
    const body = JSON.parse(r.text) as { command: { exitCode: number; stdout?: string } };
    assert.equal(body.command.exitCode, 0);
    assert.match(Buffer.from(body.command.stdout ?? '', 'base64').toString(), /^\d\n$/, 'the shell is bash');
    assert.deepEqual(fs.readdirSync(home).filter((f) => f.startsWith('sourced')), []);
  });
});
