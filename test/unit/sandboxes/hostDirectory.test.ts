// The local runtime's promise that lets activations and saves skip asking a sandbox for its root: a local
// sandbox's commands start in the very directory `hostDirectory` offers (SandboxProvider.hostDirectoryIsCommandRoot),
// with each of its own backends — `process`, and `bubblewrap`, which binds the directory at the same path. A remote
// backend (OpenSandbox) offers none.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { createLogger } from '../../../server/log';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';

const REPO = path.resolve(__dirname, '../../..');

describe('local sandboxes: commands start in the directory hostDirectory offers', function () {
  this.timeout(60_000);
  let work: string;
  let provider: LocalSandboxProvider;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'host-directory-'));
    provider = new LocalSandboxProvider({
      stateDir: path.join(work, 'state'),
      gatewayCommand: [process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts'), 'gateway'],
      log: createLogger(fs.createWriteStream('/dev/null'), 'error'),
    });
  });

  after(async () => {
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  for (const runtime of ['process', 'bubblewrap']) {
    it(`${runtime}: pwd, $PWD and a file written there all name the offered directory`, async () => {
      assert.equal(provider.hostDirectoryIsCommandRoot, true);
      const sandbox = await provider.create({ provider: 'local', runtime, namespace: 'default' }, { waitForReady: true });
      const dir = await provider.hostDirectory(sandbox.ref);
      assert.ok(dir, 'a local sandbox offers its directory');
      const connection = await provider.open(sandbox.ref);
      const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
      try {
        const physical = await client.runCommand({ argv: ['pwd', '-P'] });
        assert.equal(physical.stdout.toString().trim(), fs.realpathSync(dir));
        const shell = await client.runCommand({ shell: 'echo "$PWD" && echo here > marker.txt' });
        assert.equal(fs.realpathSync(shell.stdout.toString().trim()), fs.realpathSync(dir));
        assert.equal(fs.readFileSync(path.join(dir, 'marker.txt'), 'utf8'), 'here\n');
      } finally {
        await client.close();
        await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
      }
    });
  }
});
