// The companion server over real stdio: the handshake, and that bad input — unknown methods,
// invalid params, malformed JSON, huge or unframed garbage — is answered or skipped while the
// server stays up for the next valid request; and that the secrets it handles (a kubeconfig
// bearer token, accepted and refused, and an OpenSandbox API key) never reach its log.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { companionMethods, DEFAULT_CLIENT_NAME, JsonRpcErrorNumber } from '../../../protocol/companion';
import type { SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { connectionFilePath } from '../../../server/sandboxes/opensandbox/connectionFile';
import { type ClusterSimulator, startClusterSimulator } from '../../fixtures/cluster/simulator';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';

const frame = (body: string | Buffer) => {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([Buffer.from(`Content-Length: ${bytes.length}\r\n\r\n`), bytes]);
};

describe('companion server: JSON-RPC over stdio', function () {
  this.timeout(30_000);
  let server: CompanionProcess;

  const initialize = () =>
    server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 }) as Promise<{ methods: string[]; protocolVersion: number }>;

  before(async () => {
    server = spawnCompanion();
    await initialize();
  });
  after(async () => {
    const code = await server.stop();
    assert.equal(code, 0, `server exited with ${code}; log:\n${server.stderr()}`);
  });

  it('answers initialize with its versions and method table', async () => {
    const result = await initialize();
    assert.equal(result.protocolVersion, 1);
    assert.deepEqual(result.methods.sort(), Object.keys(companionMethods).sort());
  });

  it('answers an unknown method with MethodNotFound', async () => {
    await assert.rejects(server.connection.sendRequest('sandboxes/explode', {}), (e: unknown) => {
      assert.ok(e instanceof ResponseError);
      assert.equal(e.code, JsonRpcErrorNumber.MethodNotFound);
      assert.deepEqual(e.data, { code: 'not_found' });
      return true;
    });
  });

  it('answers invalid params with the zod issue paths', async () => {
    await assert.rejects(server.connection.sendRequest('initialize', { clientName: '', protocolVersion: 2 }), (e: unknown) => {
      assert.ok(e instanceof ResponseError);
      assert.equal(e.code, JsonRpcErrorNumber.InvalidParams);
      const data = e.data as { code: string; issues: { path: string }[] };
      assert.equal(data.code, 'invalid_params');
      assert.deepEqual(data.issues.map((i) => i.path).sort(), ['clientName', 'protocolVersion']);
      return true;
    });
    await initialize();
  });

  it('replies ParseError to a malformed JSON frame and stays up', async () => {
    server.writeRaw(frame('{"jsonrpc":"2.0","id":99,"method":'));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stdout(), /"id":null,"error":\{"code":-32700,"message":"message body is not valid UTF-8 JSON"\}/);
  });

  it('skips a 10 MB garbage frame without buffering it, and stays up', async () => {
    const garbage = Buffer.alloc(10 * 1024 * 1024, 0x7a);
    server.writeRaw(frame(garbage));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stdout(), /"id":null,"error":\{"code":-32700,"message":"message of 10485760 bytes exceeds the \d+-byte limit"\}/);
  });

  it('resynchronises after unframed garbage and answers the next request', async () => {
    server.writeRaw(Buffer.concat([Buffer.from('GET / HTTP/1.1\r\n\r\n'), Buffer.alloc(20_000, 0x41)]));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stderr(), /not a Content-Length frame/);
  });

});

describe('companion server: LSP lifecycle (as vscode-languageclient drives it)', function () {
  this.timeout(30_000);
  it('accepts LSP InitializeParams without clientInfo (optional in LSP) and logs the client as unknown', async () => {
    const server = spawnCompanion();
    try {
      // Exactly what a minimal LSP client sends: no clientInfo, no clientName of ours.
      const result = (await server.connection.sendRequest('initialize', {
        processId: process.pid,
        rootUri: null,
        capabilities: {},
      })) as { protocolVersion: number; serverInfo: { name: string }; methods: string[] };
      assert.equal(result.protocolVersion, 1);
      assert.equal(result.serverInfo.name, 'sandbox-sessions');
      assert.ok(result.methods.includes('sandboxes/list'));
      const connected = server
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"client connected"'))
        .map((l) => JSON.parse(l) as { client: { name: string } });
      assert.deepEqual(connected.map((l) => l.client.name), [DEFAULT_CLIENT_NAME]);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });

  it('accepts LSP initialize params, then shutdown and exit end the process with 0', async () => {
    const server = spawnCompanion();
    const exited = new Promise<number | null>((resolve) => server.child.on('exit', (c) => resolve(c)));
    try {
      const result = (await server.connection.sendRequest('initialize', {
        processId: process.pid,
        clientInfo: { name: 'Visual Studio Code', version: '1.139.0' },
        rootUri: null,
        capabilities: {},
      })) as { capabilities: object; serverInfo: { name: string } };
      assert.deepEqual(result.capabilities, {});
      assert.equal(result.serverInfo.name, 'sandbox-sessions');
      await server.connection.sendNotification('initialized', {});
      assert.equal(await server.connection.sendRequest('shutdown'), null);
      await server.connection.sendNotification('exit');
      assert.equal(await exited, 0);
    } finally {
      await server.stop();
    }
  });
});

/** Every form a secret could take in a JSON-lines log: as is, JSON-escaped (once, or twice when a logged message holds JSON), base64, base64url, URL-encoded, and its random core alone. */
function leakForms(secret: string, core: string): Record<string, string> {
  return {
    plain: secret,
    'JSON-escaped': JSON.stringify(secret).slice(1, -1),
    'JSON-escaped twice': JSON.stringify(JSON.stringify(secret)).slice(1, -1),
    base64: Buffer.from(secret).toString('base64'),
    base64url: Buffer.from(secret).toString('base64url'),
    'URL-encoded': encodeURIComponent(secret),
    'random core': core,
  };
}

/** A secret whose base64, URL and JSON forms all differ from it (quote, backslash, `+/=%`), around a random core. */
function secretWith(prefix: string): { secret: string; core: string } {
  const core = randomBytes(18).toString('hex');
  return { secret: `${prefix}"q\\${core}+/=%2F`, core };
}

describe('companion server: secrets it handles', function () {
  this.timeout(120_000);
  let dir: string;
  let sim: ClusterSimulator;
  let server: CompanionProcess;
  let stateDir: string;
  const accepted = secretWith('kube-ok');
  const refused = secretWith('kube-no');
  const apiKey = secretWith('osb-key');

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-secrets-'));
    sim = await startClusterSimulator({ dir: path.join(dir, 'cluster') });
    // The cluster accepts exactly this token for its admin; `refused` is unknown to it (a 401).
    sim.identities.issueToken('simulator-admin', { value: accepted.secret });
    const cluster = JSON.parse(fs.readFileSync(sim.kubeconfigPath, 'utf8')) as { clusters: unknown[] };
    const kubeconfig = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: cluster.clusters,
      users: [
        { name: 'accepted', user: { token: accepted.secret } },
        { name: 'refused', user: { token: refused.secret } },
      ],
      contexts: [
        { name: 'leak-check', context: { cluster: 'simulator', user: 'accepted', namespace: 'default' } },
        { name: 'leak-check-refused', context: { cluster: 'simulator', user: 'refused', namespace: 'default' } },
      ],
      'current-context': 'leak-check',
    };
    const kubeconfigPath = path.join(dir, 'kubeconfig');
    fs.writeFileSync(kubeconfigPath, JSON.stringify(kubeconfig), { mode: 0o600 });
    stateDir = path.join(dir, 'state');
    server = spawnCompanion({ KUBECONFIG: kubeconfigPath, SANDBOX_SESSIONS_STATE_DIR: stateDir, SANDBOX_SESSIONS_REPOSITORY: path.join(dir, 'repository') });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
  });
  after(async () => {
    const code = await server?.stop();
    await stopGateway({ stateDir }).catch(() => undefined);
    await sim?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, `server exited with ${code}`);
  });

  /** The server's own log lines that say it finished (or refused) `method`. */
  const finished = (method: string) =>
    server
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; method?: string })
      .filter((l) => (l.msg === 'request done' || l.msg === 'request refused') && l.method === method).length;

  /** Resolves once the log holds `count` finished lines for `method` (stderr may trail the stdout reply). */
  async function logged(method: string, count: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (finished(method) < count) {
      if (Date.now() > deadline) assert.fail(`the log never recorded ${count} × ${method}; log:\n${server.stderr()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('never writes a token or API key into its log, in plain or encoded forms, after they passed through it', async () => {
    const listedBefore = sim.apiServer.requests.get('list runs') ?? 0;
    // 1. The accepted bearer token: a list, a create (POST), an open (the Console's TokenReview)
    //    and a terminate, each presenting it to the simulated cluster.
    const listed = (await server.connection.sendRequest('sandboxes/list', { provider: 'kruntimes', context: 'leak-check', namespace: 'default' })) as { sandboxes: SandboxSummary[] };
    assert.deepEqual(listed.sandboxes, []);
    assert.ok((sim.apiServer.requests.get('list runs') ?? 0) > listedBefore, 'the list reached the cluster');
    const { sandbox } = (await server.connection.sendRequest('sandboxes/create', {
      spec: { provider: 'kruntimes', context: 'leak-check', namespace: 'default', runtime: 'bash', name: 'leak-check' },
    })) as { sandbox: SandboxSummary };
    assert.equal(sandbox.phase, 'Ready');
    const opened = (await server.connection.sendRequest('sandboxes/open', { ref: sandbox.ref })) as SandboxConnection;
    assert.equal(opened.token, accepted.secret, 'the connection carries the kubeconfig token the Console accepted');
    await server.connection.sendRequest('sandboxes/terminate', { ref: sandbox.ref, mode: 'Immediate', wait: true });
    // 2. The refused token: the cluster answers 401 and the server reports why.
    await assert.rejects(server.connection.sendRequest('sandboxes/list', { provider: 'kruntimes', context: 'leak-check-refused', namespace: 'default' }), (e: unknown) => {
      assert.ok(e instanceof ResponseError);
      assert.match(JSON.stringify(e.data), /unauthori[sz]ed|unauthenticated/i);
      return true;
    });
    // 3. The OpenSandbox API key, written to the daemon's 0600 connection file.
    const configured = (await server.connection.sendRequest('opensandbox/configure', { domain: '127.0.0.1:9', apiKey: apiKey.secret })) as { configured: boolean };
    assert.equal(configured.configured, true);
    assert.equal((JSON.parse(fs.readFileSync(connectionFilePath(stateDir), 'utf8')) as { apiKey: string }).apiKey, apiKey.secret);

    for (const [method, count] of [['sandboxes/list', 2], ['sandboxes/create', 1], ['sandboxes/open', 1], ['sandboxes/terminate', 1], ['opensandbox/configure', 1]] as const) {
      await logged(method, count);
    }
    const log = server.stderr();
    for (const [what, s] of [['accepted kubeconfig token', accepted], ['refused kubeconfig token', refused], ['OpenSandbox API key', apiKey]] as const) {
      for (const [form, text] of Object.entries(leakForms(s.secret, s.core))) {
        assert.ok(!log.includes(text), `the ${what} is in the log (${form}):\n${log}`);
      }
    }
    assert.doesNotMatch(log, /Bearer [A-Za-z0-9]/);
  });
});
