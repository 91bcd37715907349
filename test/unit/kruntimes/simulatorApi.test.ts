// The cluster SIMULATOR answers like a Kubernetes API server with upstream's Run CRD installed,
// so the kruntimes tests that go through it check the product against upstream's facts, not
// against itself: structural pruning of unknown fields anywhere in a Run, the CRD's OpenAPI
// bounds and `x-kubernetes-validations` rules with their messages (crdEraC.ts / crdEraD.ts),
// namespace existence, PUT without resourceVersion, finalizers, label and field selectors, and
// a status that never moves backwards. Raw HTTP requests, as any client sends them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { startClusterSimulator, type ClusterSimulator } from '../../fixtures/cluster/simulator';

interface Answer {
  status: number;
  warnings: string[];
  body: Record<string, unknown> & { message?: string; metadata?: Record<string, unknown>; spec?: Record<string, unknown>; items?: Array<{ metadata: { name: string } }> };
}

function kube(sim: ClusterSimulator, method: string, pathAndQuery: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = https.request(
      new URL(pathAndQuery, sim.server),
      { method, ca: sim.caPem, headers: { Authorization: `Bearer ${sim.tokens.admin}`, ...(data ? { 'Content-Type': contentType, 'Content-Length': String(data.length) } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, warnings: res.headersDistinct.warning ?? [], body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'] });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const RUNS = '/apis/kruntimes.io/v1alpha1/namespaces/default/runs';
const run = (name: string, spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Run',
  metadata: { name, ...metadata },
  spec: { runtime: 'none', mode: { session: {} }, ...spec },
});
const invalid = (name: string, detail: string) => `Run.kruntimes.io "${name}" is invalid: ${detail}`;

for (const era of ['C', 'D'] as const) {
  describe(`cluster simulator: a Kubernetes API server with upstream's era-${era} Run CRD`, function () {
    this.timeout(60_000);
    let sim: ClusterSimulator;
    let dir: string;

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-simapi-'));
      sim = await startClusterSimulator({ dir, era, runtimes: [{ namespace: 'default', name: 'bash' }] });
    });
    after(async () => {
      await sim?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('prunes unknown fields anywhere in a Run (top-level spec, nested, metadata) with a Warning each; Strict refuses them with 400', async () => {
      const body = run('pruned', { colour: 'blue', source: { inline: 'echo', branch: 'main' }, mode: { session: { queueSize: 4, idleTimeoutSeconds: 60 } } }, { nickname: 'x' });
      const created = await kube(sim, 'POST', RUNS, { ...body, extra: true });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const spec = created.body.spec as Record<string, unknown>;
      assert.equal(spec.colour, undefined, 'an unknown top-level spec field is pruned');
      assert.deepEqual(spec.source, { inline: 'echo' }, 'an unknown nested field is pruned');
      assert.equal(created.body.extra, undefined);
      assert.equal(created.body.metadata?.nickname, undefined);
      const expected = ['extra', 'spec.colour', 'spec.source.branch', ...(era === 'D' ? ['spec.mode.session.idleTimeoutSeconds'] : []), 'metadata.nickname'];
      assert.deepEqual([...created.warnings].sort(), expected.map((p) => `299 - ${JSON.stringify(`unknown field "${p}"`)}`).sort());
      assert.deepEqual((spec.mode as { session: Record<string, unknown> }).session, era === 'D' ? { queueSize: 4 } : { queueSize: 4, idleTimeoutSeconds: 60 });
      const stored = sim.store.get('runs', 'default', 'pruned');
      assert.equal((stored?.spec as Record<string, unknown>).colour, undefined, 'pruned in storage, not just in the answer');

      const strict = await kube(sim, 'POST', `${RUNS}?fieldValidation=Strict`, run('strict', { colour: 'blue' }));
      assert.equal(strict.status, 400);
      assert.equal(strict.body.message, 'strict decoding error: unknown field "spec.colour"');
      const ignored = await kube(sim, 'POST', `${RUNS}?fieldValidation=Ignore`, run('ignored', { colour: 'blue' }));
      assert.equal(ignored.status, 201);
      assert.deepEqual(ignored.warnings, []);
      const patched = await kube(sim, 'PATCH', `${RUNS}/ignored`, { spec: { ttlSecondsAfterFinished: 5, shade: 'dark' } }, 'application/merge-patch+json');
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.equal((patched.body.spec as Record<string, unknown>).shade, undefined, 'pruned on update too');
      assert.deepEqual(patched.warnings, ['299 - "unknown field \\"spec.shade\\""']);
    });

    it("answers the CRD's OpenAPI bounds and x-kubernetes-validations rules with the API server's 422 wording, all errors of a request at once", async () => {
      const twoModes = await kube(sim, 'POST', RUNS, run('two-modes', { mode: { session: {}, task: {} } }));
      assert.equal(twoModes.status, 422);
      assert.equal(twoModes.body.message, invalid('two-modes', 'spec.mode: Invalid value: "object": exactly one of task, function, or session must be set'));

      const several = await kube(sim, 'POST', RUNS, run('several', { source: { inline: 'x', repoURL: 'https://example.com/r.git' }, workspace: { name: 'ws' }, termination: { mode: 'Later' } }));
      assert.equal(several.status, 422);
      assert.equal(
        several.body.message,
        invalid(
          'several',
          '[spec.termination.mode: Unsupported value: "Later": supported values: "Immediate", "Drain", <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]',
        ),
        'an unsupported enum value stops the rules from running, as in the API server',
      );
      const rules = await kube(sim, 'POST', RUNS, run('rules', { source: { inline: 'x', repoURL: 'https://example.com/r.git' }, workspace: { name: 'ws' } }));
      assert.equal(
        rules.body.message,
        invalid('rules', '[spec: Invalid value: "object": session mode does not support spec.workspace, spec.source: Invalid value: "object": inline and repoURL are mutually exclusive]'),
      );
      const bounds = await kube(sim, 'POST', RUNS, run('Bounds', { runtime: 'no spaces', mode: { session: { queueSize: 33 } }, env: [{ value: 'x' }] }));
      assert.equal(bounds.status, 422);
      assert.equal(
        bounds.body.message,
        invalid(
          'Bounds',
          "[metadata.name: Invalid value: \"Bounds\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.env[0].name: Required value, spec.mode.session.queueSize: Invalid value: 33: spec.mode.session.queueSize in body should be less than or equal to 32, spec.runtime: Invalid value: \"no spaces\": spec.runtime in body should match '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$']",
        ),
      );
      const drainTask = await kube(sim, 'POST', RUNS, run('drain-task', { mode: { task: {} }, termination: { mode: 'Drain' } }));
      assert.equal(drainTask.body.message, invalid('drain-task', 'spec: Invalid value: "object": termination.mode Drain is only valid for session mode'));
      const badInput = await kube(sim, 'POST', RUNS, run('bad-input', { artifactInputs: [{ path: '../up', ref: { name: 'a', driver: 's3', type: 'file', location: { filesystem: { path: 'p' } }, sizeBytes: 1, createdAt: '2025-01-01T00:00:00Z' } }] }));
      assert.equal(
        badInput.body.message,
        invalid('bad-input', "[spec.artifactInputs[0]: Invalid value: \"object\": path must be a relative path without empty, '.' or '..' segments, spec.artifactInputs[0].ref: Invalid value: \"object\": artifact location must match driver]"),
      );

      // Transition rules run on update only.
      assert.equal((await kube(sim, 'POST', RUNS, run('moving', { termination: { mode: 'Immediate' } }))).status, 201);
      const downgrade = await kube(sim, 'PATCH', `${RUNS}/moving`, { spec: { termination: { mode: 'Drain' } } }, 'application/merge-patch+json');
      assert.equal(downgrade.status, 422);
      assert.equal(downgrade.body.message, invalid('moving', 'spec: Invalid value: "object": termination may not be removed, downgraded, or changed except from Drain to Immediate'));
      const immutable = await kube(sim, 'PATCH', `${RUNS}/moving`, { spec: { mode: { session: { queueSize: 2 } } } }, 'application/merge-patch+json');
      assert.equal(immutable.body.message, invalid('moving', 'spec: Invalid value: "object": runtime, source, mode, artifactInputs, env, timeout, retryPolicy, and resources are immutable after Run creation'));
      const workspace = await kube(sim, 'PATCH', `${RUNS}/moving`, { spec: { affinity: {} } }, 'application/merge-patch+json');
      assert.equal(workspace.body.message, invalid('moving', 'spec: Invalid value: "object": workspace and affinity are immutable after Run creation'));
      const ttl = await kube(sim, 'PATCH', `${RUNS}/moving`, { spec: { ttlSecondsAfterFinished: 30 } }, 'application/merge-patch+json');
      assert.equal(ttl.status, 200, 'a mutable field still changes');
    });

    it('a Run in a namespace that does not exist is 404; PUT without resourceVersion is 422, with a stale one 409', async () => {
      const missing = await kube(sim, 'POST', '/apis/kruntimes.io/v1alpha1/namespaces/nowhere/runs', run('lost'));
      assert.equal(missing.status, 404);
      assert.equal(missing.body.message, 'namespaces "nowhere" not found');

      assert.equal((await kube(sim, 'POST', RUNS, run('put-me'))).status, 201);
      await sim.controller.settle(); // the controller writes the status once (no Runtime `none`): read after it
      const created = await kube(sim, 'GET', `${RUNS}/put-me`);
      const { resourceVersion: _rv, ...meta } = created.body.metadata as Record<string, unknown>;
      const unconditional = await kube(sim, 'PUT', `${RUNS}/put-me`, { ...created.body, metadata: meta });
      assert.equal(unconditional.status, 422);
      assert.equal(unconditional.body.message, 'runs.kruntimes.io "put-me" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update');
      const labelled = await kube(sim, 'PUT', `${RUNS}/put-me`, { ...created.body, metadata: { ...created.body.metadata, labels: { a: 'b' } } });
      assert.equal(labelled.status, 200, JSON.stringify(labelled.body));
      const stale = await kube(sim, 'PUT', `${RUNS}/put-me`, created.body);
      assert.equal(stale.status, 409);
      assert.equal(stale.body.reason, 'Conflict');
    });

    it('finalizers: a client adds its own; delete only marks the Run while one remains; removing the last one deletes it; none may be added while deleting', async () => {
      const name = 'held';
      assert.equal((await kube(sim, 'POST', RUNS, run(name, {}, { finalizers: ['example.com/keep'] }))).status, 201);
      const added = await kube(sim, 'PATCH', `${RUNS}/${name}`, { metadata: { finalizers: ['example.com/keep', 'example.com/audit'] } }, 'application/merge-patch+json');
      assert.deepEqual(added.body.metadata?.finalizers, ['example.com/keep', 'example.com/audit'], 'a client patch of metadata.finalizers is kept');
      const deleted = await kube(sim, 'DELETE', `${RUNS}/${name}`);
      assert.equal(deleted.status, 200);
      assert.ok(deleted.body.metadata?.deletionTimestamp, 'marked for deletion');
      await sim.controller.settle();
      assert.ok(sim.store.get('runs', 'default', name), 'still there: other finalizers hold it');
      const more = await kube(sim, 'PATCH', `${RUNS}/${name}`, { metadata: { finalizers: ['example.com/keep', 'example.com/audit', 'example.com/late'] } }, 'application/merge-patch+json');
      assert.equal(more.status, 422);
      assert.match(more.body.message ?? '', /metadata\.finalizers: Forbidden: no new finalizers can be added if the object is being deleted/);
      assert.equal((await kube(sim, 'PATCH', `${RUNS}/${name}`, { metadata: { finalizers: ['example.com/audit'] } }, 'application/merge-patch+json')).status, 200);
      assert.ok(sim.store.get('runs', 'default', name));
      const last = await kube(sim, 'PATCH', `${RUNS}/${name}`, { metadata: { finalizers: null } }, 'application/merge-patch+json');
      assert.equal(last.status, 200);
      assert.equal((await kube(sim, 'GET', `${RUNS}/${name}`)).status, 404, 'gone once the last finalizer is removed');
    });

    it('label selectors per the Kubernetes grammar (=, ==, !=, in, notin, key, !key); an unsupported field selector is 400', async () => {
      for (const [name, labels] of [
        ['sel-a', { tier: 'a', team: 'x' }],
        ['sel-b', { tier: 'b' }],
        ['sel-c', { team: 'y' }],
      ] as const) {
        assert.equal((await kube(sim, 'POST', RUNS, run(name, {}, { labels }))).status, 201);
      }
      const names = async (selector: string) => {
        const got = await kube(sim, 'GET', `${RUNS}?labelSelector=${encodeURIComponent(selector)}`);
        assert.equal(got.status, 200, `${selector}: ${JSON.stringify(got.body)}`);
        return (got.body.items ?? []).map((o) => o.metadata.name).filter((n) => n.startsWith('sel-'));
      };
      assert.deepEqual(await names('tier=a'), ['sel-a']);
      assert.deepEqual(await names('tier==a'), ['sel-a']);
      assert.deepEqual(await names('tier!=a'), ['sel-b', 'sel-c'], '!= matches objects without the label');
      assert.deepEqual(await names('tier in (a, b)'), ['sel-a', 'sel-b']);
      assert.deepEqual(await names('tier notin (a)'), ['sel-b', 'sel-c']);
      assert.deepEqual(await names('team'), ['sel-a', 'sel-c']);
      assert.deepEqual(await names('!team'), ['sel-b']);
      assert.deepEqual(await names('tier in (a,b),!team'), ['sel-b']);
      const bad = await kube(sim, 'GET', `${RUNS}?labelSelector=${encodeURIComponent('tier in a')}`);
      assert.equal(bad.status, 400);
      const field = await kube(sim, 'GET', `${RUNS}?fieldSelector=spec.runtime%3Dnone`);
      assert.equal(field.status, 400);
      assert.match(field.body.message ?? '', /field label not supported: spec\.runtime$/);
      const byName = await kube(sim, 'GET', `${RUNS}?fieldSelector=metadata.name%21%3Dsel-a,metadata.name%3Dsel-b`);
      assert.deepEqual(byName.body.items?.map((o) => o.metadata.name), ['sel-b']);
    });

    it("a session Run's phases only move forward and its Scheduled condition names the Pod of status.assignedPod", async () => {
      const phases: string[] = [];
      const conditions: string[] = [];
      let assigned = '';
      const onEvent = (e: { resource: string; object: { metadata: { name?: string }; status?: { phase?: string; assignedPod?: string; conditions?: Array<{ type: string; message?: string }> } } }) => {
        if (e.resource !== 'runs' || e.object.metadata.name !== 'forward') return;
        const st = e.object.status;
        if (st?.phase && phases.at(-1) !== st.phase) phases.push(st.phase);
        if (st?.assignedPod) assigned = st.assignedPod;
        for (const c of st?.conditions ?? []) if (c.type === 'Scheduled' && c.message) conditions.push(c.message);
      };
      sim.store.on('event', onEvent);
      try {
        assert.equal((await kube(sim, 'POST', RUNS, run('forward', { runtime: 'bash' }))).status, 201);
        const deadline = Date.now() + 20_000;
        while (!phases.includes('Ready') && Date.now() < deadline) await new Promise((r) => sim.store.once('event', r));
        assert.ok(phases.includes('Ready'), `phases ${phases.join(' → ')}`);
        const order = ['Pending', 'Scheduled', 'Running', 'Ready'];
        const ranks = phases.map((p) => order.indexOf(p));
        assert.deepEqual(ranks, [...ranks].sort((a, b) => a - b), `phases never go back: ${phases.join(' → ')}`);
        assert.ok(assigned);
        assert.ok(conditions.length > 0 && conditions.every((m) => m.includes(assigned)), `conditions ${conditions.join(' | ')} name ${assigned}`);
      } finally {
        sim.store.off('event', onEvent);
        await kube(sim, 'PATCH', `${RUNS}/forward`, { spec: { termination: { mode: 'Immediate' } } }, 'application/merge-patch+json');
      }
    });
  });
}

/** A streaming GET (a watch): its status once the headers arrive, then its JSON lines one by one. */
function stream(sim: ClusterSimulator, pathAndQuery: string): Promise<{ status: number; next(timeoutMs?: number): Promise<{ type: string; object: { metadata?: { name?: string; resourceVersion?: string } } }>; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = https.request(new URL(pathAndQuery, sim.server), { ca: sim.caPem, headers: { Authorization: `Bearer ${sim.tokens.admin}` } }, (res) => {
      let buffered = '';
      const lines: string[] = [];
      const waiters: Array<(line: string) => void> = [];
      res.on('data', (c: Buffer) => {
        buffered += c.toString('utf8');
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          const waiter = waiters.shift();
          if (waiter) waiter(line);
          else lines.push(line);
        }
      });
      resolve({
        status: res.statusCode ?? 0,
        close: () => req.destroy(),
        next: (timeoutMs = 10_000) =>
          new Promise((res2, rej2) => {
            const parse = (line: string) => JSON.parse(line) as { type: string; object: { metadata?: { name?: string; resourceVersion?: string } } };
            const queued = lines.shift();
            if (queued !== undefined) return res2(parse(queued));
            const timer = setTimeout(() => rej2(new Error('no watch event in time')), timeoutMs);
            waiters.push((line) => {
              clearTimeout(timer);
              res2(parse(line));
            });
          }),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('cluster simulator: reads at a resourceVersion newer than the store’s, as a real API server answers them', function () {
  this.timeout(30_000);
  let sim: ClusterSimulator;
  let dir: string;
  const namespace = (name: string) => sim.store.create('namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name }, status: { phase: 'Active' } });

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-simrv-'));
    sim = await startClusterSimulator({ dir, runtimes: [{ namespace: 'default', name: 'bash' }], bookmarkIntervalMs: 20 });
  });
  after(async () => {
    await sim?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a watch from a future resourceVersion is established at once (200) and sends only events and bookmarks newer than it', async () => {
    const current = Number(sim.store.resourceVersion);
    const future = current + 2;
    const watch = await stream(sim, `/api/v1/namespaces?watch=true&allowWatchBookmarks=true&resourceVersion=${future}`);
    // A control watch from now: its bookmarks show the bookmark timer ran while the store was not yet past `future`.
    const control = await stream(sim, `/api/v1/namespaces?watch=true&allowWatchBookmarks=true&resourceVersion=${current}`);
    try {
      assert.equal(watch.status, 200);
      namespace('future-1');
      namespace('future-2'); // resourceVersion == future: not newer, not sent
      assert.equal(sim.store.resourceVersion, String(future));
      assert.equal((await control.next()).object.metadata?.name, 'future-1');
      assert.equal((await control.next()).object.metadata?.name, 'future-2');
      for (let seen = 0; seen < 2; ) if ((await control.next()).type === 'BOOKMARK') seen++;
      namespace('future-3');
      const first = await watch.next();
      assert.equal(first.type, 'ADDED', 'no bookmark at or below the requested resourceVersion came first');
      assert.equal(first.object.metadata?.name, 'future-3');
      assert.equal(first.object.metadata?.resourceVersion, String(future + 1));
    } finally {
      watch.close();
      control.close();
    }
  });

  it('a list at a future resourceVersion waits up to 3 s for the store, then 504 `Too large resource version` (retry after 1 s); a write in time answers 200', async () => {
    const current = Number(sim.store.resourceVersion);
    const started = Date.now();
    const late = await kube(sim, 'GET', `/api/v1/namespaces?resourceVersion=${current + 1}`);
    assert.ok(Date.now() - started >= 2900, `answered after ${Date.now() - started} ms, not after the watch cache's 3 s`);
    assert.equal(late.status, 504);
    assert.deepEqual(late.body, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `Timeout: Too large resource version: ${current + 1}, current: ${current}`,
      reason: 'Timeout',
      details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 },
      code: 504,
    });
    const listeners = sim.store.listenerCount('event');
    const waiting = kube(sim, 'GET', `/api/v1/namespaces?resourceVersion=${current + 1}&resourceVersionMatch=NotOlderThan`);
    while (sim.store.listenerCount('event') === listeners) await new Promise((r) => setTimeout(r, 5)); // the list is waiting for the store
    namespace('caught-up');
    const inTime = await waiting;
    assert.equal(inTime.status, 200);
    assert.ok(inTime.body.items?.some((n) => n.metadata.name === 'caught-up'));
  });
});
