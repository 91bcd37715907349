// Sandbox keys are `sandbox:` URI authorities: they must survive VS Code's percent-decoding and
// keep parts with dots (kubeconfig contexts) apart.
import assert from 'node:assert/strict';
import { parseSandboxKey, sandboxKey, type SandboxRef } from '../../../protocol/sandboxes';

describe('sandbox keys', () => {
  it('plain refs read as before: provider.context.namespace.name', () => {
    assert.equal(sandboxKey({ provider: 'local', context: 'local', namespace: 'default', name: 'sbx-1' }), 'local.local.default.sbx-1');
  });

  it('round-trips contexts and names with dots, capitals, @, :, /, ~, % and non-ASCII', () => {
    const refs: SandboxRef[] = [
      { provider: 'kruntimes', context: 'user@cluster.example.com', namespace: 'team.a', name: 'run.v1' },
      { provider: 'kruntimes', context: 'arn:aws:eks:eu-west-1:1234:cluster/Prod~1 %41', namespace: 'default', name: 'x' },
      { provider: 'kruntimes', context: 'kontekst-ł', namespace: 'default', name: 'y' },
    ];
    for (const ref of refs) {
      const key = sandboxKey(ref);
      assert.match(key, /^[a-z0-9~A-F.-]+$/, 'only characters a URI authority keeps as they are');
      assert.equal(key.split('.').length, 4);
      assert.deepEqual(parseSandboxKey(key), ref);
      assert.deepEqual(parseSandboxKey(decodeURIComponent(key)), ref, 'percent-decoding changes nothing');
    }
  });

  it('refuses malformed keys', () => {
    for (const bad of ['a.b.c', 'local.local.default.sbx.extra', 'local.lo%2Ecal.default.x', 'local.~zz.default.x', 'local.~FF.default.x', 'nope.local.default.x']) {
      assert.equal(parseSandboxKey(bad), undefined, bad);
    }
  });
});
