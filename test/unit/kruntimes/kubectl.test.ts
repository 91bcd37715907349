// A person inspects the cluster SIMULATOR the way they inspect a cluster: a real kubectl (see
// test/fixtures/cluster/kubectl.ts for where it comes from) discovers the kruntimes API, creates
// a Run from a manifest (the server validates it: kubectl ≥ 1.25 sends fieldValidation=Strict),
// lists and watches Runs with the CRD's printer columns, merge-patches a termination request and
// gets the CEL 422 for a downgrade, asks `auth can-i`, deletes the Run, and reaches a Run's
// session through `kubectl port-forward` to the Console Pod (the SPDY-over-WebSocket tunnel of
// kubectl ≥ 1.31 and the SPDY/3.1 upgrade of older ones).
import assert from 'node:assert/strict';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { WebSocket } from 'ws';
import type { Run } from '../../../protocol/kruntimes/run';
import { findKubectl, Kubectl } from '../../fixtures/cluster/kubectl';
import { startClusterSimulator, type ClusterSimulator } from '../../fixtures/cluster/simulator';

const manifest = (name: string, extra = '') => `apiVersion: kruntimes.io/v1alpha1
kind: Run
metadata:
  name: ${name}
spec:
  runtime: bash
  mode:
    session: {}
${extra}`;

/** Resolves once the process's stdout matches, or rejects with what it printed. */
function until(proc: ChildProcessWithoutNullStreams, out: { text: string }, pattern: RegExp, ms = 20_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!pattern.test(out.text)) return;
      clearTimeout(timer);
      proc.stdout.off('data', check);
      resolve();
    };
    const timer = setTimeout(() => {
      proc.stdout.off('data', check);
      reject(new Error(`kubectl printed no ${pattern} within ${ms} ms:\n${out.text}`));
    }, ms);
    proc.stdout.on('data', check);
    check();
  });
}

describe('kubectl against the cluster simulator', function () {
  this.timeout(120_000);
  let sim: ClusterSimulator;
  let dir: string;
  let kubectl: Kubectl;
  let minor = 0;

  before(async () => {
    const binary = findKubectl();
    assert.ok(binary, 'no kubectl: run scripts/install-test-deps.sh (it unpacks Debian’s kubernetes-client into .test-tmp/kubectl) or set KUBECTL');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-kubectl-'));
    sim = await startClusterSimulator({ dir, runtimes: [{ namespace: 'default', name: 'bash' }] });
    fs.mkdirSync(path.join(dir, 'home'));
    kubectl = new Kubectl(binary, sim.kubeconfigPath, path.join(dir, 'home'));
    minor = await kubectl.clientMinor();
  });
  after(async () => {
    await sim?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('api-resources lists runs (short name rn) from discovery; get runs -A shows the CRD printer columns', async () => {
    const resources = await kubectl.run(['api-resources', '--api-group=kruntimes.io']);
    assert.equal(resources.code, 0, resources.stderr);
    assert.match(resources.stdout, /^runs\s+rn\s+kruntimes\.io\/v1alpha1\s+true\s+Run$/m);
    assert.match(resources.stdout, /^runtimes\s+kruntimes\.io\/v1alpha1\s+true\s+Runtime$/m);
    const none = await kubectl.run(['get', 'runs', '-A']);
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stderr, /No resources found/);
  });

  it('create -f, get -w (a bounded watch), patch (merge; a downgrade is the CEL 422), delete', async () => {
    const file = path.join(dir, 'run.yaml');
    fs.writeFileSync(file, manifest('from-kubectl'));
    const validate = minor >= 25 ? [] : ['--validate=false']; // kubectl < 1.25 validates client-side from protobuf OpenAPI v2, which the simulator does not serve
    const created = await kubectl.run(['create', '-f', file, ...validate]);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.stdout.trim(), 'run.kruntimes.io/from-kubectl created');

    const out = { text: '' };
    const watch = kubectl.spawn(['get', 'runs', '-A', '-w']);
    watch.stdout.on('data', (c: Buffer) => (out.text += c.toString()));
    try {
      await until(watch, out, /^NAMESPACE\s+NAME\s+PHASE\s+ASSIGNED POD\s+RUNTIME\s+AGE$/m);
      await until(watch, out, /^default\s+from-kubectl\s+Ready\s+runtime-bash-0\s+bash\s+\d+s$/m);
      const patched = await kubectl.run(['patch', 'run', 'from-kubectl', '--type', 'merge', '-p', '{"spec":{"termination":{"mode":"Immediate"}}}']);
      assert.equal(patched.code, 0, patched.stderr);
      assert.equal(patched.stdout.trim(), 'run.kruntimes.io/from-kubectl patched');
      await until(watch, out, /^default\s+from-kubectl\s+Cancelled\s+runtime-bash-0\s+bash\s+\d+s$/m);
    } finally {
      watch.kill();
    }

    const downgrade = await kubectl.run(['patch', 'run', 'from-kubectl', '--type', 'merge', '-p', '{"spec":{"termination":{"mode":"Drain"}}}']);
    assert.equal(downgrade.code, 1);
    assert.match(downgrade.stderr, /The Run "from-kubectl" is invalid: spec: Invalid value: "object": termination may not be removed, downgraded, or changed except from Drain to Immediate/);

    const yaml = await kubectl.run(['get', 'run', 'from-kubectl', '-o', 'jsonpath={.status.phase} {.spec.termination.mode}']);
    assert.equal(yaml.stdout, 'Cancelled Immediate');

    const deleted = await kubectl.run(['delete', 'run', 'from-kubectl']);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(deleted.stdout.trim(), 'run.kruntimes.io "from-kubectl" deleted');
    const gone = await kubectl.run(['get', 'run', 'from-kubectl']);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /runs\.kruntimes\.io "from-kubectl" not found/);
  });

  it('create -f with a field the CRD does not have: refused under strict validation, else created pruned with a Warning', async () => {
    const file = path.join(dir, 'unknown.yaml');
    fs.writeFileSync(file, manifest('unknown-field', '  colour: blue\n'));
    if (minor >= 25) {
      // kubectl ≥ 1.25 asks the server to validate strictly (it found fieldValidation in /openapi/v3).
      const refused = await kubectl.run(['create', '-f', file]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /strict decoding error: unknown field "spec\.colour"/);
    }
    const warned = await kubectl.run(['create', '-f', file, minor >= 25 ? '--validate=warn' : '--validate=false']);
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(warned.stderr, /Warning: unknown field "spec\.colour"/);
    const stored = await kubectl.run(['get', 'run', 'unknown-field', '-o', 'jsonpath={.spec}']);
    assert.deepEqual(JSON.parse(stored.stdout), { mode: { session: {} }, runtime: 'bash' }, 'pruned');
    assert.equal((await kubectl.run(['delete', 'run', 'unknown-field'])).code, 0);
  });

  it('auth can-i answers from the simulator’s RBAC: the admin may create runs, the viewer may list but not delete them', async () => {
    const admin = await kubectl.run(['auth', 'can-i', 'create', 'runs']);
    assert.equal(admin.stdout.trim(), 'yes', admin.stderr);
    const viewerList = await kubectl.run(['auth', 'can-i', 'list', 'runs.kruntimes.io', '--context', 'simulator-viewer']);
    assert.equal(viewerList.stdout.trim(), 'yes', viewerList.stderr);
    const viewerDelete = await kubectl.run(['auth', 'can-i', 'delete', 'runs.kruntimes.io', '--context', 'simulator-viewer']);
    assert.equal(viewerDelete.stdout.trim(), 'no');
    assert.equal(viewerDelete.code, 1);
  });

  for (const [runName, name, env] of [
    ['pf-default', 'kubectl’s default: SPDY over WebSocket from 1.31, else the SPDY/3.1 upgrade', {}],
    ['pf-spdy', 'the SPDY/3.1 upgrade (KUBECTL_PORT_FORWARD_WEBSOCKETS=false)', { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' }],
  ] as const) {
    it(`port-forward to the Console Pod, ${name}: a Run's session answers through it, two connections on one forward`, async () => {
      const flavour = minor >= 31 && !('KUBECTL_PORT_FORWARD_WEBSOCKETS' in env) ? 'spdy-tunnel' : 'spdy';
      const file = path.join(dir, `${runName}.yaml`);
      fs.writeFileSync(file, manifest(runName));
      assert.equal((await kubectl.run(['create', '-f', file, ...(minor >= 25 ? [] : ['--validate=false'])])).code, 0);
      const deadline = Date.now() + 20_000;
      let run: Run | undefined;
      while ((run = sim.store.get('runs', 'default', runName) as Run | undefined)?.status?.phase !== 'Ready') {
        assert.ok(Date.now() < deadline, `the Run is ${run?.status?.phase}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      const P = new URL(run?.status?.endpoint?.url ?? '').pathname;
      const before = sim.portForward.connections.get('kruntimes-system/kruntimes-console-0:8443') ?? 0;
      const served = sim.portForward.flavours.get(flavour) ?? 0;

      const out = { text: '' };
      const forward = kubectl.spawn(['port-forward', '-n', 'kruntimes-system', 'pod/kruntimes-console-0', ':8443'], env);
      forward.stdout.on('data', (c: Buffer) => (out.text += c.toString()));
      let stderr = '';
      forward.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const agent = new Agent({ connect: { ca: sim.caPem, servername: sim.console.servername } });
      try {
        await until(forward, out, /^Forwarding from 127\.0\.0\.1:(\d+) -> 8443$/m);
        const port = /^Forwarding from 127\.0\.0\.1:(\d+)/m.exec(out.text)?.[1];
        const base = `https://127.0.0.1:${port}`;
        const auth = { authorization: `Bearer ${sim.tokens.admin}` };
        const status = await request(`${base}${P}`, { headers: auth, dispatcher: agent });
        assert.equal(status.statusCode, 200, stderr);
        assert.match(await status.body.text(), /^\{"state":"SESSION_STATE_READY"/);
        // A second connection (its own SPDY stream pair): a command over operations:ws.
        const tls = { ca: sim.caPem, servername: sim.console.servername }; // ws hands servername on to tls.connect (its types omit it)
        const ws = new WebSocket(`wss://127.0.0.1:${port}${P}/operations:ws`, { headers: auth, ...tls });
        const frames: string[] = [];
        await new Promise<void>((resolve, reject) => {
          ws.on('open', () => ws.send(JSON.stringify({ type: 'send', idempotencyKey: 'through-kubectl', operation: { command: { argv: ['echo', 'forwarded'] } } })));
          ws.on('message', (data) => {
            frames.push((data as Buffer).toString('utf8'));
            if (frames.length === 3) resolve();
          });
          ws.on('error', reject);
        });
        ws.close(1000);
        assert.deepEqual(frames, [
          '{"sequence":1,"type":"accepted","accepted":{"operationID":"through-kubectl"}}',
          `{"sequence":2,"type":"output","output":{"stream":"stdout","data":"${Buffer.from('forwarded\n').toString('base64')}"}}`,
          '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}',
        ]);
        assert.equal(sim.portForward.flavours.get(flavour), served + 1, `kubectl used ${flavour}`);
        assert.ok((sim.portForward.connections.get('kruntimes-system/kruntimes-console-0:8443') ?? 0) >= before + 2, 'both connections went through the forward');
        assert.doesNotMatch(stderr, /error|lost connection/i);
      } finally {
        forward.kill();
        await agent.close();
      }
    });
  }
});
