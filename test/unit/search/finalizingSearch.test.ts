// Search in a local sandbox that is Finalizing (a Drain waits for a running command): reads are still
// allowed, so `sandboxes/search` finds text and files in place; the sandbox's directory is offered for
// reads only — a caller that would write (activation, saves) still gets none.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { SearchQuerySchema } from '../../../protocol/search';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { createLogger } from '../../../server/log';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { SandboxSearchService } from '../../../server/search/searchService';
import { until } from '../../fixtures/waits';

const REPO = path.resolve(__dirname, '../../..');

describe('sandbox search in a Finalizing sandbox (reads only)', function () {
  this.timeout(60_000);
  let work: string;
  let provider: LocalSandboxProvider;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'search-final-'));
    provider = new LocalSandboxProvider({
      stateDir: path.join(work, 'state'),
      gatewayCommand: [process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts'), 'gateway'],
      log: createLogger(fs.createWriteStream('/dev/null'), 'error'),
    });
  });

  after(async () => {
    await provider?.dispose();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('finds text and files while a Drain waits for a running command', async () => {
    const sandbox = await provider.create({ provider: 'local', runtime: 'process', namespace: 'default' }, { waitForReady: true });
    const { ref } = sandbox;
    const hostDir = (await provider.hostDirectory(ref)) as string;
    fs.mkdirSync(path.join(hostDir, 'src/deep'), { recursive: true });
    fs.writeFileSync(path.join(hostDir, 'src/deep/widgetFactory.ts'), 'line one\nconst finalNeedle = 1;\n');
    const connection = await provider.open(ref);
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    try {
      // A command that runs until the test lets it end: the Drain waits for it (Finalizing meanwhile).
      const running = client.execute({ command: { shell: ': > started; while [ ! -e release ]; do sleep 0.05; done' } });
      await until('the command runs', () => fs.existsSync(path.join(hostDir, 'started')));
      await provider.terminate(ref, 'Drain', { wait: false });
      await until('the sandbox is Finalizing', async () => (await provider.get(ref)).sandbox.phase === 'Finalizing');

      const service = new SandboxSearchService(new Map([['local', provider]]));
      const text = await service.search(ref, SearchQuerySchema.parse({ kind: 'text', pattern: 'finalNeedle' }));
      assert.equal(text.strategy, 'host');
      assert.deepEqual(
        text.lines.map((l) => `${l.path}:${l.line}`),
        ['src/deep/widgetFactory.ts:2'],
      );
      const files = await service.search(ref, SearchQuerySchema.parse({ kind: 'files', pattern: 'wdgfac' }));
      assert.deepEqual(files.files, ['src/deep/widgetFactory.ts']);
      // Reads only: the directory is not offered to a caller that may write.
      assert.equal(await provider.hostDirectory(ref), undefined);
      assert.equal(await provider.hostDirectory(ref, 'read'), hostDir);
      assert.equal((await provider.get(ref)).sandbox.phase, 'Finalizing', 'still Finalizing when searched');

      fs.writeFileSync(path.join(hostDir, 'release'), '');
      assert.equal((await running).command?.exitCode, 0);
    } finally {
      await client.close();
    }
  });
});
