// `sandbox-sessions sandbox exec` against a gateway that serves only era D (every command over
// `operations:ws`; `operations:execute`/`stream` answer 404 `endpoint not found`): the command's
// exit code and output, and Ctrl+C → exit 130 with the remote command gone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { captureIo } from '../../fixtures/cliCapture';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { ensureGateway, stopGateway } from '../../../server/gateway/daemonClient';

const ROOT = path.resolve(__dirname, '../../..');
const GATEWAY = [process.execPath, '--import', 'tsx', path.join(ROOT, 'test/fixtures/gatewayMain.ts')];

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('CLI: sandbox exec against an era-D gateway', function () {
  this.timeout(120_000);
  let stateDir: string;
  let workspace: string;

  const cli = async (args: string[], stdin?: Buffer) => {
    const { io, out, err } = captureIo();
    const withStdin = stdin !== undefined ? { ...io, stdin: Readable.from([stdin]) } : io;
    const code = await runSandboxCommand([...args.slice(0, 1), '--state-dir', stateDir, ...args.slice(1)], withStdin, { gatewayCommand: GATEWAY });
    return { code, out: out(), err: err() };
  };

  before(async () => {
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-cli-era-d-'));
    const gateway = await ensureGateway({ stateDir, command: GATEWAY, api: 'era-d' });
    assert.equal(gateway.api, 'era-d');
    const created = await cli(['create', '--name', 'era-d-cli', '--json']);
    assert.equal(created.code, 0, created.err);
    const { uid } = JSON.parse(created.out) as { uid: string };
    workspace = path.join(stateDir, 'runs', uid, 'workspace');
    // The daemon really is era D: the era-C route is not there.
    const probe = await fetch(`${gateway.url}/v1/namespaces/default/runtimes/process/sessions/${uid}/operations:execute`);
    assert.equal(probe.status, 404);
    assert.equal(await probe.text(), '{"error":"endpoint not found"}\n');
  });

  after(async () => {
    await stopGateway({ stateDir, timeoutMs: 5000 });
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  it("returns the command's exit code, stdout and stderr", async () => {
    const r = await cli(['exec', 'era-d-cli', '--shell', 'echo out; echo err >&2; exit 7']);
    assert.deepEqual(r, { code: 7, out: 'out\n', err: 'err\n' });
    const json = await cli(['exec', 'era-d-cli', '--json', '--', 'sh', '-c', 'printf hi']);
    assert.equal(json.code, 0, json.err);
    assert.match(json.out, /"exitCode":\s*0/);
  });

  it('--stdin feeds this process\'s stdin to the command; too much is refused before anything runs', async () => {
    const input = Buffer.from('line one\nline two\n\u00e9\n');
    const r = await cli(['exec', 'era-d-cli', '--stdin', '--', 'sh', '-c', 'cat; exit 5'], input);
    assert.deepEqual([r.code, r.out], [5, input.toString()], r.err);
    const big = await cli(['exec', 'era-d-cli', '--stdin', '--', 'sh', '-c', 'touch ran'], Buffer.alloc(800 * 1024, 0x61));
    assert.equal(big.code, 1);
    assert.match(big.err, /stdin is larger than \d+ bytes/);
    await assert.rejects(fs.access(path.join(workspace, 'ran')));
  });

  it('Ctrl+C exits 130 and the remote command is gone', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'server/main.ts'), 'sandbox', 'exec', 'era-d-cli', '--state-dir', stateDir, '--', 'sh', '-c', 'echo $$ > sleeper.pid; echo started; exec sleep 60'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // Bounded by the start of a CLI process compiled by tsx from a cold cache (a fresh clone under load).
    await until('the command to start', async () => (output.includes('started') ? true : undefined), 90_000);
    const pid = Number(await fs.readFile(path.join(workspace, 'sleeper.pid'), 'utf8'));
    assert.ok(alive(pid), 'the remote sleep runs before Ctrl+C');
    child.kill('SIGINT');
    assert.equal(await exited, 130, output);
    assert.equal(alive(pid), false, 'the remote command is gone when the CLI has exited');
  });
});
