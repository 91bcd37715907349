// OpenSandbox's Credential Vault (spec §4, checked against upstream's egress sidecar): first its golden behaviours
// through the official SDK (write-only values, revisions and expectedRevision, 409/400/404/412, the TLS-or-loopback
// rule), then the product's flow — a credential binding in the create spec, its secret handed over in memory, the
// sandbox created with the credential proxy and the binding host allowed, the vault filled — and that the secret
// is never written to the gateway daemon's state root or log, nor into the sandbox's environment.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Sandbox, SandboxApiException, type CredentialVaultCreateRequest } from '@alibaba-group/opensandbox';
import type { OpenSandboxCredentialBinding } from '../../../protocol/opensandboxCredentials';
import type { SandboxRef } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { gatewayCommand, quietLogger } from '../../fixtures/activation/harness';
import { startOpenSandboxSimulator, type OpenSandboxSimulator } from '../../fixtures/opensandbox/simulator';
import { connection, needsSimulator, SIM_TAG, startTarget, type Target } from './target';

const HOST = 'api.example.com';

function vaultBody(value: string): CredentialVaultCreateRequest {
  return {
    credentials: [{ name: 'gh', source: { type: 'inline', value } }],
    bindings: [{ name: 'github', match: { hosts: [HOST] }, auth: { type: 'apiKey', name: 'x-api-key', credential: 'gh' } }],
  };
}

async function status(p: Promise<unknown>): Promise<{ status: number | undefined; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SandboxApiException) return { status: err.statusCode, message: err.message };
    throw err;
  }
  assert.fail('expected the call to fail');
}

describe('OpenSandbox Credential Vault (golden, through the SDK)', function () {
  this.timeout(60_000);
  let target: Target;
  const open: Sandbox[] = [];
  const sandbox = async (opts: { credentialProxy?: boolean; allow?: string[]; useServerProxy?: boolean } = {}) => {
    const sbx = await Sandbox.create({
      connectionConfig: connection(target, opts.useServerProxy ? { useServerProxy: true } : {}),
      image: target.image,
      timeoutSeconds: 600,
      networkPolicy: { defaultAction: 'deny', egress: (opts.allow ?? [HOST]).map((t) => ({ action: 'allow' as const, target: t })) },
      ...(opts.credentialProxy === false ? {} : { credentialProxy: { enabled: true } }),
    });
    open.push(sbx);
    return sbx;
  };

  before(async () => {
    target = await startTarget({ graceMs: 50 });
  });
  afterEach(async () => {
    for (const s of open.splice(0)) await s.kill().catch(() => undefined);
  });
  after(async () => {
    await target.simulator?.close();
  });

  it('values are write-only: create answers 201 state without them, GET and the subresources never show them; revisions count', async () => {
    const secret = `vault-canary-${randomBytes(8).toString('hex')}`;
    const sbx = await sandbox();
    const created = await sbx.credentialVault.create(vaultBody(secret));
    assert.deepEqual(created, {
      revision: 1,
      credentials: [{ name: 'gh', sourceType: 'inline', revision: 1 }],
      bindings: [{ name: 'github', revision: 1, match: { hosts: [HOST], schemes: ['https'], methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], paths: ['/*'] }, auth: { type: 'apiKey', name: 'X-Api-Key' } }],
    });
    const seen = JSON.stringify([await sbx.credentialVault.get(), await sbx.credentialVault.listCredentials(), await sbx.credentialVault.getCredential('gh'), await sbx.credentialVault.listBindings(), await sbx.credentialVault.getBinding('github')]);
    assert.ok(!seen.includes(secret), 'no read answers a value');
    // The SDK drops unknown fields, so the wire itself is checked too: the sidecar's raw answers hold no value.
    const ep = await sbx.getEndpoint(18080);
    for (const sub of ['', '/credentials', '/credentials/gh', '/bindings', '/bindings/github']) {
      const raw = await fetch(`http://${ep.endpoint}/credential-vault${sub}`, { headers: ep.headers ?? {} });
      const text = await raw.text();
      assert.equal(raw.status, 200, text);
      assert.ok(!text.includes(secret), `GET /credential-vault${sub} answers no value`);
    }
    // Replacing the credential: a new revision for the vault and that credential.
    const patched = await sbx.credentialVault.patch({ expectedRevision: 1, credentials: { replace: [{ name: 'gh', source: { type: 'inline', value: `${secret}-2` } }] } });
    assert.equal(patched.revision, 2);
    assert.deepEqual(patched.credentials, [{ name: 'gh', sourceType: 'inline', revision: 2 }]);
    // A stale expectedRevision is a conflict (upstream WriteError: 409), and changes nothing.
    const stale = await status(sbx.credentialVault.patch({ expectedRevision: 1, bindings: { delete: ['github'] } }));
    assert.equal(stale.status, 409, stale.message);
    assert.match(stale.message, /expectedRevision 1 does not match current revision 2/);
    assert.equal((await sbx.credentialVault.get()).revision, 2);
    // A second create is a conflict; unknown names are 404; deleting it makes GET 404.
    assert.equal((await status(sbx.credentialVault.create(vaultBody('x')))).status, 409);
    assert.equal((await status(sbx.credentialVault.getBinding('nope'))).status, 404);
    await sbx.credentialVault.delete();
    assert.equal((await status(sbx.credentialVault.get())).status, 404);
  });

  it('a binding host the egress policy does not explicitly allow, or an unknown credential, is 400; the policy cannot then drop a bound host', async () => {
    const sbx = await sandbox({ allow: ['other.example.com', HOST] });
    const notAllowed = await status(sbx.credentialVault.create({ ...vaultBody('v'), bindings: [{ name: 'b', match: { hosts: ['evil.example.org'] }, auth: { type: 'bearer', credential: 'gh' } }] }));
    assert.equal(notAllowed.status, 400);
    assert.match(notAllowed.message, /not allowed by egress policy/);
    const unknown = await status(sbx.credentialVault.create({ ...vaultBody('v'), bindings: [{ name: 'b', match: { hosts: [HOST] }, auth: { type: 'bearer', credential: 'missing' } }] }));
    assert.equal(unknown.status, 400);
    await sbx.credentialVault.create(vaultBody('v'));
    assert.equal((await status(sbx.deleteEgressRules([HOST]))).status, 400, 'removing the bound host from the policy is refused');
    assert.deepEqual((await sbx.getEgressPolicy()).egress?.map((r) => r.target), ['other.example.com', HOST]);
    await sbx.deleteEgressRules(['other.example.com']);
    assert.deepEqual((await sbx.getEgressPolicy()).egress?.map((r) => r.target), [HOST]);
  });

  it('a sandbox created without credentialProxy.enabled refuses vault writes with 412; credentialProxy without a networkPolicy is refused at create (422)', async () => {
    const plain = await sandbox({ credentialProxy: false });
    const refused = await status(plain.credentialVault.create(vaultBody('v')));
    assert.equal(refused.status, 412, refused.message);
    assert.match(refused.message, /transparent mitmproxy/);
    const res = await fetch(`${/^https?:/.test(target.domain) ? target.domain : `http://${target.domain}`}/v1/sandboxes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'OPEN-SANDBOX-API-KEY': target.apiKey ?? '' },
      body: JSON.stringify({ image: { uri: target.image }, entrypoint: ['tail', '-f', '/dev/null'], resourceLimits: { cpu: '1', memory: '2Gi' }, credentialProxy: { enabled: true } }),
    });
    assert.equal(res.status, 422, await res.text());
  });

  it(`${SIM_TAG} with the sidecar requiring TLS, a write through the (non-loopback) server proxy is 426; a direct loopback write is 201`, async function () {
    needsSimulator(this, target, 'it starts a simulator whose sidecars require TLS for vault writes');
    const strict = await startOpenSandboxSimulator({ graceMs: 50, credentialVaultRequireTls: true });
    const saved = target;
    target = { ...target, domain: strict.url, apiKey: strict.apiKey ?? undefined, simulator: strict };
    try {
      const proxied = await sandbox({ useServerProxy: true });
      const r = await status(proxied.credentialVault.create(vaultBody('v')));
      assert.equal(r.status, 426, r.message);
      const direct = await sandbox();
      assert.equal((await direct.credentialVault.create(vaultBody('v'))).revision, 1);
    } finally {
      for (const s of open.splice(0)) await s.kill().catch(() => undefined);
      target = saved;
      await strict.close();
    }
  });
});

/** Every file under `root` holding `needle`. */
function filesHolding(root: string, needle: string): { hits: string[]; files: number } {
  const hits: string[] = [];
  let files = 0;
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        files += 1;
        if (fs.readFileSync(p).includes(needle)) hits.push(path.relative(root, p));
      }
    }
  };
  visit(root);
  return { hits, files };
}

describe('OpenSandbox credential bindings (the product: editor/CLI → companion → daemon → vault) [simulator]', function () {
  this.timeout(120_000);
  let dir: string;
  let stateDir: string;
  let simulator: OpenSandboxSimulator;
  let lifecycle: OpenSandboxClient;
  const binding: OpenSandboxCredentialBinding = { name: 'github', hosts: [HOST], auth: 'apiKey', header: 'X-Api-Key', secret: 'GH_TOKEN' };
  const provider = (credentialEnv: NodeJS.ProcessEnv = {}) => new LocalSandboxProvider({ stateDir, gatewayCommand: gatewayCommand(), log: quietLogger(), credentialEnv });
  const create = (p: LocalSandboxProvider, name: string) =>
    p.create({ provider: 'local', context: 'local', namespace: 'default', name, runtime: 'opensandbox', opensandbox: { credentialBindings: [binding] } }, { waitForReady: true, timeoutMs: 60_000 });
  const refOf = (name: string): SandboxRef => ({ provider: 'local', context: 'local', namespace: 'default', name });

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-osb-cred-'));
    stateDir = path.join(dir, 'state');
    simulator = await startOpenSandboxSimulator({ graceMs: 50 });
    lifecycle = new OpenSandboxClient(resolveConnection({ domain: simulator.url, apiKey: simulator.apiKey ?? '', env: {} }));
  });
  after(async () => {
    await stopGateway({ stateDir }).catch(() => undefined);
    await simulator?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a binding + its secret from the editor: the sandbox has the credential proxy, the host allowed and the vault; the value is nowhere on this side', async () => {
    const canary = `ghp_canary_${randomBytes(12).toString('hex')}`;
    const p = provider();
    await p.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '', credentials: { GH_TOKEN: canary } });
    await create(p, 'cred-ok');
    const [s] = await lifecycle.listOurs();
    assert.ok(s, 'a sandbox was created');
    const inside = simulator.inspect(s.id);
    assert.equal(inside.credentialProxy, true, 'created with credentialProxy.enabled');
    assert.deepEqual(inside.vaultSecrets, [{ name: 'GH_TOKEN', value: canary }], 'the vault holds the secret (server side)');
    assert.ok(!JSON.stringify(inside.env).includes(canary), 'not in the sandbox environment');
    assert.deepEqual(simulator.injectedHeaders(s.id, `https://${HOST}/user`), { 'X-Api-Key': canary }, 'the proxy would inject it for the bound host');
    assert.deepEqual(simulator.injectedHeaders(s.id, 'https://elsewhere.example.com/'), {}, 'and for no other host');
    const sbx = await Sandbox.connect({ sandboxId: s.id, connectionConfig: lifecycle.connection.config() });
    try {
      const policy = await sbx.getEgressPolicy();
      assert.deepEqual(policy, { defaultAction: 'deny', egress: [{ action: 'allow', target: HOST }] }, 'the binding host is the one allowed domain');
      const vault = await sbx.credentialVault.get();
      assert.deepEqual(vault.bindings.map((b) => [b.name, b.auth]), [['github', { type: 'apiKey', name: 'X-Api-Key' }]]);
    } finally {
      await sbx.close();
    }
    const files = filesHolding(stateDir, canary);
    assert.ok(files.files >= 3, `scanned ${files.files} files of the daemon's state root (run.json, its log, opensandbox.json)`);
    assert.deepEqual(files.hits, [], 'the secret is in no file of the daemon (records, connection file, gateway.log)');

    // A daemon restart forgets every secret; the reattached sandbox keeps its vault (it lives in OpenSandbox).
    await stopGateway({ stateDir });
    const again = provider();
    await again.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    const conn = await again.open(refOf('cred-ok'));
    assert.ok(conn.endpoint.url, 'the Run is served again after the restart, without any secret');
    assert.deepEqual(simulator.inspect(s.id).vaultSecrets, [{ name: 'GH_TOKEN', value: canary }]);
    await again.terminate(refOf('cred-ok'), 'Immediate', { wait: true, timeoutMs: 30_000 });
    await again.delete(refOf('cred-ok'));
    assert.deepEqual(filesHolding(stateDir, canary).hits, []);
  });

  it('a CLI finds the secret in SANDBOX_SESSIONS_CREDENTIAL_<NAME>; without it the create fails naming the command and the variable, and nothing is created', async () => {
    const canary = `cli_canary_${randomBytes(12).toString('hex')}`;
    const p = provider({ SANDBOX_SESSIONS_CREDENTIAL_GH_TOKEN: canary });
    await p.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    await create(p, 'cred-env');
    const [s] = await lifecycle.listOurs();
    assert.deepEqual(simulator.inspect(s?.id ?? '').vaultSecrets, [{ name: 'GH_TOKEN', value: canary }]);
    await p.terminate(refOf('cred-env'), 'Immediate', { wait: true, timeoutMs: 30_000 });
    await p.delete(refOf('cred-env'));

    // A fresh daemon (no secret in memory), a client without the value: refused before any sandbox exists.
    await stopGateway({ stateDir });
    const bare = provider({});
    await bare.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    await assert.rejects(create(bare, 'cred-missing'), (err: Error) => {
      assert.match(err.message, /binding "github" needs the secret GH_TOKEN/);
      assert.match(err.message, /Sandbox Sessions: Set OpenSandbox Credential…/);
      assert.match(err.message, /SANDBOX_SESSIONS_CREDENTIAL_GH_TOKEN/);
      return true;
    });
    assert.deepEqual(await lifecycle.listOurs(), [], 'no OpenSandbox sandbox was created');
  });
});
