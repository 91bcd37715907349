// The CLI's verbs on an OpenSandbox sandbox, as a person runs them with the SDK's environment
// variables set for the daemon: `sandbox create --runtime opensandbox`, `exec` (exit code, both
// streams), `close` (Drain → artifacts with digests, the remote sandbox deleted) — and a daemon
// without a connection refuses the create in words; `--credential` puts a Credential Vault binding on the
// sandbox (egress policy and vault), its value never printed nor written by the daemon, and a wrong one is a usage
// error. Against the simulator, or a real server (see target.ts); sandboxes are counted through the lifecycle API.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { captureIo } from '../../fixtures/cliCapture';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { Sandbox } from '@alibaba-group/opensandbox';
import { needsSimulator, SIM_TAG, startTarget, type Target } from './target';

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

  /**
   * The CLI with its own state root; the daemon it starts gets `daemonEnv` (as from the user's shell), the CLI
   * itself `cliEnv` (where `--credential` values are).
   */
  async function cliFor(daemonEnv: Record<string, string>, cliEnv: NodeJS.ProcessEnv = {}) {
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-cli-'));
    stateDirs.push(stateDir);
    const gatewayCommand = ['env', ...Object.entries(daemonEnv).map(([k, v]) => `${k}=${v}`), ...GATEWAY];
    const cli = async (args: string[]) => {
      const { io, out, err } = captureIo();
      const code = await runSandboxCommand([...args.slice(0, 1), '--state-dir', stateDir, ...args.slice(1)], io, { gatewayCommand, env: cliEnv });
      return { code, out: out(), err: err() };
    };
    return Object.assign(cli, { stateDir });
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
    assert.doesNotMatch(created.err, /gateway --stop/, 'this shell sets nothing either: nothing to restart for');
    // This shell has the settings, the daemon (started earlier) has not: the CLI says to restart it.
    const shell = await cliFor({ OPEN_SANDBOX_DOMAIN: '', OPEN_SANDBOX_API_KEY: '' }, { OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey ?? '' });
    const refused = await shell(['create', '--runtime', 'opensandbox', '--name', 'osb-stale']);
    assert.equal(refused.code, 1);
    assert.match(refused.err, /This shell sets OPEN_SANDBOX_DOMAIN, but the gateway daemon, started earlier, was not given it: stop it with `sandbox-sessions gateway --stop`/);
    assert.equal((await client.listOurs()).length, before);
  });

  it(`${SIM_TAG} --credential: the binding reaches the sandbox's egress policy and Credential Vault; the value (from the CLI's environment) is in no output and no file of the daemon`, async function () {
    const sim = needsSimulator(this, target, 'it reads the vault server side');
    const gh = `ghp_canary_${randomBytes(12).toString('hex')}`;
    const npm = `npm_canary_${randomBytes(12).toString('hex')}`;
    // The daemon's environment has the connection only: the values can reach it only from the CLI.
    const cli = await cliFor({ OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey ?? '' }, { SANDBOX_SESSIONS_CREDENTIAL_GH_TOKEN: gh, SANDBOX_SESSIONS_CREDENTIAL_NPM_TOKEN: npm });
    const known = new Set((await client.listOurs()).map((s) => s.id));
    const outputs: string[] = [];
    const created = await cli(['create', '--runtime', 'opensandbox', '--name', 'osb-cred', '--allow-egress', 'example.com', '--credential', 'GH_TOKEN=api.example.com:apiKey=X-Api-Key', '--credential', 'NPM_TOKEN=registry.npmjs.org,*.npmjs.com', '--json']);
    outputs.push(created.out, created.err);
    assert.equal(created.code, 0, created.err);
    const [made] = (await client.listOurs()).filter((s) => !known.has(s.id));
    assert.ok(made, 'an OpenSandbox sandbox was created');
    const inside = sim.inspect(made.id);
    assert.equal(inside.credentialProxy, true, 'created with the credential proxy');
    assert.deepEqual(inside.vaultSecrets, [{ name: 'GH_TOKEN', value: gh }, { name: 'NPM_TOKEN', value: npm }], 'the vault holds both values (server side)');
    assert.deepEqual(sim.injectedHeaders(made.id, 'https://api.example.com/v1/x'), { 'X-Api-Key': gh });
    assert.deepEqual(sim.injectedHeaders(made.id, 'https://www.npmjs.com/'), { Authorization: `Bearer ${npm}` });
    assert.deepEqual(sim.injectedHeaders(made.id, 'https://example.com/'), {}, 'nothing for a host without a binding');
    const sbx = await Sandbox.connect({ sandboxId: made.id, connectionConfig: client.connection.config() });
    try {
      const policy = await sbx.getEgressPolicy();
      assert.deepEqual(policy.egress?.map((r) => r.target).sort(), ['*.npmjs.com', 'api.example.com', 'example.com', 'registry.npmjs.org'], 'the binding hosts join --allow-egress');
      assert.deepEqual((await sbx.credentialVault.listBindings()).map((b) => [b.name, b.auth]), [['gh_token', { type: 'apiKey', name: 'X-Api-Key' }], ['npm_token', { type: 'bearer' }]]);
    } finally {
      await sbx.close();
    }
    const got = await cli(['get', 'osb-cred', '--json']);
    outputs.push(got.out, got.err);
    assert.match(got.out, /credential-bindings[^\n]*NPM_TOKEN/, 'the Run records the binding by secret name');
    const closed = await cli(['close', 'osb-cred', '--immediate', '--json']);
    outputs.push(closed.out, closed.err);
    assert.equal(closed.code, 0, closed.err);
    for (const value of [gh, npm]) {
      assert.ok(!outputs.some((o) => o.includes(value)), 'no value in stdout or stderr');
      const hits = filesHolding(cli.stateDir, value);
      assert.ok(hits.files >= 3, `scanned ${hits.files} files of the daemon's state root`);
      assert.deepEqual(hits.hits, [], "no value in the daemon's records, connection file or log");
    }
  });

  it('--credential without its value anywhere: the daemon refuses the create naming the variable, and creates nothing', async () => {
    const cli = await cliFor({ OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey ?? '' });
    // By id, not by count: an earlier test's sandbox may still be on its way out.
    const before = new Set((await client.listOurs()).map((s) => s.id));
    const created = await cli(['create', '--runtime', 'opensandbox', '--name', 'osb-cred-missing', '--credential', 'GH_TOKEN=api.example.com']);
    assert.equal(created.code, 1, created.err);
    assert.match(created.err, /binding "gh_token" needs the secret GH_TOKEN/);
    assert.match(created.err, /SANDBOX_SESSIONS_CREDENTIAL_GH_TOKEN/);
    assert.deepEqual((await client.listOurs()).filter((s) => !before.has(s.id)), [], 'no OpenSandbox sandbox was created');
  });

  it('a wrong --credential is a usage error (exit 2) that says what is wrong, never echoes a pasted value, and starts nothing', async () => {
    const cli = await cliFor({ OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey ?? '' });
    const before = new Set((await client.listOurs()).map((s) => s.id));
    const pasted = `ghp_${randomBytes(12).toString('hex')}`;
    const cases: [string[], RegExp][] = [
      [['--credential', 'GH_TOKEN'], /--credential GH_TOKEN: expected SECRET=HOST/],
      [['--credential', `GH_TOKEN=${pasted}`], /--credential GH_TOKEN: hosts\.0: a host is an FQDN such as api\.example\.com/],
      [['--credential', `${pasted}=api.example.com`], /--credential #1: the secret name before "=" is uppercase letters, digits and _/],
      [['--credential', 'GH_TOKEN=api.example.com:apiKey'], /apiKey needs the header it sets, e\.g\. :apiKey=X-Api-Key/],
      [['--credential', 'GH_TOKEN=api.example.com:token'], /the part after ":" is bearer, basic or apiKey=HEADER/],
      [['--credential', 'GH_TOKEN=api.example.com:apiKey=X Api'], /header: a header name is an HTTP token/],
      [['--credential', 'A=a.example.com', '--credential', 'B=localhost'], /--credential B: hosts\.0: a host is an FQDN/],
    ];
    for (const [flags, message] of cases) {
      const r = await cli(['create', '--runtime', 'opensandbox', '--name', 'osb-bad', ...flags]);
      assert.equal(r.code, 2, `${flags.join(' ')}: ${r.err}`);
      assert.match(r.err, message);
      assert.match(r.err, /--credential SECRET=HOST\[,HOST…\]/, 'the usage follows');
      assert.ok(!r.err.includes(pasted) && !r.out.includes(pasted), 'what was typed after the name is not printed back');
    }
    const local = await cli(['create', '--runtime', 'process', '--credential', 'GH_TOKEN=api.example.com']);
    assert.equal(local.code, 2);
    assert.match(local.err, /--credential are for --runtime opensandbox/);
    assert.equal(fsSync.existsSync(path.join(cli.stateDir, 'gateway.json')), false, 'no daemon was started');
    assert.deepEqual((await client.listOurs()).filter((s) => !before.has(s.id)), [], 'no OpenSandbox sandbox was created');
  });
});

/** Every file under `root` holding `needle`. */
function filesHolding(root: string, needle: string): { hits: string[]; files: number } {
  const hits: string[] = [];
  let files = 0;
  const visit = (dir: string) => {
    for (const e of fsSync.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        files += 1;
        if (fsSync.readFileSync(p).includes(needle)) hits.push(path.relative(root, p));
      }
    }
  };
  visit(root);
  return { hits, files };
}
