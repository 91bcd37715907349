// The kruntimes provider's refusals and edges, against the cluster SIMULATOR: golden cases 2, 3,
// 25, 26, 31, 33, 34 of the access-API spec; expired credentials; the SDK's endpoint checks
// (non-session Run, UID mismatch); watches cut mid-way and expired (410); kubeconfig as kubectl
// reads it (KUBECONFIG lists, exec plugins, client certificates).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import { RUN_API_VERSION, RUN_KIND, RunStateError, RunStateMessages, TERMINATION_MONOTONIC_MESSAGE, DRAIN_SESSION_ONLY_MESSAGE, type Run } from '../../../protocol/kruntimes/run';
import type { SandboxConnection, SandboxCreateSpec } from '../../../protocol/sandboxes';
import { ClusterApi } from '../../../server/sandboxes/kruntimes/clusterApi';
import { bearerToken, configForContext, loadKubeConfig } from '../../../server/sandboxes/kruntimes/kubeconfig';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { RunWatch, type RunWatchEvent } from '../../../server/sandboxes/kruntimes/runWatch';
import { SandboxError } from '../../../server/sandboxes/provider';
import type { StoredObject } from '../../fixtures/cluster/objectStore';
import { type ClusterTarget, simulatorOnly, forEachClusterEra, startClusterTarget } from '../../fixtures/cluster/target';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Whether a local process exists (signal 0 checks without sending anything). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

forEachClusterEra('kruntimes provider: access, refusals and watches', function (era) {
  this.timeout(120_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;
  let api: ClusterApi;

  before(async () => {
    target = await startClusterTarget({ era });
    provider = target.provider();
    const loaded = loadKubeConfig({ KUBECONFIG: target.kubeconfigPath });
    assert.ok(loaded);
    api = new ClusterApi(configForContext(loaded.config, target.context), target.context);
  });
  after(async () => {
    await target?.stop();
  });

  const spec = (extra: Partial<SandboxCreateSpec> = {}) => target.spec(extra);
  const gateway = (c: SandboxConnection, token: string | null = c.token) =>
    new GatewayClient({ endpoint: c.endpoint, token: token ?? undefined, tls: c.tls });
  const phaseOf = async (name: string) => (await provider.get({ provider: 'kruntimes', context: target.context, namespace: target.namespace, name })).sandbox;
  /** Resolves once `file` exists in the sandbox (a command's first step writes it: the command is running). */
  async function fileAppears(gw: GatewayClient, file: string, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = await gw.read(file).then(
        () => true,
        (e: unknown) => {
          if (e instanceof GatewayError && e.status === 404) return false;
          throw e;
        },
      );
      if (found) return;
      assert.ok(Date.now() < deadline, `${file} did not appear within ${ms} ms: the command did not start`);
      await sleep(50);
    }
  }
  /**
   * Polls the sandbox for `ms` and asserts it stays `phase` the whole time: a lease can only be
   * shown to hold by letting more than its timeout pass, so this waits on the clock by design.
   */
  /** Polls for `ms` that the phase stays put: only time passing shows a lease or a heartbeat holds (no event to wait for). */
  async function staysFor(name: string, phase: string, ms: number, why: string): Promise<void> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      assert.equal((await phaseOf(name)).phase, phase, why);
      await sleep(200);
    }
  }
  async function until(name: string, phase: string, ms = 15_000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const s = await phaseOf(name);
      if (s.phase === phase || Date.now() > deadline) return s;
      await sleep(100);
    }
  }

  it('golden 2 and 3: a token without `get` on the Run → 403; no token → 401 `bearer token is required…`; an expired token → 401', async function () {
    const sim = simulatorOnly(() => target, this, 'needs tokens the cluster issues on demand');
    const sandbox = await provider.create(spec(), { waitForReady: true });
    const c = await provider.open(sandbox.ref);
    const denied = gateway(c, sim.tokenFor('stranger'));
    const anonymous = gateway(c, null);
    const expired = gateway(c, sim.tokens.expired);
    try {
      await assert.rejects(denied.status(), (e: unknown) => e instanceof GatewayError && e.status === 403 && e.message.includes('not authorized to access Session Run'));
      await assert.rejects(anonymous.status(), (e: unknown) => e instanceof GatewayError && e.status === 401 && e.message.includes('bearer token is required'));
      await assert.rejects(expired.status(), (e: unknown) => e instanceof GatewayError && e.status === 401 && e.message.includes('bearer token is not authenticated'));
      // A token granted `get` on exactly this Run is enough (the SubjectAccessReview of the spec).
      const allowed = gateway(c, sim.tokenFor('reader', { namespace: target.namespace, name: sandbox.ref.name }));
      assert.equal((await allowed.status()).state, 'SESSION_STATE_READY');
      await allowed.close();
    } finally {
      await Promise.all([denied.close(), anonymous.close(), expired.close()]);
    }
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
    await provider.delete(sandbox.ref);
  });

  it('an expired kubeconfig token: the API server answers 401 and the provider says to refresh the credentials', async function () {
    simulatorOnly(() => target, this, 'needs a context whose token has expired');
    await assert.rejects(provider.list({ context: 'simulator-expired', namespace: target.namespace }), (e: unknown) => {
      assert.ok(e instanceof SandboxError);
      assert.equal(e.code, 'cluster_unauthorized');
      assert.match(e.message, /401 Unauthorized/);
      assert.match(e.message, /refresh/);
      return true;
    });
  });

  it('golden 25: Drain while a command runs — new operations get 409, the in-flight command returns 200, the Run ends Succeeded', async () => {
    const sandbox = await provider.create(spec(), { waitForReady: true });
    const c = await provider.open(sandbox.ref);
    const gw = gateway(c);
    try {
      const inFlight = gw.execute({ command: { shell: ': > drain-started; sleep 2; printf drained' } });
      await fileAppears(gw, 'drain-started');
      await provider.terminate(sandbox.ref, 'Drain', { wait: false });
      assert.equal((await until(sandbox.ref.name, 'Finalizing')).phase, 'Finalizing');
      await assert.rejects(gw.writeFile('rejected.txt', Buffer.from('rejected')), (e: unknown) => e instanceof GatewayError && e.status === 409);
      const r = await inFlight;
      assert.equal(Buffer.from(r.command?.stdout ?? '', 'base64').toString(), 'drained');
      const done = await provider.terminate(sandbox.ref, 'Drain', { wait: true });
      assert.equal(done.phase, 'Succeeded');
      assert.equal(done.message, 'session finalized');
    } finally {
      await gw.close();
    }
    await provider.delete(sandbox.ref);
  });

  it('golden 26: Immediate while `sleep 20` runs — the in-flight request fails, then GET P → 409', async () => {
    const sandbox = await provider.create(spec(), { waitForReady: true });
    const c = await provider.open(sandbox.ref);
    const gw = gateway(c);
    try {
      const started = Date.now();
      const inFlight = gw.execute({ command: { shell: 'echo $$ > immediate-started; exec sleep 20' } }).then(
        () => 200,
        (e: unknown) => (e instanceof GatewayError ? e.status : -1),
      );
      await fileAppears(gw, 'immediate-started');
      const pid = Number((await gw.read('immediate-started')).contents.toString('utf8').trim());
      assert.ok(Number.isInteger(pid) && pid > 1, `the command wrote its pid (${pid})`);
      assert.equal((await provider.terminate(sandbox.ref, 'Immediate', { wait: true })).phase, 'Cancelled');
      if (target.simulator) {
        // The simulator's Runtime runs commands as local processes: `sleep 20` itself must be gone, not just the request.
        const deadline = Date.now() + 5_000;
        while (processAlive(pid)) {
          assert.ok(Date.now() < deadline, `the command (pid ${pid}) still runs after Immediate`);
          await sleep(20);
        }
      }
      const status = await inFlight;
      assert.notEqual(status, 200);
      assert.ok(Date.now() - started < 15_000, 'the command did not run to its end');
      await assert.rejects(gw.status(), (e: unknown) => e instanceof GatewayError && e.status === 409);
    } finally {
      await gw.close();
    }
    await provider.delete(sandbox.ref);
  });

  it('golden 31: a lease is held by operations:ws heartbeats while the sandbox is open, and expires after they stop', async () => {
    const own = target.provider();
    const sandbox = await own.create(spec({ leaseTimeoutSeconds: 3 }), { waitForReady: true });
    await own.open(sandbox.ref);
    await staysFor(sandbox.ref.name, 'Ready', 4500, 'heartbeats keep it Ready past the lease');
    await own.dispose(); // the editor went away: no more heartbeats
    const s = await until(sandbox.ref.name, 'Timeout', 10_000);
    assert.equal(s.phase, 'Timeout');
    assert.equal(s.message, 'session lease expired');
    await provider.delete(sandbox.ref);
  });

  it('a released lease expires while the provider keeps running; opening holds it again', async () => {
    const own = target.provider();
    try {
      const sandbox = await own.create(spec({ leaseTimeoutSeconds: 3 }), { waitForReady: true });
      assert.deepEqual((await own.open(sandbox.ref)).lease, { timeoutSeconds: 3 });
      assert.equal(await own.release(sandbox.ref), true);
      assert.deepEqual((await own.open(sandbox.ref)).lease, { timeoutSeconds: 3 }, 'opened again: held again');
      await staysFor(sandbox.ref.name, 'Ready', 4500, 'held again past the lease');
      assert.equal(await own.release(sandbox.ref), true);
      assert.equal(await own.release(sandbox.ref), false, 'nothing left to release');
      const s = await until(sandbox.ref.name, 'Timeout', 10_000);
      assert.equal(s.message, 'session lease expired');
      await provider.delete(sandbox.ref);
    } finally {
      await own.dispose();
    }
  });

  it('golden 33 and 34: the API server refuses a termination downgrade and Drain on a task Run with 422 and the CEL message', async () => {
    const sandbox = await provider.create(spec(), { waitForReady: true });
    await api.patchTermination(target.namespace, sandbox.ref.name, 'Immediate');
    await assert.rejects(api.patchTermination(target.namespace, sandbox.ref.name, 'Drain'), (e: unknown) => {
      assert.ok(e instanceof SandboxError);
      assert.equal(e.code, 'invalid_spec');
      assert.ok(e.message.includes(`Run.kruntimes.io "${sandbox.ref.name}" is invalid: spec: Invalid value: "object": ${TERMINATION_MONOTONIC_MESSAGE}`), e.message);
      return true;
    });
    const task: Run = { apiVersion: RUN_API_VERSION, kind: RUN_KIND, metadata: { name: 'task-drain' }, spec: { runtime: target.runtime, mode: { task: {} }, termination: { mode: 'Drain' } } };
    await assert.rejects(api.createRun(target.namespace, task), (e: unknown) => e instanceof SandboxError && e.code === 'invalid_spec' && e.message.includes(DRAIN_SESSION_ONLY_MESSAGE));
    await provider.delete(sandbox.ref);
  });

  it('open refuses a non-session Run and a Run whose endpoint does not end with its UID (the SDK messages)', async function () {
    const task: Run = { apiVersion: RUN_API_VERSION, kind: RUN_KIND, metadata: { name: 'a-task' }, spec: { runtime: target.runtime, mode: { task: {} } } };
    await api.createRun(target.namespace, task);
    const ref = { provider: 'kruntimes' as const, context: target.context, namespace: target.namespace, name: 'a-task' };
    await assert.rejects(provider.open(ref), (e: unknown) => e instanceof RunStateError && e.message === RunStateMessages.notSession);
    assert.ok(!(await provider.list({ context: target.context, namespace: target.namespace })).some((s) => s.ref.name === 'a-task'), 'task Runs are not listed as sandboxes');
    await api.deleteRun(target.namespace, 'a-task');

    const sim = simulatorOnly(() => target, this, 'needs to rewrite a Run status');
    const sandbox = await provider.create(spec(), { waitForReady: true });
    await sim.controller.settle();
    const stored = sim.store.get('runs', target.namespace, sandbox.ref.name) as StoredObject & Run;
    assert.ok(stored.status?.endpoint);
    stored.status.endpoint.url = stored.status.endpoint.url.replace(/sessions\/[^/]+$/, 'sessions/someone-else');
    sim.store.update('runs', stored);
    await assert.rejects(provider.open(sandbox.ref), (e: unknown) => e instanceof RunStateError && e.message === RunStateMessages.uidMismatch);
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
    await provider.delete(sandbox.ref);
  });

  it('a Run watch cut mid-way resumes from its resourceVersion: every change and the deletion made during the outage arrive as events; a 410 Gone relists', async function () {
    const sim = simulatorOnly(() => target, this, 'needs to cut the API server’s watch streams and compact its history');
    const name = 'watched';
    // No Runtime in `empty`: the Run stays Pending and this test moves its phases by hand.
    await api.createRun('empty', { apiVersion: RUN_API_VERSION, kind: RUN_KIND, metadata: { name }, spec: { runtime: 'none', mode: { session: {} } } });
    const events: RunWatchEvent[] = [];
    const watch = new RunWatch(api.config, api, { namespace: 'empty', name, onEvent: (e) => events.push(e) });
    const watchRequests = () => sim.apiServer.requests.get('watch runs') ?? 0;
    const before = watchRequests();
    await watch.start();
    const setPhase = (phase: string) => {
      const o = sim.store.get('runs', 'empty', name) as StoredObject & Run;
      sim.store.update('runs', { ...o, status: { ...o.status, phase } } as StoredObject);
    };
    const log = (): string[] => events.map((e) => `${e.type} ${e.run.status?.phase ?? 'none'}`);
    const waitFor = async (what: () => boolean, why: string) => {
      const deadline = Date.now() + 10_000;
      while (!what() && Date.now() < deadline) await sleep(20);
      assert.ok(what(), `${why}; events: ${log().join(', ')}`);
    };
    try {
      await waitFor(() => log().includes('MODIFIED Pending') || log().includes('ADDED Pending'), 'saw the Run Pending');
      await waitFor(() => watchRequests() > before, 'the watch stream is open');
      // One outage, three changes: a resumed watch replays each one; a fresh list would show only Ready.
      const mark = events.length;
      sim.apiServer.cutWatches();
      setPhase('Scheduled');
      setPhase('Running');
      setPhase('Ready');
      await waitFor(() => log().includes('MODIFIED Ready'), 'saw Ready');
      assert.deepEqual(log().slice(mark), ['MODIFIED Scheduled', 'MODIFIED Running', 'MODIFIED Ready'], 'every change made while the stream was down, in order');
      assert.equal(watch.stats.relists, 0, 'resumed, not listed again');

      // A 410 (the history was compacted during the outage): the watch lists again and goes on.
      sim.apiServer.cutWatches();
      setPhase('Cancelled');
      sim.store.compact();
      await waitFor(() => log().includes('MODIFIED Cancelled'), 'saw Cancelled after the 410');
      assert.equal(watch.stats.relists, 1, 'a 410 made it list again');

      // The Run deleted during an outage: only a resume reports it (a fresh watch lists what exists).
      const connects = watch.stats.connects;
      await waitFor(() => watchRequests() >= before + 4, 'the watch stream is open again'); // opened first, after the first cut, answered 410, after the relist
      sim.apiServer.cutWatches();
      sim.store.delete('runs', 'empty', name);
      await waitFor(() => log().includes('DELETED Cancelled'), 'saw the deletion');
      assert.ok(watch.stats.connects > connects, 'after a reconnect');
      assert.equal(watch.stats.relists, 1, 'from the resumed stream, not a relist');
    } finally {
      watch.stop();
      await api.deleteRun('empty', name).catch(() => undefined);
    }
  });

  it('kubeconfig as kubectl reads it: a KUBECONFIG list (missing files skipped), exec credential plugins, client certificates', async function () {
    simulatorOnly(() => target, this, 'uses the simulator’s generated credentials');
    const extra = path.join(target.dir, 'other-kubeconfig');
    fs.writeFileSync(
      extra,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'far', cluster: { server: 'https://127.0.0.1:1' } }],
        users: [{ name: 'far', user: { token: 'x' } }],
        contexts: [{ name: 'far-away', context: { cluster: 'far', user: 'far', namespace: 'team' } }],
        'current-context': 'far-away',
      }),
    );
    const listed = target.provider({ KUBECONFIG: [target.kubeconfigPath, path.join(target.dir, 'missing'), extra].join(path.delimiter), HOME: target.dir });
    const info = await listed.info();
    assert.deepEqual(info.contexts.map((c) => c.name).sort(), ['far-away', 'simulator', 'simulator-cert', 'simulator-exec', 'simulator-expired', 'simulator-viewer']);
    assert.deepEqual(info.contexts.find((c) => c.name === 'simulator')?.namespaces, ['default', 'empty', 'kruntimes-system']);
    assert.deepEqual(info.contexts.find((c) => c.name === 'far-away')?.namespaces, ['team'], 'an unreachable cluster falls back to its context namespace');
    assert.deepEqual(info.runtimes.map((r) => r.name), ['bash'], 'the first file sets the current context');

    // A context added to a file later shows up without restarting (kubectl reads the files each time).
    const grown = JSON.parse(fs.readFileSync(extra, 'utf8')) as { contexts: Array<{ name: string; context: Record<string, string> }> };
    grown.contexts.push({ name: 'far-later', context: { cluster: 'far', user: 'far' } });
    fs.writeFileSync(extra, JSON.stringify(grown));
    fs.utimesSync(extra, new Date(), new Date(Date.now() + 5000));
    assert.ok((await listed.info()).contexts.some((c) => c.name === 'far-later'));

    const viaExec = await listed.list({ context: 'simulator-exec', namespace: target.namespace });
    assert.ok(Array.isArray(viaExec));
    const sandbox = await provider.create(spec(), { waitForReady: true });
    await listed.list({ context: 'simulator-cert', namespace: target.namespace });
    const certRef = { ...sandbox.ref, context: 'simulator-cert' };
    await assert.rejects(listed.open(certRef), (e: unknown) => e instanceof SandboxError && e.code === 'cluster_unauthorized' && /no bearer token/.test(e.message));
    const execRef = { ...sandbox.ref, context: 'simulator-exec' };
    const c = await listed.open(execRef);
    const gw = gateway(c);
    assert.equal((await gw.status()).state, 'SESSION_STATE_READY');
    await gw.close();
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
    await provider.delete(sandbox.ref);
  });

  it('the provider’s watch reports every phase of the sandboxes in a namespace it listed, and their removal', async () => {
    const own = target.provider();
    const seen: string[] = [];
    const stop = own.watch((change) => seen.push(`${change.sandbox.ref.name}:${change.removed ? 'removed' : (change.sandbox.phase ?? 'Pending')}`));
    try {
      await own.list({ context: target.context, namespace: target.namespace });
      const sandbox = await provider.create(spec({ name: 'watched-sbx' }), { waitForReady: true });
      await provider.terminate(sandbox.ref, 'Drain', { wait: true });
      await provider.delete(sandbox.ref);
      const deadline = Date.now() + 10_000;
      while (!seen.includes('watched-sbx:removed') && Date.now() < deadline) await sleep(50);
      const mine = seen.filter((e) => e.startsWith('watched-sbx:')).map((e) => e.slice('watched-sbx:'.length));
      const order = mine.filter((p, i) => mine.indexOf(p) === i);
      for (const phase of ['Ready', 'Finalizing', 'Succeeded', 'removed']) assert.ok(order.includes(phase), `saw ${order.join(' → ')}`);
      assert.ok(order.indexOf('Ready') < order.indexOf('Finalizing') && order.indexOf('Finalizing') < order.indexOf('Succeeded') && order.indexOf('Succeeded') < order.indexOf('removed'), order.join(' → '));
    } finally {
      stop();
      await own.dispose();
    }
  });

  it('inside a cluster (no kubeconfig): the service account token, CA and namespace of the Pod reach the API server', async function () {
    simulatorOnly(() => target, this, 'mounts the simulator’s credentials as a service account');
    const sim = target.simulator!;
    const mount = path.join(target.dir, 'pod-root');
    const accountDir = path.join(mount, 'var/run/secrets/kubernetes.io/serviceaccount');
    fs.mkdirSync(accountDir, { recursive: true });
    fs.writeFileSync(path.join(accountDir, 'token'), sim.tokens.admin);
    fs.writeFileSync(path.join(accountDir, 'ca.crt'), sim.caPem);
    fs.writeFileSync(path.join(accountDir, 'namespace'), target.namespace);
    const port = new URL(sim.server).port;
    const env = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port, HOME: path.join(target.dir, 'nohome') };
    const loaded = loadKubeConfig(env, mount);
    assert.equal(loaded?.inCluster, true);
    assert.equal(await bearerToken(loaded.config), sim.tokens.admin, 'the access API gets the service account token');
    const inPod = target.provider(env, mount);
    const info = await inPod.info();
    assert.equal(info.available, true, info.reason);
    assert.deepEqual(info.contexts.map((c) => [c.name, c.namespaces[0], c.current]), [['inClusterContext', target.namespace, true]]);
    assert.deepEqual(info.runtimes.map((r) => r.name), [target.runtime]);
    const sandbox = await inPod.create({ ...spec(), context: 'inClusterContext' }, { waitForReady: true });
    assert.equal(sandbox.phase, 'Ready');
    assert.ok((await inPod.list({})).some((s) => s.ref.name === sandbox.ref.name), 'listed in the Pod’s namespace');
    assert.equal((await inPod.terminate(sandbox.ref, 'Immediate', { wait: true })).phase, 'Cancelled');
    await inPod.delete(sandbox.ref);
    // Without the token file there is no in-cluster configuration at all.
    fs.rmSync(path.join(accountDir, 'token'));
    assert.equal((await target.provider(env, mount).info()).available, false);
  });

  it('no kubeconfig at all: the provider is unavailable and says how to configure one', async () => {
    const none = target.provider({ HOME: path.join(target.dir, 'nohome') });
    const info = await none.info();
    assert.equal(info.available, false);
    assert.match(info.reason ?? '', /set KUBECONFIG/);
    await assert.rejects(none.list({}), (e: unknown) => e instanceof SandboxError && e.code === 'provider_unavailable');
  });
});
