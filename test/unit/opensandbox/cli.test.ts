// The CLI's verbs on an OpenSandbox sandbox, as a person runs them with the SDK's environment
// variables set for the daemon: `sandbox create --runtime opensandbox`, `exec` (exit code, both
// streams), `close` (Drain → artifacts with digests, the remote sandbox deleted) — and a daemon
// without a connection refuses the create in words. Against the simulator, or a real server (see
// target.ts); sandboxes are counted through the lifecycle API.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { captureIo } from '../../fixtures/cliCapture';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { startTarget, type Target } from './target';

const ROOT = path.resolve(__dirname, '../../..');
const GATEWAY = [process.execPath, '--import', 'tsx', path.join(ROOT, 'test/fixtures/gatewayMain.ts')];

describe('OpenSandbox from the CLI (`sandbox … --runtime opensandbox`)', function () {
  this.timeout(180_000);
  let target: Target;
  let client: OpenSandboxClient;
  const stateDirs: string[] = [];

  before(async () => {
    target = await startTarget({ graceMs: 50 });
    client = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: target.apiKey ?? '', env: {} }));
  });
  after(async () => {
    for (const stateDir of stateDirs) {
      await stopGateway({ stateDir, timeoutMs: 5000 }).catch(() => undefined);
      await fs.rm(stateDir, { recursive: true, force: true });
    }
    await target.simulator?.close();
  });

  /** The CLI with its own state root; the daemon it starts gets `daemonEnv` (as from the user's shell). */
  async function cliFor(daemonEnv: Record<string, string>) {
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-cli-'));
    stateDirs.push(stateDir);
    const gatewayCommand = ['env', ...Object.entries(daemonEnv).map(([k, v]) => `${k}=${v}`), ...GATEWAY];
    return async (args: string[]) => {
      const { io, out, err } = captureIo();
      const code = await runSandboxCommand([...args.slice(0, 1), '--state-dir', stateDir, ...args.slice(1)], io, { gatewayCommand });
      return { code, out: out(), err: err() };
    };
  }

  it('creates, runs commands in, and drains an OpenSandbox sandbox; nothing is left on the server', async () => {
    const cli = await cliFor({ OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey ?? '' });
    const before = (await client.listOurs()).length;
    const created = await cli(['create', '--runtime', 'opensandbox', '--name', 'osb-cli', '--allow-egress', 'example.com', '--json']);
    assert.equal(created.code, 0, created.err);
    const run = JSON.parse(created.out) as { runtime: string; phase: string };
    assert.deepEqual([run.runtime, run.phase], ['opensandbox', 'Ready']);
    assert.equal((await client.listOurs()).length, before + 1, 'one OpenSandbox sandbox behind the Run');

    assert.deepEqual(await cli(['exec', 'osb-cli', '--shell', 'echo out; echo err >&2; exit 3']), { code: 3, out: 'out\n', err: 'err\n' });
    const made = await cli(['exec', 'osb-cli', '--shell', 'printf "the report\\n" > "$KRUNTIME_ARTIFACTS_DIR/report.txt"']);
    assert.equal(made.code, 0, made.err);

    const closed = await cli(['close', 'osb-cli', '--json']);
    assert.equal(closed.code, 0, closed.err);
    assert.match(closed.out, /"phase":\s*"Succeeded"/);
    const artifacts = await cli(['artifacts', 'osb-cli', '--json']);
    assert.equal(artifacts.code, 0, artifacts.err);
    assert.ok(artifacts.out.includes(`sha256:${createHash('sha256').update('the report\n').digest('hex')}`), artifacts.out);
    assert.equal((await client.listOurs()).length, before, 'the sandbox is deleted once the Run Succeeded');
  });

  it('says what to set when the daemon has no OpenSandbox connection, and creates nothing', async () => {
    const cli = await cliFor({ OPEN_SANDBOX_DOMAIN: '', OPEN_SANDBOX_API_KEY: '' });
    const before = (await client.listOurs()).length;
    const created = await cli(['create', '--runtime', 'opensandbox', '--name', 'osb-none']);
    assert.equal(created.code, 1);
    assert.match(created.err, /OPEN_SANDBOX_DOMAIN/);
    assert.equal((await client.listOurs()).length, before);
  });
});
