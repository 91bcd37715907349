// The activation E2E with `provider: kruntimes` against the cluster SIMULATOR: every attempt in
// a fresh session Run (created through client-node, reached through a port-forwarded Console),
// the session carried across activations by the repository alone, each Run deleted afterwards,
// a committed id deduplicated without running the agent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { ActivationRunRequest } from '../../../protocol/activation';
import { ActivationRunner } from '../../../server/activation/runner';
import { openFileSessionRepository } from '../../../server/repository/fileRepository';
import type { SessionRepository } from '../../../server/repository/contract';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { agentCommand, quietLogger } from '../../fixtures/activation/harness';
import { type ClusterTarget, forEachClusterEra, startClusterTarget } from '../../fixtures/cluster/target';

forEachClusterEra('activations on kruntimes', function (era) {
  this.timeout(180_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;
  let repo: SessionRepository;
  let runner: ActivationRunner;
  let counterFile: string;

  before(async () => {
    target = await startClusterTarget({ era });
    provider = target.provider();
    repo = await openFileSessionRepository({ storageRoot: path.join(target.dir, 'repository') });
    counterFile = path.join(target.dir, 'invocations.txt');
    runner = new ActivationRunner({ repository: repo, providers: { kruntimes: provider }, log: quietLogger(), command: agentCommand(counterFile), scratchParent: target.dir });
  });
  after(async () => {
    await repo?.close();
    await target?.stop();
  });

  const message = (activationId: string, text: string): ActivationRunRequest => ({
    sessionId: 'on-cluster',
    activationId,
    stimulus: { type: 'message', payload: { text } },
    sandbox: { provider: 'kruntimes', context: target.context, namespace: target.namespace, runtime: target.runtime },
  });
  const runs = async () => (await provider.list({ context: target.context, namespace: target.namespace })).map((s) => s.ref.name);
  const invocations = () => (fs.existsSync(counterFile) ? fs.readFileSync(counterFile, 'utf8').split('\n').filter(Boolean) : []);

  it('create → activate → commit → Run deleted → the next activation in another fresh Run sees the state; a retry is deduplicated', async () => {
    const phases: string[] = [];
    const first = await runner.run(message('k1', 'hello'), { onProgress: (p) => phases.push(p) });
    assert.equal(first.commit, 'committed', JSON.stringify(first));
    assert.equal(first.revision, 'r1');
    assert.deepEqual(await runs(), [], 'the Run is gone');
    assert.ok(phases.includes('sandbox') && phases.includes('cleanup'), phases.join(','));

    const second = await runner.run(message('k2', 'again'));
    assert.equal(second.commit, 'committed', JSON.stringify(second));
    assert.equal(second.revision, 'r2');
    const response = second.outcome?.response as { turn: number; history: string[] };
    assert.equal(response.turn, 2);
    assert.deepEqual(response.history, ['hello'], 'the agent saw the first turn');
    assert.deepEqual(await runs(), []);

    const retry = await runner.run(message('k2', 'again'));
    assert.equal(retry.deduplicated, true);
    assert.deepEqual(invocations(), ['k1', 'k2'], 'the agent ran once per activation id');
    if (target.simulator) {
      assert.ok((target.simulator.apiServer.requests.get('create runs') ?? 0) >= 2, 'each activation created a Run through the API server');
      assert.ok((target.simulator.apiServer.requests.get('delete runs') ?? 0) >= 2, 'and deleted it');
    }
  });
});
