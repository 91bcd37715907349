// `sandbox-sessions sandbox|kruntimes port-forward NAME [LOCAL:]PORT` as a person runs it: the
// BUILT CLI (built here into a temp folder) prints `Forwarding from 127.0.0.1:LOCAL -> PORT`, and
// a server started in the sandbox answers at that address — in a local sandbox (whose server
// listens on this machine already) and in the cluster SIMULATOR's kruntimes sandbox (through a
// pods/portforward). Ctrl+C (SIGINT) closes the forward and exits 0; the sandbox ending exits 1
// with the reason and closes the port; a sandbox that ended is refused in words, exit 1. An
// OpenSandbox sandbox (the OpenSandbox SIMULATOR behind the local gateway) is forwarded through its
// endpoint by a loopback proxy.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxRef } from '../../../protocol/sandboxes';
import type { KruntimesSandboxProvider } from '../../../server/sandboxes/kruntimes/kruntimesProvider';
import { type ClusterTarget, startClusterTarget } from '../../fixtures/cluster/target';
import { Sandbox } from '@alibaba-group/opensandbox';
import type { Run } from '../../../protocol/kruntimes/run';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { localBackends } from '../../../server/sandboxes/localBackends';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { writeConnectionFile } from '../../../server/sandboxes/opensandbox/connectionFile';
import { startOpenSandboxSimulator, type OpenSandboxSimulator } from '../../fixtures/opensandbox/simulator';
import { call, patchTermination, readyRun, runsPath, startTestGateway, type TestGateway, waitPhase } from '../gateway/harness';
import { until } from '../../fixtures/waits';
import { accepts, freePort } from '../../fixtures/loopback';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/** A running `sandbox-sessions …` process: its output so far and its exit. */
interface Cli {
  child: ChildProcessWithoutNullStreams;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

/** `python3 -m http.server PORT` running in the sandbox (a command of its session) until `stop()`. */
async function serveInSandbox(client: GatewayClient, port: number): Promise<{ stop(): Promise<void> }> {
  await client.writeFile('served-by-the-sandbox.txt', Buffer.from('hi'));
  const controller = new AbortController();
  let finished = false;
  let output = '';
  const done = (async () => {
    for await (const e of client.stream({ command: { argv: ['python3', '-m', 'http.server', String(port), '--bind', '127.0.0.1'] } }, { signal: controller.signal })) {
      if (e.type === 'output' && e.output.data) output += Buffer.from(e.output.data, 'base64').toString('utf8');
    }
  })()
    .catch(() => undefined)
    .finally(() => (finished = true));
  // Ready when it accepts connections (the sandbox shares this machine's network in both substrates here).
  await until(`the sandbox's server on port ${port}`, async () => finished || (await accepts(port)));
  if (finished) throw new Error(`python3 -m http.server ended: ${output}`);
  return {
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

describe('ports: the port-forward CLI (built)', function () {
  this.timeout(120_000);
  let outdir: string;
  const running: Cli[] = [];

  before(async function () {
    this.timeout(120_000);
    const esbuildConfig = (await import(path.join(REPO_ROOT, 'esbuild.mjs'))) as { buildAll(o: { outdir: string }): Promise<unknown> };
    outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-port-forward-cli-'));
    await esbuildConfig.buildAll({ outdir });
  });
  afterEach(() => {
    for (const c of running.splice(0)) if (c.child.exitCode === null) c.child.kill('SIGKILL');
  });
  after(() => fs.rmSync(outdir, { recursive: true, force: true }));

  function cli(argv: string[], env: NodeJS.ProcessEnv): Cli {
    const child = spawn(process.execPath, [path.join(outdir, 'server.js'), ...argv], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const c = { child, out: () => out, err: () => err, exited };
    running.push(c);
    return c;
  }

  /** The local port the CLI printed, once it printed kubectl's line for `port`. */
  async function forwardedFrom(c: Cli, port: number): Promise<number> {
    const line = new RegExp(`^Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${port}$`, 'm');
    await until('the Forwarding line', () => line.test(c.out()) || c.child.exitCode !== null);
    const m = line.exec(c.out());
    assert.ok(m, `no Forwarding line; stdout ${JSON.stringify(c.out())}, stderr ${JSON.stringify(c.err())}`);
    return Number(m[1]);
  }

  async function assertServes(localPort: number): Promise<void> {
    const res = await fetch(`http://127.0.0.1:${localPort}/`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /served-by-the-sandbox\.txt/);
  }

  describe('a local sandbox (`sandbox port-forward`)', () => {
    let t: TestGateway;
    let env: NodeJS.ProcessEnv;
    before(async () => {
      t = await startTestGateway({ writeStateFile: true });
      env = { ...process.env, SANDBOX_SESSIONS_STATE_DIR: t.stateDir };
    });
    after(async () => t?.cleanup());

    it('prints the address its server answers at, Ctrl+C ends it with 0, and once the sandbox ended it is refused in words', async () => {
      const { run } = await readyRun(t.gw, { runtime: 'process' });
      const name = run.metadata.name as string;
      const client = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url as string }, token: t.gw.token });
      const port = await freePort();
      const server = await serveInSandbox(client, port);
      try {
        const c = cli(['sandbox', 'port-forward', name, String(port), '--state-dir', t.stateDir], env);
        assert.equal(await forwardedFrom(c, port), port, 'a local sandbox is reached at its own port');
        await until('the message on stderr', () => /already listens on this machine/.test(c.err()) || c.child.exitCode !== null); // stderr and stdout arrive on separate pipes, in either order
        assert.match(c.err(), /already listens on this machine/);
        await assertServes(port);
        c.child.kill('SIGINT');
        assert.equal(await c.exited, 0, c.err());
        // A LOCAL other than PORT cannot be: the port is this machine's already.
        const moved = cli(['sandbox', 'port-forward', name, `${await freePort()}:${port}`, '--state-dir', t.stateDir], env);
        assert.equal(await moved.exited, 1);
        assert.match(moved.err(), /is already port \d+ of this machine/);
      } finally {
        await server.stop();
        await client.close();
      }
      await patchTermination(t.gw, run, 'Immediate');
      await waitPhase(t.gw, run, ['Cancelled']);
      const refused = cli(['sandbox', 'port-forward', name, String(port), '--state-dir', t.stateDir], env);
      assert.equal(await refused.exited, 1);
      assert.match(refused.err(), new RegExp(`^error: sandbox ${name} has ended \\(Cancelled\\): nothing runs in it to forward a port to$`, 'm'));
      assert.equal(refused.out(), '');
    });

    it('wrong arguments are said in words with exit 2, and --help prints the verb\'s usage', async () => {
      const bad = cli(['sandbox', 'port-forward', 'x', 'notaport:80', '--state-dir', t.stateDir], env);
      assert.equal(await bad.exited, 2);
      assert.match(bad.err(), /^error: LOCAL must be a port number from 1 to 65535, got "notaport"$/m);
      const help = cli(['sandbox', 'port-forward', '--help'], env);
      assert.equal(await help.exited, 0);
      assert.match(help.out(), /kubectl's order/);
      assert.match(help.out(), /^usage: sandbox-sessions sandbox port-forward NAME \[LOCAL:\]PORT$/m);
      assert.match(help.out(), /until Ctrl\+C/);
    });
  });

  describe('a kruntimes sandbox of the cluster simulator (`kruntimes port-forward`)', () => {
    let target: ClusterTarget;
    let provider: KruntimesSandboxProvider;
    let env: NodeJS.ProcessEnv;
    before(async () => {
      target = await startClusterTarget({ era: 'D' });
      provider = target.provider();
      env = { ...process.env, KUBECONFIG: target.kubeconfigPath, HOME: target.dir };
    });
    after(async () => target?.stop());

    async function gateway(ref: SandboxRef): Promise<GatewayClient> {
      const c = await provider.open(ref);
      return new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls });
    }

    it('prints the forwarded address its server answers at; Ctrl+C closes it with 0; the sandbox ending exits 1 with the reason', async () => {
      const sandbox = await provider.create(target.spec(), { waitForReady: true });
      const { name } = sandbox.ref;
      const client = await gateway(sandbox.ref);
      const port = await freePort();
      const server = await serveInSandbox(client, port);
      const where = ['--context', sandbox.ref.context, '--namespace', sandbox.ref.namespace];
      try {
        // `:PORT`, as with kubectl: a free local port (the simulator's Pods share this machine's
        // network, so PORT itself is taken here).
        const c = cli(['kruntimes', 'port-forward', name, `:${port}`, ...where], env);
        const local = await forwardedFrom(c, port);
        assert.notEqual(local, port);
        await until('the message on stderr', () => /through the API server of context simulator/.test(c.err()) || c.child.exitCode !== null); // stderr and stdout arrive on separate pipes, in either order
        assert.match(c.err(), /through the API server of context simulator/);
        await assertServes(local);
        assert.ok((target.simulator?.portForward.connections.get(`default/runtime-bash-0:${port}`) ?? 0) > 0, "carried by a pods/portforward of the Run's Pod");
        c.child.kill('SIGINT');
        assert.equal(await c.exited, 0, c.err());
        assert.equal(await accepts(local), false, 'the forwarded address stops answering');

        // LOCAL:PORT picks the local port; the sandbox ending ends the command.
        const wanted = await freePort();
        const held = cli(['kruntimes', 'port-forward', name, `${wanted}:${port}`, ...where], env);
        assert.equal(await forwardedFrom(held, port), wanted);
        await assertServes(wanted);
        await provider.terminate(sandbox.ref, 'Immediate', { wait: true });
        assert.equal(await held.exited, 1);
        assert.match(held.err(), new RegExp(`^error: sandbox ${name} ended \\(Cancelled\\); stopped forwarding 127\\.0\\.0\\.1:${wanted} -> ${port}$`, 'm'));
        assert.equal(await accepts(wanted), false, 'nothing listens once the command ended');
      } finally {
        await server.stop();
        await client.close();
      }
      const refused = cli(['kruntimes', 'port-forward', name, `:${port}`, ...where], env);
      assert.equal(await refused.exited, 1);
      assert.match(refused.err(), new RegExp(`^error \\(refused\\): sandbox ${name} has ended \\(Cancelled\\): nothing runs in it to forward a port to$`, 'm'));
    });
  });

  describe('an OpenSandbox sandbox of the local gateway (`sandbox port-forward`, OpenSandbox SIMULATOR)', () => {
    let sim: OpenSandboxSimulator;
    let t: { gw: RunningGateway; stateDir: string };
    let env: NodeJS.ProcessEnv;
    const apiKey = `canary-${Date.now().toString(36)}-not-for-the-cli`;
    before(async () => {
      sim = await startOpenSandboxSimulator({ apiKey, graceMs: 50 });
      const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-osb-cli-'));
      // The daemon reads its OpenSandbox connection from the state root, as when the editor configured it.
      await writeConnectionFile(stateDir, { domain: sim.url, apiKey });
      t = { stateDir, gw: await startGateway({ stateDir, tickMs: 50, writeStateFile: true, backends: localBackends(stateDir, {}) }) };
      env = { ...process.env, SANDBOX_SESSIONS_STATE_DIR: t.stateDir, OPEN_SANDBOX_API_KEY: '', OPEN_SANDBOX_DOMAIN: '' };
    });
    after(async () => {
      await t?.gw.close();
      await sim?.close();
      if (t) fs.rmSync(t.stateDir, { recursive: true, force: true });
    });

    it('forwards through its endpoint on a free local port; Ctrl+C closes it; the key is in nothing the CLI prints', async () => {
      const r = await call(t.gw, 'POST', runsPath(), {
        body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { generateName: 'osb-cli-' }, spec: { runtime: 'opensandbox', mode: { session: {} } } },
      });
      assert.equal(r.status, 201, r.text);
      const run = await waitPhase(t.gw, r.json() as Run, ['Ready', 'Failed'], 60_000);
      assert.equal(run.status?.phase, 'Ready', run.status?.message);
      const name = run.metadata.name as string;
      const client = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url as string }, token: t.gw.token });
      await client.writeFile('served-by-the-sandbox.txt', Buffer.from('hi'));
      await client.close();
      // The server runs in the sandbox's own network (a background command, as from its terminal): port 8000 is not this machine's.
      const [id] = sim.sandboxIds();
      const sbx = await Sandbox.connect({ sandboxId: id as string, connectionConfig: resolveConnection({ domain: sim.url, apiKey, env: {} }).config() });
      await sbx.commands.run('cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1', { background: true });
      await sbx.close();

      const c = cli(['sandbox', 'port-forward', name, ':8000', '--state-dir', t.stateDir], env);
      const local = await forwardedFrom(c, 8000);
      await until('the message on stderr', () => /by a proxy on this machine to its OpenSandbox endpoint/.test(c.err()) || c.child.exitCode !== null); // stderr and stdout arrive on separate pipes, in either order
      assert.match(c.err(), /by a proxy on this machine to its OpenSandbox endpoint/);
      // The server needs a moment to listen after its command started: the proxy answers 502 until then.
      await until('the sandbox server through the forward', async () => (await fetch(`http://127.0.0.1:${local}/`)).status === 200);
      await assertServes(local);
      c.child.kill('SIGINT');
      assert.equal(await c.exited, 0, c.err());
      assert.equal(await accepts(local), false, 'the forwarded address stops answering');
      assert.ok(!c.out().includes(apiKey) && !c.err().includes(apiKey), 'the API key is in nothing the CLI prints');
    });
  });
});
