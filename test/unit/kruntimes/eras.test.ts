// Upstream eras C and D against the cluster SIMULATOR (spec §10.3, §10.10, §10.11 D12): the era-D
// Run CRD has no `mode.session.idleTimeoutSeconds`, so the API server prunes it with a Warning
// (400 under Strict field validation) and its Console serves only era-D routes; the provider
// learns the field set from the CRD — or, without RBAC for CRDs, from a dry-run create — never
// sends the field to era D, and gives those sandboxes a lease and a total timeout, so a sandbox
// ends `Timeout` (`session lease expired`) once the last user lets go. Era C keeps the idle timeout.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { RUN_API_VERSION, RUN_KIND } from '../../../protocol/kruntimes/run';
import { lifetimeColumn } from '../../../server/cli/kruntimes';
import { crdKeepsSessionIdleTimeout, ERA_D_DEFAULT_LEASE_SECONDS, ERA_D_DEFAULT_TIMEOUT } from '../../../server/sandboxes/kruntimes/sessionLifetime';
import type { SimulatorEra } from '../../fixtures/cluster/runCrd';
import type { ClusterSimulator } from '../../fixtures/cluster/simulator';
import { type ClusterTarget, startClusterTarget, wantsRealCluster } from '../../fixtures/cluster/target';

interface Answer {
  status: number;
  warnings: string[];
  body: { spec?: { mode?: { session?: Record<string, unknown> } }; message?: string; metadata?: { name?: string } } & Record<string, unknown>;
}

/** One request to the simulated API server as its admin. */
function kube(sim: ClusterSimulator, method: string, pathAndQuery: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const url = new URL(pathAndQuery, sim.server);
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = https.request(
      url,
      { method, ca: sim.caPem, headers: { Authorization: `Bearer ${sim.tokens.admin}`, ...(data ? { 'Content-Type': contentType, 'Content-Length': String(data.length) } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const w = res.headers.warning;
          resolve({ status: res.statusCode ?? 0, warnings: w === undefined ? [] : Array.isArray(w) ? w : [w], body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'] });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const runBody = (name: string) => ({
  apiVersion: RUN_API_VERSION,
  kind: RUN_KIND,
  metadata: { name },
  spec: { runtime: 'bash', mode: { session: { idleTimeoutSeconds: 600, leaseTimeoutSeconds: 60 } } },
});
const RUNS = '/apis/kruntimes.io/v1alpha1/namespaces/default/runs';
const CRD = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/runs.kruntimes.io';

/** A kubeconfig whose current context is a user allowed everything a sandbox needs except reading CRDs. */
function developerKubeconfig(target: ClusterTarget, sim: ClusterSimulator): string {
  sim.identities.grant('developer', { verbs: ['*'], resources: ['runs', 'runtimes', 'pods', 'services', 'pods/portforward', 'namespaces'] });
  const kc = JSON.parse(fs.readFileSync(sim.kubeconfigPath, 'utf8')) as { users: unknown[]; contexts: unknown[]; 'current-context': string };
  kc.users.push({ name: 'developer', user: { token: sim.identities.issueToken('developer') } });
  kc.contexts.push({ name: 'simulator-developer', context: { cluster: 'simulator', user: 'developer', namespace: 'default' } });
  kc['current-context'] = 'simulator-developer';
  const file = path.join(target.dir, 'developer-kubeconfig');
  fs.writeFileSync(file, JSON.stringify(kc), { mode: 0o600 });
  return file;
}

for (const era of ['C', 'D'] as SimulatorEra[]) {
  describe(`kruntimes eras: the Run CRD, the Console routes and session lifetimes (simulator, era ${era})`, function () {
    this.timeout(60_000);
    let target: ClusterTarget;
    let sim: ClusterSimulator;

    before(async function () {
      if (wantsRealCluster()) this.skip(); // a real cluster is one era; the provider tests run there
      target = await startClusterTarget({ era });
      assert.ok(target.simulator);
      sim = target.simulator;
    });
    after(async () => {
      await target?.stop();
    });

    it(`the API server ${era === 'D' ? 'prunes `spec.mode.session.idleTimeoutSeconds` with a Warning (400 under Strict); dry-run stores nothing' : 'keeps `spec.mode.session.idleTimeoutSeconds` without a warning'}`, async () => {
      const crd = await kube(sim, 'GET', CRD);
      assert.equal(crd.status, 200);
      assert.equal(crdKeepsSessionIdleTimeout(crd.body), era === 'C', 'the served CRD schema says which fields exist');

      const created = await kube(sim, 'POST', RUNS, runBody('warned'));
      assert.equal(created.status, 201);
      assert.equal(created.body.spec?.mode?.session?.leaseTimeoutSeconds, 60);
      if (era === 'D') {
        assert.equal(created.body.spec?.mode?.session?.idleTimeoutSeconds, undefined, 'pruned from the stored object');
        assert.deepEqual(created.warnings, ['299 - "unknown field \\"spec.mode.session.idleTimeoutSeconds\\""']);
        const strict = await kube(sim, 'POST', `${RUNS}?fieldValidation=Strict`, runBody('strict'));
        assert.equal(strict.status, 400);
        assert.equal(strict.body.message, 'strict decoding error: unknown field "spec.mode.session.idleTimeoutSeconds"');
        assert.equal((await kube(sim, 'GET', `${RUNS}/strict`)).status, 404, 'a refused create stores nothing');
        const patched = await kube(sim, 'PATCH', `${RUNS}/warned`, { spec: { mode: { session: { idleTimeoutSeconds: 5 } } } }, 'application/merge-patch+json');
        assert.equal(patched.status, 200, JSON.stringify(patched.body));
        assert.equal(patched.body.spec?.mode?.session?.idleTimeoutSeconds, undefined, 'pruned on update too');
        assert.equal(patched.warnings.length, 1);
      } else {
        assert.equal(created.body.spec?.mode?.session?.idleTimeoutSeconds, 600);
        assert.deepEqual(created.warnings, []);
      }
      const dry = await kube(sim, 'POST', `${RUNS}?dryRun=All`, runBody('dry'));
      assert.equal(dry.status, 200);
      assert.equal(dry.body.spec?.mode?.session?.idleTimeoutSeconds, era === 'C' ? 600 : undefined, 'a dry run is pruned exactly as a create');
      assert.equal((await kube(sim, 'GET', `${RUNS}/dry`)).status, 404, 'a dry run stores nothing');
      assert.equal((await kube(sim, 'DELETE', `${RUNS}/warned`)).status, 200);
    });

    it(`the provider learns the field set from the CRD and ${era === 'D' ? 'sends no idle timeout but a lease and a total timeout' : 'sends and keeps the idle timeout'}; the CLI shows what applies`, async () => {
      const provider = target.provider();
      const count = (key: string) => sim.apiServer.requests.get(key) ?? 0;
      const [crdReads, creates] = [count('get customresourcedefinitions'), count('create runs')];
      const sandbox = await provider.create(target.spec({ idleTimeoutSeconds: 600 }), { waitForReady: true });
      assert.equal(count('get customresourcedefinitions') - crdReads, 1);
      assert.equal(count('create runs') - creates, 1, 'no dry run when the CRD could be read');
      const stored = sim.store.get('runs', 'default', sandbox.ref.name) as unknown as { spec: { mode: { session: Record<string, unknown> }; timeout?: string } };
      if (era === 'D') {
        assert.deepEqual(stored.spec.mode.session, { leaseTimeoutSeconds: ERA_D_DEFAULT_LEASE_SECONDS });
        assert.equal(stored.spec.timeout, ERA_D_DEFAULT_TIMEOUT);
        assert.equal(lifetimeColumn(sandbox), 'lease=300s,timeout=8h');
      } else {
        assert.deepEqual(stored.spec.mode.session, { idleTimeoutSeconds: 600 });
        assert.equal(stored.spec.timeout, undefined);
        assert.equal(lifetimeColumn(sandbox), 'idle=600s');
      }
      // The era of the Console shows in what the dual-era client learnt from its first command.
      const c = await provider.open(sandbox.ref);
      const gw = new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls, readRetryWindowMs: 5000 });
      try {
        assert.equal((await gw.runCommand({ argv: ['printf', 'ok'] })).stdout.toString('utf8'), 'ok');
        if (era === 'D') assert.equal(gw.era, 'D', 'operations:execute answered 404 `endpoint not found`');
        else assert.notEqual(gw.era, 'D', 'operations:execute served');
      } finally {
        await gw.close();
      }
      await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
      await provider.delete(sandbox.ref);
    });

    it('without RBAC for CRDs the provider learns the field set from a dry-run create of the Run', async () => {
      const before = sim.apiServer.requests.get('create runs') ?? 0;
      const provider = target.provider({ KUBECONFIG: developerKubeconfig(target, sim), HOME: target.dir });
      const sandbox = await provider.create({ ...target.spec({ idleTimeoutSeconds: 600, leaseTimeoutSeconds: 30, timeout: '1h' }), context: 'simulator-developer' }, { waitForReady: true });
      assert.equal((sim.apiServer.requests.get('create runs') ?? 0) - before, 2, 'a dry run, then the create');
      const stored = sim.store.get('runs', 'default', sandbox.ref.name) as unknown as { spec: { mode: { session: Record<string, unknown> }; timeout?: string } };
      assert.deepEqual(stored.spec.mode.session, era === 'D' ? { leaseTimeoutSeconds: 30 } : { idleTimeoutSeconds: 600, leaseTimeoutSeconds: 30 }, 'the caller’s lease is kept');
      assert.equal(stored.spec.timeout, '1h', 'the caller’s total timeout is kept');
      await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
      await provider.delete(sandbox.ref);
    });

    if (era === 'D') {
      it('D12 through the provider: a sandbox held while open ends `Timeout` (`session lease expired`) within its lease after the last user lets go; none is left holding capacity', async () => {
        const provider = target.provider();
        const lease = 2;
        const sandbox = await provider.create(target.spec({ leaseTimeoutSeconds: lease }), { waitForReady: true });
        assert.deepEqual((await provider.open(sandbox.ref)).lease, { timeoutSeconds: lease });
        assert.equal((await provider.get(sandbox.ref)).sandbox.phase, 'Ready');
        // When the Runtime stored the Timeout, taken from its own events: the client's polling and the status
        // mirror's delay are not the lease's.
        let endedAt: number | undefined;
        const onEvent = (e: { object: { metadata: { name?: string }; status?: { phase?: string } } }) => {
          if (e.object.metadata.name === sandbox.ref.name && e.object.status?.phase === 'Timeout') endedAt ??= Date.now();
        };
        sim.runtime.on('event', onEvent);
        assert.equal(await provider.release(sandbox.ref), true, 'the last user lets go');
        const letGo = Date.now();
        let phase: string | undefined;
        let message: string | undefined;
        while (Date.now() - letGo < (lease + 5) * 1000) {
          const { sandbox: s } = await provider.get(sandbox.ref);
          phase = s.phase;
          message = s.message;
          if (phase === 'Timeout' || phase === 'Failed' || phase === 'Cancelled' || phase === 'Succeeded') break;
          await new Promise((r) => setTimeout(r, 100));
        }
        sim.runtime.off('event', onEvent);
        assert.equal(phase, 'Timeout');
        assert.equal(message, 'session lease expired');
        assert.ok(endedAt !== undefined, 'the Runtime stored the Timeout');
        const tookMs = endedAt - letGo;
        assert.ok(tookMs <= lease * 1000 + 1500, `ended ${tookMs} ms after the release (lease ${lease} s)`);
        process.stderr.write(`      (lease ${lease} s: Timeout ${tookMs} ms after the release)\n`);
        const local = sim.runtime.list('default').find((r) => r.metadata.name === sandbox.ref.name);
        assert.equal(local?.status?.phase, 'Timeout', 'the Run on the Runtime ended too: it holds no capacity');
        await provider.delete(sandbox.ref);
      });
    }
  });
}
