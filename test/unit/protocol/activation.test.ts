// Maka's activation contract (spec §10): the request's strict key set and the JSONL events.
import assert from 'node:assert/strict';
import { ActivationRequestSchema, OUTCOME_EXIT_CODES, parseActivationLine } from '../../../protocol/activation';

describe('activation protocol', () => {
  const request = {
    schemaVersion: 1,
    activationId: 'activation-1',
    cloudSessionId: 'cloud-session-1',
    makaSessionId: 'maka-session-1',
    stimulus: { type: 'message', payload: { text: 'Inspect the workspace' } },
  };

  it('accepts the spec example request', () => {
    assert.equal(ActivationRequestSchema.safeParse(request).success, true);
  });

  it('refuses unknown keys, blank ids, other versions and stimulus types', () => {
    assert.equal(ActivationRequestSchema.safeParse({ ...request, extra: 1 }).success, false);
    assert.equal(ActivationRequestSchema.safeParse({ ...request, activationId: '  ' }).success, false);
    assert.equal(ActivationRequestSchema.safeParse({ ...request, schemaVersion: 2 }).success, false);
    assert.equal(ActivationRequestSchema.safeParse({ ...request, stimulus: { type: 'webhook', payload: {} } }).success, false);
    assert.equal(ActivationRequestSchema.safeParse({ ...request, stimulus: { type: 'message', payload: {}, x: 1 } }).success, false);
  });

  it('parses the three event lines and refuses other protocols', () => {
    const prefix = { protocol: 'maka.activation', schemaVersion: 1, activationId: 'a', cloudSessionId: 'c' };
    assert.equal(parseActivationLine(JSON.stringify({ ...prefix, type: 'start', workspaceRoot: '/w' })).type, 'start');
    assert.equal(parseActivationLine(JSON.stringify({ ...prefix, type: 'runtime_event', event: { id: 'e' } })).type, 'runtime_event');
    const outcome = parseActivationLine(JSON.stringify({ ...prefix, type: 'outcome', status: 'blocked', reason: 'permission_required', requiredAction: 'grant_permission' }));
    assert.equal(outcome.type === 'outcome' && OUTCOME_EXIT_CODES[outcome.status], 3);
    assert.throws(() => parseActivationLine(JSON.stringify({ ...prefix, protocol: 'other', type: 'start', workspaceRoot: '/w' })));
    assert.throws(() => parseActivationLine('not json'), /not JSON/);
  });
});
