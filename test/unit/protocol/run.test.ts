// The Run model's pure rules: termination monotonicity (golden 33, 34), create-time CEL rules,
// the SDK's endpoint checks, and Go durations.
import assert from 'node:assert/strict';
import {
  checkRunSpecOnCreate,
  checkTerminationTransition,
  formatGoDuration,
  invalidRunMessage,
  parseGoDuration,
  type Run,
  RunSchema,
  RunStateError,
  sessionEndpoint,
  sessionEndpointPath,
  type TerminationMode,
} from '../../../protocol/kruntimes/run';

const readyRun = (over: { url?: string; uid?: string; phase?: string; session?: boolean } = {}): Run =>
  RunSchema.parse({
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name: 'sbx-1', namespace: 'agents', uid: over.uid ?? '6c0b1e8e' },
    spec: { runtime: 'bash-session', mode: over.session === false ? { task: {} } : { session: { idleTimeoutSeconds: 1800 } } },
    status: {
      phase: over.phase ?? 'Ready',
      endpoint: {
        protocol: 'HTTPS',
        url: over.url ?? 'https://kruntimes-console.kruntimes-system.svc/v1/namespaces/agents/runtimes/bash-session/sessions/6c0b1e8e',
        caBundle: 'LS0tLS1CRUdJTi0tLS0t',
      },
    },
  });

describe('Run: termination rule', () => {
  const modes: (TerminationMode | undefined)[] = [undefined, 'Drain', 'Immediate'];
  const allowed = new Set(['none→none', 'none→Drain', 'none→Immediate', 'Drain→Drain', 'Drain→Immediate', 'Immediate→Immediate']);
  for (const from of modes) {
    for (const to of modes) {
      const name = `${from ?? 'none'}→${to ?? 'none'}`;
      it(`${name} is ${allowed.has(name) ? 'allowed' : 'refused'}`, () => {
        const result = checkTerminationTransition(from, to);
        assert.equal(result.ok, allowed.has(name));
        if (!result.ok) {
          // golden 33
          assert.equal(result.message, 'termination may not be removed, downgraded, or changed except from Drain to Immediate');
        }
      });
    }
  }

  it('golden 34: a task Run with Drain is refused at create', () => {
    const result = checkRunSpecOnCreate({ runtime: 'bash', mode: { task: {} }, termination: { mode: 'Drain' } });
    assert.deepEqual(result, { ok: false, message: 'termination.mode Drain is only valid for session mode' });
    assert.deepEqual(checkRunSpecOnCreate({ runtime: 'bash', mode: { task: {} }, termination: { mode: 'Immediate' } }), { ok: true });
    assert.deepEqual(checkRunSpecOnCreate({ runtime: 'bash', mode: { session: {} }, termination: { mode: 'Drain' } }), { ok: true });
  });

  it('refuses zero or two modes, and a workspace on a session', () => {
    assert.equal(checkRunSpecOnCreate({ runtime: 'bash', mode: {} }).ok, false);
    assert.equal(checkRunSpecOnCreate({ runtime: 'bash', mode: { task: {}, session: {} } }).ok, false);
    assert.deepEqual(checkRunSpecOnCreate({ runtime: 'bash', mode: { session: {} }, workspace: {} }), {
      ok: false,
      message: 'session mode does not support spec.workspace',
    });
  });

  it('formats the Kubernetes 422 message', () => {
    assert.equal(
      invalidRunMessage('sbx-1', 'termination may not be removed, downgraded, or changed except from Drain to Immediate'),
      'Run.kruntimes.io "sbx-1" is invalid: spec: Invalid value: "object": termination may not be removed, downgraded, or changed except from Drain to Immediate',
    );
  });
});

describe('Run: SDK endpoint checks', () => {
  it('accepts a Ready session Run whose endpoint ends in sessions/<uid>', () => {
    const endpoint = sessionEndpoint(readyRun());
    assert.match(endpoint.url, /sessions\/6c0b1e8e$/);
    assert.equal(endpoint.caBundle, 'LS0tLS1CRUdJTi0tLS0t');
  });

  const refusals: [string, Run, string][] = [
    ['a task Run', readyRun({ session: false }), 'Run is not a Session Run'],
    ['a Running Run', readyRun({ phase: 'Running' }), 'Session Run is not ready'],
    ['a Succeeded Run', readyRun({ phase: 'Succeeded' }), 'Session Run is not ready'],
    ['a relative URL', readyRun({ url: '/v1/namespaces/a/runtimes/b/sessions/6c0b1e8e' }), 'Session Run has an invalid endpoint'],
    ['a UID mismatch', readyRun({ uid: 'other-uid' }), 'Session Run endpoint does not match its UID'],
    ['too few segments', readyRun({ url: 'https://h/sessions/6c0b1e8e' }), 'Session Run endpoint does not match its UID'],
  ];
  for (const [name, run, message] of refusals) {
    it(`refuses ${name}`, () => {
      assert.throws(() => sessionEndpoint(run), (e: unknown) => e instanceof RunStateError && e.message === message);
    });
  }

  it('builds the endpoint path with encoded segments', () => {
    assert.equal(sessionEndpointPath('default', 'bash', 'session-uid'), '/v1/namespaces/default/runtimes/bash/sessions/session-uid');
  });
});

describe('Run: schema and durations', () => {
  it('parses Go durations and rejects others', () => {
    assert.equal(parseGoDuration('2m'), 120_000);
    assert.equal(parseGoDuration('1h30m'), 5_400_000);
    assert.equal(parseGoDuration('500ms'), 500);
    assert.equal(parseGoDuration('1.5s'), 1500);
    assert.equal(parseGoDuration('0'), 0);
    for (const bad of ['', '5', 'm', '2 m', '1d', '-1s', '1h30']) assert.equal(parseGoDuration(bad), undefined, bad);
  });

  it('formats durations as Go prints them', () => {
    assert.equal(formatGoDuration(8 * 3_600_000), '8h0m0s');
    assert.equal(formatGoDuration(90_000), '1m30s');
    assert.equal(formatGoDuration(2000), '2s');
    assert.equal(formatGoDuration(250), '250ms');
  });

  it('refuses an out-of-range queueSize and a bad runtime name, keeps unknown fields', () => {
    const base = { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: {} };
    assert.equal(RunSchema.safeParse({ ...base, spec: { runtime: 'bash', mode: { session: { queueSize: 33 } } } }).success, false);
    assert.equal(RunSchema.safeParse({ ...base, spec: { runtime: '-bad', mode: { session: {} } } }).success, false);
    const run = RunSchema.parse({ ...base, spec: { runtime: 'bash', mode: { session: {} }, resources: { requests: { runs: 1 } } } });
    assert.deepEqual((run.spec as Record<string, unknown>).resources, { requests: { runs: 1 } });
  });
});
