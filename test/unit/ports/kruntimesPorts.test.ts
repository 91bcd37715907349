// Port forwarding to kruntimes sandboxes against the cluster SIMULATOR (not Kubernetes): a real
// HTTP server started in the sandbox answers through the forwarded loopback port, carried by a
// `pods/portforward` of the Run's assigned Pod through the API server; the listing runs `cat` in
// the sandbox and says so when the sandbox is busy; a user without `create` on pods/portforward
// is refused in words; a forward ends — its local port closed — when the sandbox ends or the
// client goes; a sandbox that ended is refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { CompanionError } from '../../../protocol/companion';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { PortEnded } from '../../../protocol/ports';
import type { SandboxRef, SandboxSummary } from '../../../protocol/sandboxes';
import type { PortForwardService } from '../../../server/ports/portForwardService';
import { portForwardService } from '../../../server/ports/portSubstrates';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { SandboxError } from '../../../server/sandboxes/provider';
import { quietLogger } from '../../fixtures/activation/harness';
import { type ClusterTarget, startClusterTarget } from '../../fixtures/cluster/target';
import { until } from '../../fixtures/waits';
import { accepts, freePort } from '../../fixtures/loopback';

/** The service over `provider`, as the companion server builds it: its port-forwards use the provider's kubeconfig. */
function serviceFor(provider: KruntimesSandboxProvider): PortForwardService {
  return portForwardService(new Map([['kruntimes', provider]]), quietLogger());
}

describe('ports: kruntimes sandboxes (cluster simulator, era D)', function () {
  this.timeout(120_000);
  let target: ClusterTarget;
  let provider: KruntimesSandboxProvider;
  let service: PortForwardService;
  const ended: PortEnded[] = [];

  before(async () => {
    target = await startClusterTarget({ era: 'D' });
    provider = target.provider();
    service = serviceFor(provider);
  });
  after(async () => {
    await service?.dispose();
    await target?.stop();
  });

  async function newSandbox(): Promise<SandboxSummary> {
    return provider.create(target.spec(), { waitForReady: true });
  }

  async function gateway(ref: SandboxRef): Promise<GatewayClient> {
    const c = await provider.open(ref);
    return new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls });
  }

  /** A command running in the sandbox until `stop()`; resolves once its output contains `ready`. */
  async function runInSandbox(client: GatewayClient, argv: string[], ready: string): Promise<{ stop(): Promise<void> }> {
    const controller = new AbortController();
    let out = '';
    const done = (async () => {
      for await (const e of client.stream({ command: { argv } }, { signal: controller.signal })) {
        if (e.type === 'output' && e.output.data) out += Buffer.from(e.output.data, 'base64').toString('utf8');
      }
    })().catch(() => undefined);
    let finished = false;
    void done.then(() => (finished = true));
    await until(`"${ready}" from ${argv.join(' ')}`, () => out.includes(ready) || finished);
    if (!out.includes(ready)) throw new Error(`${argv.join(' ')} ended: ${out}`);
    return {
      stop: async () => {
        controller.abort();
        await done;
      },
    };
  }

  it('an HTTP server started in the sandbox answers through the forwarded loopback port, via pods/portforward of the assigned Pod', async () => {
    const sandbox = await newSandbox();
    const client = await gateway(sandbox.ref);
    await client.writeFile('hello-from-the-sandbox.txt', Buffer.from('hi'));
    const port = await freePort();
    const server = await runInSandbox(client, ['python3', '-u', '-m', 'http.server', String(port), '--bind', '127.0.0.1'], 'Serving HTTP');
    try {
      const forward = await service.forward(sandbox.ref, port, undefined, (e) => ended.push(e));
      assert.equal(forward.via, 'port-forward');
      assert.equal(forward.localHost, '127.0.0.1');
      assert.notEqual(forward.localPort, port);
      assert.match(forward.message, /through the API server of context simulator \(Pod default\/runtime-bash-0\)/);
      const res = await fetch(forward.url);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /hello-from-the-sandbox\.txt/);
      assert.ok((target.simulator?.portForward.connections.get(`default/runtime-bash-0:${port}`) ?? 0) > 0, 'carried by a pods/portforward of the Run\'s Pod');
      // The same port asked again is the same forward; it is listed; stopping it closes its local port.
      assert.equal((await service.forward(sandbox.ref, port, undefined, () => undefined)).id, forward.id);
      assert.deepEqual(service.forwardsOf(sandbox.ref).map((f) => f.id), [forward.id]);
      assert.equal(await service.stop(forward.id), true);
      assert.equal(await accepts(forward.localPort), false, 'the local port is closed once stopped');
      // A requested local port is used.
      const wanted = await freePort();
      const again = await service.forward(sandbox.ref, port, wanted, () => undefined);
      assert.equal(again.localPort, wanted);
      assert.equal((await fetch(again.url)).status, 200);
      await service.stop(again.id);
    } finally {
      await server.stop();
      await client.close();
    }
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
  });

  it('lists the ports the sandbox listens on with a command in it, and says so when a running command keeps it busy', async () => {
    const sandbox = await newSandbox();
    const host = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => host.once('listening', r));
    const hostPort = (host.address() as net.AddressInfo).port;
    const client = await gateway(sandbox.ref);
    try {
      // The simulator's Runtime Pod runs its sandboxes on this machine: the sandbox sees this listener.
      const listed = await service.list(sandbox.ref);
      assert.deepEqual(listed.ports.find((p) => p.port === hostPort), { port: hostPort, address: '127.0.0.1', family: 'ipv4' });
      assert.match(listed.note ?? '', /read from \/proc\/net\/tcp in sandbox/);
      const busy = await runInSandbox(client, ['sh', '-c', 'echo started; exec sleep 60'], 'started');
      try {
        const started = Date.now();
        await assert.rejects(service.list(sandbox.ref), (e: unknown) => e instanceof CompanionError && e.causeCode === 'sandbox_busy' && /one command at a time/.test(e.message));
        assert.ok(Date.now() - started < 15_000);
      } finally {
        await busy.stop();
      }
      // The cancelled listing left nothing queued: the next one runs.
      assert.ok((await service.list(sandbox.ref)).ports.some((p) => p.port === hostPort));
    } finally {
      host.close();
      await client.close();
    }
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
  });

  it('a user without `create` on pods/portforward in the namespace is refused in words (403)', async () => {
    const sim = target.simulator;
    assert.ok(sim);
    const sandbox = await newSandbox();
    // May do everything with Runs, read Pods and Services, and reach the Console — but not forward to a Runtime Pod.
    sim.identities.grant('pf-denied', { verbs: ['*'], resources: ['runs', 'runtimes', 'namespaces', 'pods', 'services'] });
    sim.identities.grant('pf-denied', { verbs: ['create'], resources: ['pods/portforward'], namespaces: ['kruntimes-system'] });
    const token = sim.identities.issueToken('pf-denied');
    const kubeconfig = JSON.parse(fs.readFileSync(target.kubeconfigPath, 'utf8')) as { users: unknown[]; contexts: unknown[] };
    kubeconfig.users.push({ name: 'pf-denied', user: { token } });
    kubeconfig.contexts.push({ name: 'pf-denied', context: { cluster: 'simulator', user: 'pf-denied', namespace: 'default' } });
    const file = path.join(target.dir, 'kubeconfig-pf-denied');
    fs.writeFileSync(file, JSON.stringify(kubeconfig), { mode: 0o600 });
    const env = { KUBECONFIG: file, HOME: target.dir };
    const limited = target.provider(env);
    const denied = serviceFor(limited);
    try {
      const ref = { ...sandbox.ref, context: 'pf-denied' };
      await assert.rejects(denied.forward(ref, 8000, undefined, () => undefined), (e: unknown) => {
        assert.ok(e instanceof SandboxError, String(e));
        assert.equal(e.code, 'cluster_forbidden');
        assert.match(e.message, /the user of context pf-denied may not port-forward to Pod default\/runtime-bash-0 \(the API server answered 403 Forbidden\)/);
        assert.match(e.message, /"create" on "pods\/portforward" in namespace default/);
        return true;
      });
      assert.deepEqual(denied.forwardsOf(), []);
    } finally {
      await denied.dispose();
    }
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
  });

  it('a forward ends when its sandbox ends: told once, local port closed; a sandbox that ended is refused', async () => {
    const sandbox = await newSandbox();
    const seen: PortEnded[] = [];
    const forward = await service.forward(sandbox.ref, await freePort(), undefined, (e) => seen.push(e));
    assert.equal(await accepts(forward.localPort), true);
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
    await until('the forward to end with its sandbox', () => seen.length > 0);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.forward.id, forward.id);
    assert.match(seen[0]?.reason ?? '', new RegExp(`sandbox ${sandbox.ref.name} ended \\(Cancelled\\)`));
    assert.equal(await accepts(forward.localPort), false, 'the local port is closed');
    assert.deepEqual(service.forwardsOf(sandbox.ref), []);
    await assert.rejects(service.forward(sandbox.ref, 8000, undefined, () => undefined), (e: unknown) => {
      assert.ok(e instanceof CompanionError);
      assert.equal(e.causeCode, 'sandbox_ended');
      assert.match(e.message, /has ended \(Cancelled\): nothing runs in it to forward a port to/);
      return true;
    });
  });

  it('when the client goes (dispose), every forward of it stops listening', async () => {
    const sandbox = await newSandbox();
    const own = serviceFor(provider);
    const a = await own.forward(sandbox.ref, await freePort(), undefined, () => undefined);
    const b = await own.forward(sandbox.ref, await freePort(), undefined, () => undefined);
    assert.equal(await accepts(a.localPort), true);
    await own.dispose();
    assert.equal(await accepts(a.localPort), false);
    assert.equal(await accepts(b.localPort), false);
    await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
  });
});
