// `sandbox-sessions kruntimes …` in-process against the cluster SIMULATOR: contexts, create,
// exec (the command's exit code passed on, as `sandbox exec`), close with Drain, artifacts, delete
// — usage errors as exit code 2, a Runtime the namespace lacks refused before anything is created
// (unchecked for a user who may not list Runtimes), a taken local port named; and Ctrl+C on `exec`
// in a real process (cancelled in the sandbox, exit 130).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { runKruntimesCommand } from '../../../server/cli/kruntimes';
import { captureIo } from '../../fixtures/cliCapture';
import { type ClusterTarget, forEachClusterEra, simulatorOnly, startClusterTarget, wantsRealCluster } from '../../fixtures/cluster/target';
import { until } from '../../fixtures/waits';

const REPO_ROOT = path.resolve(__dirname, '../../..');

forEachClusterEra('sandbox-sessions kruntimes CLI', function (era) {
  this.timeout(120_000);
  let target: ClusterTarget;
  let env: NodeJS.ProcessEnv;
  const cli = async (...argv: string[]) => {
    const c = captureIo();
    const code = await runKruntimesCommand([...argv, '--context', target.context, '--namespace', target.namespace], c.io, { env });
    return { code, out: c.out(), err: c.err() };
  };
  const names = async (): Promise<string[]> => (JSON.parse((await cli('list', '--json')).out) as Array<{ ref: { name: string } }>).map((s) => s.ref.name);

  before(async () => {
    target = await startClusterTarget({ era });
    env = wantsRealCluster() ? { ...process.env } : { KUBECONFIG: target.kubeconfigPath, HOME: target.dir };
  });
  after(async () => {
    await target?.stop();
  });

  it('contexts → create → exec → close (Drain) → artifacts → delete', async () => {
    const contexts = await cli('contexts', '--json');
    assert.equal(contexts.code, 0, contexts.err);
    assert.ok((JSON.parse(contexts.out) as Array<{ name: string }>).some((c) => c.name === target.context));

    const created = await cli('create', '--runtime', target.runtime, '--name', 'cli-sbx', '--env', 'GREETING=hello', '--json');
    assert.equal(created.code, 0, created.err);
    assert.equal(JSON.parse(created.out).phase, 'Ready');
    if (era) {
      // What ends it: on era D the lease and total timeout the provider chose (no idle timeout there); nothing on C.
      const got = await cli('get', 'cli-sbx');
      assert.equal(got.out.split('\t')[4], era === 'D' ? 'lease=300s,timeout=8h' : '-', got.out);
    }

    const exec = await cli('exec', 'cli-sbx', '--', 'sh', '-c', 'printf "$GREETING" > "$KRUNTIME_ARTIFACTS_DIR/greeting.txt"; printf "$GREETING"; exit 3');
    assert.equal(exec.code, 3, "a failing command's exit code is the CLI's, as with `sandbox exec`");
    assert.equal(exec.out, 'hello');
    assert.equal((await cli('exec', 'cli-sbx', '--', 'sh', '-c', 'exit 7')).code, 7);
    assert.equal((await cli('exec', 'cli-sbx', '--shell', 'exit 2')).code, 2, 'as `make` failing');
    // A program the sandbox does not have: 127 and the words a shell uses.
    assert.deepEqual(await cli('exec', 'cli-sbx', '--', 'no-such-program', 'x'), { code: 127, out: '', err: 'error: no-such-program: command not found in sandbox cli-sbx\n' });
    const failedJson = await cli('exec', 'cli-sbx', '--json', '--shell', 'echo out; exit 5');
    assert.equal(failedJson.code, 5);
    assert.deepEqual(JSON.parse(failedJson.out), { exitCode: 5, stdout: 'out\n', stderr: '', timedOut: false });
    // The command must print before its timeout: 2 s leaves a loaded machine time to start `sh`.
    const slow = await cli('exec', 'cli-sbx', '--timeout-ms', '2000', '--shell', 'sleep 30');
    assert.equal(slow.code, 124, `a command that timed out exits 124, as with \`sandbox exec\` and timeout(1): ${slow.err}`);
    assert.equal((await cli('exec', 'cli-sbx', '--timeout-ms', '0', '--', 'true')).code, 2, '--timeout-ms needs a positive number');

    // A local port that is taken is named, so the user knows which one to free or change.
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    try {
      const busy = await cli('port-forward', 'cli-sbx', `${takenPort}:8000`);
      assert.equal(busy.code, 1);
      assert.match(busy.err, new RegExp(`local port ${takenPort} is already in use on 127\\.0\\.0\\.1`));
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }

    const closed = await cli('close', 'cli-sbx', '--json');
    assert.equal(closed.code, 0, closed.err);
    assert.equal(JSON.parse(closed.out).phase, 'Succeeded');

    const output = path.join(target.dir, 'cli-artifacts');
    const artifacts = await cli('artifacts', 'cli-sbx', '--output', output, '--json');
    assert.equal(artifacts.code, 0, artifacts.err);
    assert.equal(fs.readFileSync(path.join(output, 'greeting.txt'), 'utf8'), 'hello');

    assert.equal((await cli('delete', 'cli-sbx')).code, 0);
    assert.ok(!(await names()).includes('cli-sbx'));
  });

  it('refuses a Runtime the namespace does not have before creating anything, naming the Runtimes it has', async () => {
    for (const wait of [['--no-wait'], []]) {
      const refused = await cli('create', '--runtime', 'no-such-runtime', '--name', 'cli-no-runtime', ...wait);
      assert.equal(refused.code, 1, refused.err);
      assert.match(refused.err, new RegExp(`^error \\(invalid_spec\\): namespace ${target.namespace} of context ${target.context} has no Runtime "no-such-runtime"; its Runtimes: [^\\n]*\\b${target.runtime}\\b`, 'm'));
      assert.equal(refused.out, '');
      assert.ok(!(await names()).includes('cli-no-runtime'), 'no Run was created');
    }
  });

  it('creates unchecked when the user may not list Runtimes (as New Sandbox does), saying so', async function () {
    const sim = simulatorOnly(() => target, this, 'it grants a user of its own every right but `list runtimes`');
    sim.identities.grant('no-runtimes', { verbs: ['*'], resources: ['runs', 'pods', 'services', 'pods/portforward', 'namespaces'] });
    const kubeconfig = JSON.parse(fs.readFileSync(target.kubeconfigPath, 'utf8')) as { users: unknown[]; contexts: unknown[] };
    kubeconfig.users.push({ name: 'no-runtimes', user: { token: sim.identities.issueToken('no-runtimes') } });
    kubeconfig.contexts.push({ name: 'no-runtimes', context: { cluster: 'simulator', user: 'no-runtimes', namespace: target.namespace } });
    const file = path.join(target.dir, 'kubeconfig-no-runtimes');
    fs.writeFileSync(file, JSON.stringify(kubeconfig), { mode: 0o600 });
    const c = captureIo();
    const code = await runKruntimesCommand(['create', '--runtime', target.runtime, '--name', 'cli-unchecked', '--json', '--context', 'no-runtimes'], c.io, { env: { KUBECONFIG: file, HOME: target.dir } });
    assert.equal(code, 0, c.err());
    assert.equal(JSON.parse(c.out()).phase, 'Ready');
    assert.match(c.err(), /cannot check that namespace default of context no-runtimes has Runtime \\"bash\\"/);
    assert.equal((await cli('delete', 'cli-unchecked')).code, 0);
  });

  it('Ctrl+C on exec cancels the command in the sandbox and exits 130 (a real process)', async () => {
    const created = await cli('create', '--runtime', target.runtime, '--name', 'cli-sigint', '--json');
    assert.equal(created.code, 0, created.err);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(REPO_ROOT, 'server/main.ts'), 'kruntimes', 'exec', 'cli-sigint', '--context', target.context, '--namespace', target.namespace, '--shell', 'touch started; sleep 60'],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const provider = target.provider(env);
    const connection = await provider.open({ provider: 'kruntimes', context: target.context, namespace: target.namespace, name: 'cli-sigint' });
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
    try {
      await until('the command to start', async () => (await client.listPage({ path: '' })).entries.some((e) => e.path === 'started') || child.exitCode !== null, 60_000);
      child.kill('SIGINT');
      assert.equal(await exited, 130, err);
      // Cancelled, not left running: the sandbox runs one command at a time, and the next one runs at once.
      const started = Date.now();
      const next = await cli('exec', 'cli-sigint', '--', 'true');
      assert.equal(next.code, 0, next.err);
      assert.ok(Date.now() - started < 30_000, 'the sleep was cancelled');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await client.close();
    }
    assert.equal((await cli('close', 'cli-sigint', '--immediate')).code, 0);
    assert.equal((await cli('delete', 'cli-sigint')).code, 0);
  });

  it('usage errors exit 2 and say what is missing; a missing sandbox exits 1 with its code', async () => {
    const noRuntime = await cli('create');
    assert.equal(noRuntime.code, 2);
    assert.match(noRuntime.err, /--runtime/);
    const missing = await cli('get', 'nope');
    assert.equal(missing.code, 1);
    assert.match(missing.err, /sandbox_not_found/);
    // No kubeconfig at all is a set-up to do, not a usage mistake: what to set, no usage text, exit 1.
    const home = fs.mkdtempSync(path.join(target.dir, 'no-kube-'));
    const none = captureIo();
    assert.equal(await runKruntimesCommand(['contexts'], none.io, { env: { HOME: home } }), 1);
    assert.match(none.err(), /^error \(provider_unavailable\): no kubeconfig found: set KUBECONFIG or create ~\/\.kube\/config/);
    assert.doesNotMatch(none.err(), /usage:/);
  });
});
