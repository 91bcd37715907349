// The companion server's sandbox methods over real stdio, on the real local runtime: create
// (with ordered progress), open, run a command through the data plane, Drain with artifact
// export, verified download, Immediate, and the main errors with their stable codes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { ProviderInfo, SandboxChanged, SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import type { ProgressValue } from '../../../protocol/companion';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { type CompanionProcess, rejectsWithCode, spawnCompanion } from '../../fixtures/companionProcess';

describe('companion server: sandboxes on the local runtime', function () {
  this.timeout(60_000);
  let work: string;
  let server: CompanionProcess;
  const changes: SandboxChanged[] = [];
  const progress: { token: string | number; value: ProgressValue }[] = [];
  let sandbox: SandboxSummary;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-sandboxes-'));
    server = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    server.connection.onNotification('sandboxes/changed', (p: SandboxChanged) => {
      changes.push(p);
    });
    server.connection.onNotification('$/progress', (p: { token: string | number; value: ProgressValue }) => {
      progress.push(p);
    });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
  });

  after(async () => {
    await server.stop();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const request = <T>(method: string, params: unknown) => server.connection.sendRequest(method, params) as Promise<T>;

  it('lists the local provider with the process backend available', async () => {
    const { providers } = await request<{ providers: ProviderInfo[] }>('providers/list', {});
    const local = providers.find((p) => p.kind === 'local');
    assert.ok(local?.available);
    assert.ok(local.runtimes.some((r) => r.name === 'process' && r.available));
  });

  it('creates a sandbox, reporting progress in order and ending at 100%', async () => {
    ({ sandbox } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default', idleTimeoutSeconds: 600 },
      progressToken: 'create-1',
    }));
    assert.equal(sandbox.phase, 'Ready');
    assert.equal(sandbox.idleTimeoutSeconds, 600);
    const mine = progress.filter((p) => p.token === 'create-1').map((p) => p.value);
    assert.ok(mine.length >= 2, JSON.stringify(mine));
    assert.deepEqual(mine.at(-1), { phase: 'done', percent: 100 });
    assert.deepEqual(
      mine.slice(0, -1).map((v) => v.phase),
      ['creating', 'starting'],
    );
  });

  it('opens it for the data plane and runs a command through the gateway', async () => {
    const connection = await request<SandboxConnection>('sandboxes/open', { ref: sandbox.ref });
    assert.match(connection.endpoint.url, new RegExp(`/sessions/${sandbox.uid}$`));
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    try {
      const out = await client.runCommand({ argv: ['sh', '-c', 'printf hi; printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"'] });
      assert.equal(out.stdout.toString(), 'hi');
      assert.equal(out.exitCode, 0);
    } finally {
      await client.close();
    }
  });

  it('closes it with Drain, exports the artifact and downloads it verified', async () => {
    const { sandbox: closed } = await request<{ sandbox: SandboxSummary }>('sandboxes/terminate', { ref: sandbox.ref, mode: 'Drain' });
    assert.equal(closed.phase, 'Succeeded');
    assert.deepEqual(closed.artifacts?.map((a) => a.name), ['report.txt']);
    const destination = path.join(work, 'downloads');
    const { artifacts } = await request<{ artifacts: { name: string; path: string; digest: string }[] }>('sandboxes/artifacts/download', {
      ref: sandbox.ref,
      destination,
    });
    assert.equal(artifacts.length, 1);
    assert.equal(fs.readFileSync(path.join(destination, 'report.txt'), 'utf8'), 'report');
    assert.equal(artifacts[0]!.digest, closed.artifacts![0]!.digest);
    // The notification comes from the provider's watch, independently of the request's answer: wait for it.
    const deadline = Date.now() + 15_000;
    while (!changes.some((c) => c.sandbox.key === sandbox.key && c.sandbox.phase === 'Succeeded')) {
      assert.ok(Date.now() < deadline, 'a sandboxes/changed for Succeeded within 15 s');
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  it('refuses to open a finished sandbox, with the SDK wording', async () => {
    await rejectsWithCode(request('sandboxes/open', { ref: sandbox.ref }), 'not_ready', { message: /Session Run is not ready/ });
  });

  it('answers not_found for an unknown sandbox and invalid_params for a bad reference', async () => {
    await rejectsWithCode(request('sandboxes/get', { ref: { ...sandbox.ref, name: 'no-such-sandbox' } }), 'not_found');
    await rejectsWithCode(request('sandboxes/get', { ref: { ...sandbox.ref, name: '../etc' } }), 'invalid_params');
    await rejectsWithCode(request('sandboxes/grantAgents', { ref: { ...sandbox.ref, name: 'no-such-sandbox' }, granted: true }), 'not_found');
  });

  it('refuses a create whose labels Kubernetes would refuse, naming the label', async () => {
    await rejectsWithCode(
      request('sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default', labels: { 'a/b/c': 'x' } }, waitForReady: false }),
      'invalid_params',
      { message: /metadata\.labels: Invalid value: "a\/b\/c"/ },
    );
  });

  it('cancels with Immediate and refuses the downgrade to Drain', async () => {
    const { sandbox: second } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default' },
    });
    const { sandbox: cancelled } = await request<{ sandbox: SandboxSummary }>('sandboxes/terminate', { ref: second.ref, mode: 'Immediate' });
    assert.equal(cancelled.phase, 'Cancelled');
    await rejectsWithCode(
      request('sandboxes/terminate', { ref: second.ref, mode: 'Drain' }),
      'not_ready',
      { message: /termination may not be removed, downgraded, or changed except from Drain to Immediate/ },
    );
    await request('sandboxes/delete', { ref: second.ref });
    await rejectsWithCode(request('sandboxes/get', { ref: second.ref }), 'not_found');
  });

  it('holds an opened sandbox past its lease and lets it expire once released', async () => {
    const { sandbox: leased } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default', leaseTimeoutSeconds: 2 },
    });
    assert.deepEqual(await request('sandboxes/release', { ref: leased.ref }), { released: false }, 'nothing is held before open');
    const opened = await request<SandboxConnection>('sandboxes/open', { ref: leased.ref });
    assert.deepEqual(opened.lease, { timeoutSeconds: 2 }, 'open says the server now holds the lease');
    await new Promise((r) => setTimeout(r, 4000)); // twice the lease: only the heartbeats keep it
    const held = await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: leased.ref });
    assert.equal(held.sandbox.phase, 'Ready');

    assert.deepEqual(await request('sandboxes/release', { ref: leased.ref }), { released: true });
    assert.deepEqual(await request('sandboxes/release', { ref: leased.ref }), { released: false }, 'a second release finds nothing');
    const deadline = Date.now() + 15_000;
    let after = held.sandbox;
    while (after.phase === 'Ready' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      ({ sandbox: after } = await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: leased.ref }));
    }
    assert.equal(after.phase, 'Timeout');
    assert.equal(after.message, 'session lease expired');
    await request('sandboxes/delete', { ref: leased.ref });
  });
});

describe('companion server: the local gateway restarts underneath it', function () {
  this.timeout(60_000);
  it('finds (or starts) the daemon again and keeps serving the same sandboxes', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-restart-'));
    const stateDir = path.join(work, 'state');
    const server = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: stateDir });
    try {
      await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
      const { sandbox } = (await server.connection.sendRequest('sandboxes/create', {
        spec: { provider: 'local', runtime: 'process', namespace: 'default' },
      })) as { sandbox: SandboxSummary };
      const before = JSON.parse(fs.readFileSync(path.join(stateDir, 'gateway.json'), 'utf8')) as { pid: number; token: string };
      process.kill(before.pid, 'SIGKILL');
      const { sandboxes } = (await server.connection.sendRequest('sandboxes/list', { provider: 'local' })) as { sandboxes: SandboxSummary[] };
      assert.deepEqual(
        sandboxes.map((s) => [s.key, s.phase]),
        [[sandbox.key, 'Ready']],
      );
      const after = JSON.parse(fs.readFileSync(path.join(stateDir, 'gateway.json'), 'utf8')) as { pid: number; token: string };
      assert.notEqual(after.pid, before.pid, 'a new daemon');
      const connection = (await server.connection.sendRequest('sandboxes/open', { ref: sandbox.ref })) as SandboxConnection;
      assert.equal(connection.token, after.token, 'the new token');
      const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
      try {
        assert.equal((await client.runCommand({ argv: ['echo', 'back'] })).stdout.toString(), 'back\n');
      } finally {
        await client.close();
      }
    } finally {
      await server.stop();
      await stopGateway({ stateDir });
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});
