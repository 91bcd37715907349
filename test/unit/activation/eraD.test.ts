// `session activate` when the sandbox's gateway serves only era D (commands over `operations:ws`;
// `operations:execute` and `operations:stream` answer 404 `endpoint not found`): the agent runs in a
// fresh sandbox and its turn is committed, exactly as on era C.
import assert from 'node:assert/strict';
import { runActivateCommand } from '../../../server/cli/activation';
import { ensureGateway } from '../../../server/gateway/daemonClient';
import { captureIo } from '../../fixtures/cliCapture';
import { AGENT_SCRIPT, type ActivationWorld, createActivationWorld, gatewayCommand } from '../../fixtures/activation/harness';

describe('session activate against an era-D gateway (real local daemon, --api era-d)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;

  before(async () => {
    world = await createActivationWorld();
    // The provider finds this daemon through the state dir and uses it for the activation's sandbox.
    const gateway = await ensureGateway({ stateDir: world.stateDir, command: gatewayCommand(), api: 'era-d' });
    assert.equal(gateway.api, 'era-d');
  });
  after(async () => {
    await world?.dispose();
  });

  it('runs the agent in a fresh sandbox and commits its turn', async () => {
    const run = captureIo();
    const code = await runActivateCommand(
      ['era-d', '--message', 'over the socket', '--activation-id', 'era-d-1', '--repository', world.repoRoot, '--', process.execPath, AGENT_SCRIPT, 'activate'],
      run.io,
      { providers: { local: world.provider }, env: {} },
    );
    assert.equal(code, 0, run.err());
    assert.match(run.out(), /committed era-d@r1: completed\n/);
    assert.match(run.out(), /"text": "turn 1: over the socket"/);
  });
});
