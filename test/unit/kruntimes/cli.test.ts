// `sandbox-sessions kruntimes …` in-process against the cluster SIMULATOR: contexts, create,
// exec, close with Drain, artifacts, delete — and usage errors as exit code 2.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { runKruntimesCommand } from '../../../server/cli/kruntimes';
import { captureIo } from '../../fixtures/cliCapture';
import { type ClusterTarget, forEachClusterEra, startClusterTarget, wantsRealCluster } from '../../fixtures/cluster/target';

forEachClusterEra('sandbox-sessions kruntimes CLI', function (era) {
  this.timeout(120_000);
  let target: ClusterTarget;
  let env: NodeJS.ProcessEnv;
  const cli = async (...argv: string[]) => {
    const c = captureIo();
    const code = await runKruntimesCommand([...argv, '--context', target.context, '--namespace', target.namespace], c.io, { env });
    return { code, out: c.out(), err: c.err() };
  };

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
    assert.equal(exec.code, 1, 'a failing command exits 1');
    assert.equal(exec.out, 'hello');

    const closed = await cli('close', 'cli-sbx', '--json');
    assert.equal(closed.code, 0, closed.err);
    assert.equal(JSON.parse(closed.out).phase, 'Succeeded');

    const output = path.join(target.dir, 'cli-artifacts');
    const artifacts = await cli('artifacts', 'cli-sbx', '--output', output, '--json');
    assert.equal(artifacts.code, 0, artifacts.err);
    assert.equal(fs.readFileSync(path.join(output, 'greeting.txt'), 'utf8'), 'hello');

    assert.equal((await cli('delete', 'cli-sbx')).code, 0);
    const list = await cli('list', '--json');
    assert.ok(!(JSON.parse(list.out) as Array<{ ref: { name: string } }>).some((s) => s.ref.name === 'cli-sbx'));
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
