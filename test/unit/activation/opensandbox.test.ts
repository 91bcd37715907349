// Seed 000's validation sequence on OpenSandbox: activations whose fresh sandbox is an OpenSandbox sandbox (a local
// Run with backend `opensandbox`, through the real local gateway daemon), against the OpenSandbox simulator. The
// agent is the deterministic test agent, bundled to plain JavaScript and shipped in the simulated image
// (/opt/agent/agent.mjs, run by the image's node). Sandboxes are counted through the lifecycle API (the product's
// metadata), never by looking inside the simulator.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { Sandbox } from '@alibaba-group/opensandbox';
import { build } from 'esbuild';
import type { ActivationEvent, ActivationResult, ActivationRunRequest } from '../../../protocol/activation';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { type ActivationCredentials, ActivationRunner } from '../../../server/activation/runner';
import { hydrateSessionBundle } from '../../../server/bundle';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { materializeSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import type { SessionRepository } from '../../../server/repository/contract';
import { openFileSessionRepository } from '../../../server/repository/fileRepository';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { LABEL_ACTIVATION, LABEL_PRODUCT, LABEL_SESSION, PRODUCT } from '../../../server/sandboxes/opensandbox/labels';
import { OpenSandboxClient, type SandboxSummary } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { repackSession } from '../../../server/sandboxes/workspaceMover';
import { RevisionIndexCache } from '../../../server/sessions/revisionIndex';
import { compareSandboxWithRevision } from '../../../server/sessions/sandboxChanges';
import { SandboxSessionService } from '../../../server/sessions/sandboxSessions';
import { runActivateCommand } from '../../../server/cli/activation';
import { gatewayCommand, quietLogger, REPO_ROOT } from '../../fixtures/activation/harness';
import { captureIo } from '../../fixtures/cliCapture';
import { startOpenSandboxSimulator, type OpenSandboxSimulator } from '../../fixtures/opensandbox/simulator';

const AGENT_IN_IMAGE = '/opt/agent/agent.mjs';
const AGENT_ARGV = ['/usr/bin/node', AGENT_IN_IMAGE, 'activate'];
const GATE_IN_IMAGE = '/opt/agent/go';
/** What the simulated image holds; the crash test adds a file for the sandboxes created after it. */
const imageFiles: Record<string, string> = {};
const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

function request(sessionId: string, activationId: string, text: string, runtime = 'opensandbox'): ActivationRunRequest {
  return { sessionId, activationId, stimulus: { type: 'message', payload: { text } }, sandbox: { provider: 'local', runtime, namespace: 'default' } };
}

function response(result: ActivationResult): { text: string; turn: number; history: string[]; makaSessionId: string; envCredentialSha256?: string; fileCredentialSha256?: string } {
  return result.outcome?.response as ReturnType<typeof response>;
}

/** Every file under `root` (raw, and zstd-decompressed when it is a frame) that holds one of `needles`. */
function scan(root: string, needles: string[]): { hits: string[]; files: number } {
  const hits: string[] = [];
  let files = 0;
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        files += 1;
        const bytes = fs.readFileSync(p);
        const views = [bytes];
        if (bytes.subarray(0, 4).equals(ZSTD_MAGIC)) views.push(zlib.zstdDecompressSync(bytes));
        for (const view of views) for (const n of needles) if (view.includes(Buffer.from(n))) hits.push(`${n.slice(0, 14)}… in ${path.relative(root, p)}`);
      }
    }
  };
  visit(root);
  return { hits, files };
}

describe('activations on OpenSandbox (local Runs with backend opensandbox, against the simulator)', function () {
  this.timeout(180_000);
  let dir: string;
  let stateDir: string;
  let repoRoot: string;
  let simulator: OpenSandboxSimulator;
  let lifecycle: OpenSandboxClient;
  let provider: LocalSandboxProvider;
  let repo: SessionRepository;
  const log = quietLogger();

  const runner = (credentials?: (r: ActivationRunRequest) => ActivationCredentials, argv = AGENT_ARGV) =>
    new ActivationRunner({ repository: repo, providers: { local: provider }, log, command: { argv }, scratchParent: dir, ...(credentials ? { credentials } : {}) });
  /** The product's sandboxes, as the lifecycle API lists them. */
  const ours = (): Promise<SandboxSummary[]> => lifecycle.listOurs();

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-act-osb-'));
    stateDir = path.join(dir, 'gateway-state');
    repoRoot = path.join(dir, 'repository');
    const agent = path.join(dir, 'agent.mjs');
    // The test agent as one plain-JavaScript file for the image's node (no type stripping there, no node_modules).
    await build({ entryPoints: [path.join(REPO_ROOT, 'test/fixtures/agent/agent.mts')], bundle: true, platform: 'node', format: 'esm', target: 'node20', outfile: agent, logLevel: 'error' });
    imageFiles[AGENT_IN_IMAGE] = agent;
    simulator = await startOpenSandboxSimulator({ graceMs: 50, imageFiles });
    lifecycle = new OpenSandboxClient(resolveConnection({ domain: simulator.url, apiKey: simulator.apiKey ?? '', env: {} }));
    provider = new LocalSandboxProvider({ stateDir, gatewayCommand: gatewayCommand(), log });
    await provider.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    repo = await openFileSessionRepository({ storageRoot: repoRoot });
  });
  after(async () => {
    await repo?.close().catch(() => undefined);
    await stopGateway({ stateDir }).catch(() => undefined);
    await simulator?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    assert.deepEqual(
      (await ours()).map((s) => s.id),
      [],
      'no OpenSandbox sandbox is left behind',
    );
  });

  it('two activations in two fresh, labelled, egress-denied sandboxes carry state (r1 → r2); the session goes in and out as one tar.zst and is re-packed with our codec', async () => {
    const seen: { id: string; metadata: Record<string, string>; egress: string }[] = [];
    const onEvent = (e: ActivationEvent): void => {
      if (e.type !== 'start') return;
      // While the agent runs: the sandbox as the lifecycle API lists it, and its egress policy.
      void (async () => {
        const [s] = await ours();
        if (!s) return;
        const sbx = await Sandbox.connect({ sandboxId: s.id, connectionConfig: lifecycle.connection.config() });
        try {
          const policy = await sbx.getEgressPolicy();
          seen.push({ id: s.id, metadata: s.metadata, egress: `${policy.defaultAction} [${(policy.egress ?? []).length}]` });
        } finally {
          await sbx.close();
        }
      })();
    };
    const phases: [string, string | undefined][] = [];
    const onProgress = (p: string, m?: string): void => void phases.push([p, m]);
    const first = await runner().run(request('osb-e2e', 'a1', 'hello'), { onEvent, onProgress });
    assert.equal(first.commit, 'committed', JSON.stringify(first));
    assert.equal(first.revision, 'r1');
    const second = await runner().run(request('osb-e2e', 'a2', 'again'), { onEvent, onProgress });
    assert.equal(second.commit, 'committed', JSON.stringify(second));
    assert.equal(second.revision, 'r2');
    assert.equal(response(second).turn, 2);
    assert.deepEqual(response(second).history, ['hello'], 'the second sandbox saw the first turn');
    assert.equal(response(second).makaSessionId, response(first).makaSessionId);

    // Each activation had its own sandbox, labelled for the product, the session and the activation, egress denied.
    const deadline = Date.now() + 10_000;
    while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20)); // the listener's lookups settle
    assert.equal(seen.length, 2, 'a sandbox was listed while each agent ran');
    assert.notEqual(seen[0]?.id, seen[1]?.id, 'two fresh sandboxes');
    assert.deepEqual(
      seen.map((s) => [s.metadata[LABEL_PRODUCT], s.metadata[LABEL_SESSION], s.metadata[LABEL_ACTIVATION], s.egress]),
      [
        [PRODUCT, 'osb-e2e', 'a1', 'deny [0]'],
        [PRODUCT, 'osb-e2e', 'a2', 'deny [0]'],
      ],
    );
    // The second activation had a revision to bring in: one file unpacked by tar; both came back as one file.
    const texts = phases.map(([p, m]) => `${p}: ${m ?? ''}`);
    assert.ok(texts.includes('hydrate: uploading the session bundle as one file and unpacking it with tar in the sandbox'), texts.join('\n'));
    assert.equal(texts.filter((t) => t === 'download: packing state and workspace with tar in the sandbox and downloading them as one file').length, 2, texts.join('\n'));

    // The committed bundle is ours: it hydrates under the strict codec, and re-packing the hydrated tree with our
    // codec gives the very same bytes (a bundle written by the sandbox's tar would not).
    const head = await repo.checkoutCurrent('osb-e2e');
    const bundle = await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: head.checkpoint, destination: path.join(dir, 'e2e.tar.zst'), maxBytes: 1 << 30 });
    const h = await hydrateSessionBundle({ source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest }, expectedSessionId: 'osb-e2e', destinationRoot: path.join(dir, 'e2e-tree'), limits: DEFAULT_PEOPLE_LIMITS });
    assert.equal(fs.readFileSync(path.join(h.destinationRoot, 'workspace/notes.md'), 'utf8'), 'turn 1: hello\nturn 2: again\n');
    const again = await repackSession(
      { root: h.destinationRoot, stateRoot: h.stateRoot, workspaceRoot: h.workspaceRoot, identity: undefined },
      {
        sessionId: 'osb-e2e',
        lastCommittedActivationId: 'a2',
        stateIdentity: { mediaType: h.manifest.stateIdentity.mediaType, bytes: fs.readFileSync(path.join(h.destinationRoot, 'state-identity.json')) },
        limits: DEFAULT_PEOPLE_LIMITS,
        destination: path.join(dir, 'e2e-again.tar.zst'),
      },
    );
    assert.equal(again.archiveDigest, bundle.expectedArchiveDigest, 'byte-identical to what our codec packs');
  });

  it('the same turns on a local sandbox and on OpenSandbox give the same session tree (measured: activation time on each)', async () => {
    const timings: Record<string, number[]> = { process: [], opensandbox: [] };
    for (const runtime of ['process', 'opensandbox'] as const) {
      for (const [id, text] of [
        ['t1', 'one'],
        ['t2', 'two'],
        ['t3', 'three'],
      ] as const) {
        const started = performance.now();
        // The same agent file and node either way: on this machine for the local sandbox, in the image on OpenSandbox.
        const argv = runtime === 'process' ? ['/usr/bin/node', path.join(dir, 'agent.mjs'), 'activate'] : AGENT_ARGV;
        const r = await runner(undefined, argv).run(request(`same-${runtime}`, id, text, runtime));
        timings[runtime]?.push(performance.now() - started);
        assert.equal(r.commit, 'committed', JSON.stringify(r));
      }
    }
    const tree = async (sessionId: string) => {
      const head = await repo.checkoutCurrent(sessionId);
      const b = await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: head.checkpoint, destination: path.join(dir, `${sessionId}.tar.zst`), maxBytes: 1 << 30 });
      const h = await hydrateSessionBundle({ source: { path: b.path, expectedArchiveDigest: b.expectedArchiveDigest }, expectedSessionId: sessionId, destinationRoot: path.join(dir, `${sessionId}-tree`), limits: DEFAULT_PEOPLE_LIMITS });
      return { notes: fs.readFileSync(path.join(h.destinationRoot, 'workspace/notes.md'), 'utf8'), payload: h.payloadBytes, entries: h.entryCount };
    };
    assert.deepEqual(await tree('same-opensandbox'), await tree('same-process'));
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    console.log(
      `      activation wall time (median of 3, ms): local process ${median(timings.process ?? []).toFixed(0)}, OpenSandbox simulator ${median(timings.opensandbox ?? []).toFixed(0)}`,
    );
  });

  it('a person\'s OpenSandbox sandbox saved as r1 is compared with it by digests computed in the sandbox, and r1 opens in a new one as one file', async () => {
    const sessions = new SandboxSessionService(async () => repo, new Map([['local', provider]]), { kind: 'file', description: repoRoot }, log);
    const revisions = new RevisionIndexCache(async () => repo, path.join(dir, 'revisions'));
    const sandbox = await provider.create({ provider: 'local', runtime: 'opensandbox', namespace: 'default' }, { waitForReady: true });
    const connection = await provider.open(sandbox.ref);
    const gw = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    try {
      const run = async (shell: string) => assert.equal((await gw.runCommand({ shell })).exitCode, 0, shell);
      await run('printf "one\\n" > a.txt && printf "same size\\n" > b.txt && mkdir -p src && printf "x" > src/c.ts && printf "#!/bin/sh\\n" > run.sh && chmod +x run.sh');
      assert.equal((await sessions.saveSandbox({ sandbox: sandbox.ref, sessionId: 'compare-osb' })).revision.ref.revision, 'r1');
      const compare = () => compareSandboxWithRevision({ sessions, revisions }, { sandbox: sandbox.ref, sessionId: 'compare-osb', revision: 'r1' });
      assert.deepEqual([(await compare()).changes, (await compare()).unchanged], [[], 4]);
      await run('printf "SAME SIZE\\n" > b.txt && rm src/c.ts && printf "new" > d.txt && chmod -x run.sh');
      assert.deepEqual((await compare()).changes, [
        { path: 'b.txt', status: 'modified' },
        { path: 'd.txt', status: 'added' },
        { path: 'run.sh', status: 'modified' },
        { path: 'src/c.ts', status: 'deleted' },
      ]);
      // Open Revision in New Sandbox: r1 goes into a new OpenSandbox sandbox as one file, unpacked by its tar.
      const said: string[] = [];
      const opened = await sessions.openInSandbox(
        { sessionId: 'compare-osb', revision: 'r1', sandbox: { provider: 'local', runtime: 'opensandbox', namespace: 'default' } },
        { progress: (_phase, message) => said.push(message ?? '') },
      );
      try {
        assert.ok(said.includes(`copying the workspace of compare-osb@r1 into ${opened.sandbox.ref.name} as one file`), said.join('\n'));
        assert.ok(!said.some((m) => m.startsWith('checking out')), `nothing was checked out here for a sandbox that lives elsewhere: ${said.join('\n')}`);
        const again = await compareSandboxWithRevision({ sessions, revisions }, { sandbox: opened.sandbox.ref, sessionId: 'compare-osb', revision: 'r1' });
        assert.deepEqual([again.changes, again.unchanged], [[], 4]);
      } finally {
        await provider.delete(opened.sandbox.ref);
      }
    } finally {
      await gw.close();
      await revisions.dispose();
      await provider.delete(sandbox.ref);
    }
  });

  it('a sandbox killed before commit leaves the old revision; a repeated activation id runs nothing', async () => {
    const base = await runner().run(request('osb-kill', 'k1', 'base'));
    assert.equal(base.revision, 'r1');
    let killed: string | undefined;
    const result = await runner().run(request('osb-kill', 'k2', '!hang'), {
      onEvent: (e) => {
        // The agent is running (it said so): delete its sandbox through the lifecycle API, as a crash of the node would.
        if (e.type === 'runtime_event' && killed === undefined) {
          killed = 'pending';
          void ours().then(async (list) => {
            const s = list.find((x) => x.metadata[LABEL_ACTIVATION] === 'k2');
            if (s) killed = (await lifecycle.kill(s.id)) ? s.id : 'gone';
          });
        }
      },
    });
    assert.equal(result.commit, 'not_committed', JSON.stringify(result));
    assert.equal(result.error?.code, 'sandbox_lost', result.error?.message);
    assert.match(killed ?? '', /^[0-9a-f-]{36}$/, 'the sandbox was deleted while the agent ran');
    const head = await repo.checkoutCurrent('osb-kill');
    assert.equal(head.ref.revision, 'r1', 'the old revision is still the head');
    assert.equal(head.lastCommittedActivationId, 'k1');

    // A committed id again: its stored outcome; no sandbox is even created.
    const original = provider.create.bind(provider);
    let creates = 0;
    provider.create = (...args) => {
      creates += 1;
      return original(...args);
    };
    try {
      const events: ActivationEvent[] = [];
      const phases: string[] = [];
      const again = await runner().run(request('osb-kill', 'k1', 'base'), { onEvent: (e) => events.push(e), onProgress: (p) => phases.push(p) });
      assert.equal(again.deduplicated, true);
      assert.equal(again.revision, 'r1');
      assert.deepEqual(again.outcome, base.outcome);
      assert.equal(creates, 0, 'no sandbox was created');
      assert.deepEqual(events, []);
      assert.ok(!phases.includes('agent'), phases.join(','));
    } finally {
      provider.create = original;
    }
  });

  it('a credential canary (env at exec time, a config-root file) reaches the agent but never a bundle, a record or a log; the scan finds a leak', async () => {
    const envKey = `sk-osb-canary-${randomBytes(12).toString('hex')}`;
    const fileKey = `osb-file-canary-${randomBytes(12).toString('hex')}`;
    const credentials = () => ({ env: { AGENT_API_KEY: envKey }, configFiles: { 'credentials.json': JSON.stringify({ apiKey: fileKey }) } });
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    for (const [id, text] of [
      ['c1', 'first'],
      ['c2', 'second'],
    ] as const) {
      const r = await runner(credentials).run(request('osb-canary', id, text));
      assert.equal(r.commit, 'committed', JSON.stringify(r));
      assert.equal(response(r).envCredentialSha256, sha(envKey), 'the env credential reached the agent');
      assert.equal(response(r).fileCredentialSha256, sha(fileKey), 'the config-root credential reached the agent');
    }
    const inRepo = scan(repoRoot, [envKey, fileKey]);
    assert.ok(inRepo.files >= 4, `scanned ${inRepo.files} repository files`);
    assert.deepEqual(inRepo.hits, []);
    // The local runtime's records of those Runs (run.json, exec records, audit and output logs) hold none either.
    const inRecords = scan(stateDir, [envKey, fileKey]);
    assert.ok(inRecords.files >= 2, `scanned ${inRecords.files} gateway files`);
    assert.deepEqual(inRecords.hits, []);

    // Positive control: an agent that copies its key into its state does get caught by the same scan.
    const leaked = await runner(credentials).run(request('osb-leaky', 'l1', '!leak'));
    assert.equal(leaked.commit, 'committed');
    assert.ok(scan(repoRoot, [envKey]).hits.length > 0, 'the scan finds a leaked key');
  });

  it('with a credential binding the canary goes to the sandbox\'s Credential Vault (server side) and nowhere else: not the agent\'s env, the bundle, the repository, the daemon\'s state root or log', async () => {
    const canary = `sk-vault-canary-${randomBytes(12).toString('hex')}`;
    const binding = { name: 'agent-api', hosts: ['api.example.com'], auth: 'bearer' as const, secret: 'AGENT_API_KEY' };
    await provider.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '', credentials: { AGENT_API_KEY: canary } });
    try {
      const before = new Set(simulator.retiredVaultSecrets().keys());
      const vaultReq = { ...request('osb-vault', 'v1', '!leak'), sandbox: { ...request('osb-vault', 'v1', '').sandbox, opensandbox: { credentialBindings: [binding] } } };
      // `!leak` copies the agent's AGENT_API_KEY env into its state: with the vault it has none to copy.
      const r = await runner().run(vaultReq);
      assert.equal(r.commit, 'committed', JSON.stringify(r));
      assert.equal(response(r).envCredentialSha256, undefined, 'the agent saw no credential in its environment');
      const vaults = [...simulator.retiredVaultSecrets()].filter(([id]) => !before.has(id));
      assert.deepEqual(vaults.map(([, secrets]) => secrets), [[{ name: 'AGENT_API_KEY', value: canary }]], "the activation's sandbox vault held it");
      assert.deepEqual(scan(repoRoot, [canary]).hits, [], 'not in the repository (bundles, records)');
      const inState = scan(stateDir, [canary]);
      assert.ok(inState.files >= 2, `scanned ${inState.files} gateway files`);
      assert.deepEqual(inState.hits, [], "not in the daemon's state root or gateway.log");
    } finally {
      await provider.configureOpenSandbox({ domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    }
  });

  it('CLI: session activate --provider opensandbox runs the turn in an OpenSandbox sandbox and commits it; misuse exits 2', async () => {
    const a = captureIo();
    const deps = { providers: { local: provider }, env: {} };
    const seen: string[] = [];
    const watch = setInterval(() => void ours().then((l) => l.forEach((s) => seen.includes(s.id) || seen.push(s.id))), 50);
    try {
      const code = await runActivateCommand(['cli-osb', '--message', 'from the CLI', '--activation-id', 'cli-1', '--provider', 'opensandbox', '--ttl-seconds', '300', '--repository', repoRoot, '--', ...AGENT_ARGV], a.io, deps);
      assert.equal(code, 0, a.err());
    } finally {
      clearInterval(watch);
    }
    assert.match(a.out(), /\[provisional\] start cli-1/);
    assert.match(a.out(), /committed cli-osb@r1: completed\n/);
    assert.ok(seen.length >= 1, 'an OpenSandbox sandbox ran the turn');
    const bad = captureIo();
    assert.equal(await runActivateCommand(['cli-osb', '--message', 'x', '--provider', 'opensandbox', '--runtime', 'process', '--repository', repoRoot], bad.io, deps), 2);
    assert.match(bad.err(), /--provider opensandbox runs on the opensandbox backend/);
    const bad2 = captureIo();
    assert.equal(await runActivateCommand(['cli-osb', '--message', 'x', '--image', 'maka:1', '--repository', repoRoot], bad2.io, deps), 2);
    assert.match(bad2.err(), /are for --provider opensandbox/);
  });

  it('CLI: session activate --credential puts the binding into the activation sandbox\'s Credential Vault, its value from SANDBOX_SESSIONS_CREDENTIAL_<NAME>; a wrong one exits 2', async () => {
    const canary = `sk-cli-vault-${randomBytes(12).toString('hex')}`;
    // The CLI's provider, with the environment the CLI would have (the value is nowhere else).
    const cliProvider = new LocalSandboxProvider({ stateDir, gatewayCommand: gatewayCommand(), log, credentialEnv: { SANDBOX_SESSIONS_CREDENTIAL_CLI_API_KEY: canary } });
    const deps = { providers: { local: cliProvider }, env: {} };
    try {
      const before = new Set(simulator.retiredVaultSecrets().keys());
      const a = captureIo();
      const args = ['cli-osb-cred', '--message', 'with a vault', '--activation-id', 'cred-1', '--provider', 'opensandbox', '--credential', 'CLI_API_KEY=api.example.com', '--repository', repoRoot];
      assert.equal(await runActivateCommand([...args, '--', ...AGENT_ARGV], a.io, deps), 0, a.err());
      assert.match(a.out(), /committed cli-osb-cred@r1: completed\n/);
      const vaults = [...simulator.retiredVaultSecrets()].filter(([id]) => !before.has(id));
      assert.deepEqual(vaults.map(([, secrets]) => secrets), [[{ name: 'CLI_API_KEY', value: canary }]], "the activation sandbox's vault held it");
      assert.ok(!a.out().includes(canary) && !a.err().includes(canary), 'not printed');
      assert.deepEqual(scan(repoRoot, [canary]).hits, [], 'not in the repository');
      assert.deepEqual(scan(stateDir, [canary]).hits, [], "not in the daemon's state root or log");
      for (const [flags, message] of [
        [['--provider', 'opensandbox', '--credential', 'CLI_API_KEY=api.example.com:apiKey'], /--credential CLI_API_KEY: apiKey needs the header it sets/],
        [['--credential', 'CLI_API_KEY=api.example.com'], /--credential are for --provider opensandbox/],
      ] as const) {
        const bad = captureIo();
        assert.equal(await runActivateCommand(['cli-osb-cred', '--message', 'x', ...flags, '--repository', repoRoot], bad.io, deps), 2, bad.err());
        assert.match(bad.err(), message);
      }
    } finally {
      await cliProvider.dispose();
    }
  });

  it('a server killed mid-activation leaves its sandbox on record; the retry of that id deletes it, runs once and commits once', async () => {
    await runner().run(request('osb-crash', 'x1', 'base'));
    // The agent waits for a file of the image that the first sandbox's image lacks; the retry's image has it.
    const crash = request('osb-crash', 'x2', `!waitfor ${GATE_IN_IMAGE}`);
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(REPO_ROOT, 'test/fixtures/activation/runnerChild.ts'),
        JSON.stringify({ repoRoot, stateDir, scratchParent: dir, counterFile: path.join(dir, 'unused-counter'), request: crash, lease: { ttlMs: 60_000 }, command: AGENT_ARGV }),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    // The child prints one line per provisional event: its agent runs in its sandbox now.
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('"event"') && resolve());
      child.once('exit', (code) => reject(new Error(`the child exited (${code}) before its agent ran`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const record = await repo.activations.get('osb-crash', 'x2');
    assert.equal(record?.state, 'running');
    assert.ok(record?.sandbox, 'the activation record names the sandbox');
    const left = (await ours()).filter((s) => s.metadata[LABEL_ACTIVATION] === 'x2');
    assert.equal(left.length, 1, 'the dead server left its OpenSandbox sandbox behind');
    assert.equal((await repo.checkoutCurrent('osb-crash')).ref.revision, 'r1');
    // Were it never retried, the leftover would still end: its Run has a total timeout (then the daemon deletes the
    // OpenSandbox sandbox), and the sandbox its TTL.
    const runs = fs.readdirSync(path.join(stateDir, 'runs')).map((uid) => JSON.parse(fs.readFileSync(path.join(stateDir, 'runs', uid, 'run.json'), 'utf8')) as { metadata: { labels?: Record<string, string> }; spec: { timeout?: string } });
    const leftoverRun = runs.find((r) => r.metadata.labels?.[LABEL_ACTIVATION] === 'x2');
    assert.equal(leftoverRun?.spec.timeout, '30m');
    assert.ok(left[0]?.expiresAt, 'the sandbox has a TTL');

    imageFiles[GATE_IN_IMAGE] = path.join(dir, 'agent.mjs');
    const phases: string[] = [];
    const retry = await runner().run(crash, { onProgress: (p, m) => void phases.push(`${p}: ${m ?? ''}`) });
    assert.equal(retry.commit, 'committed', JSON.stringify(retry));
    assert.equal(retry.revision, 'r2');
    assert.equal(retry.attempt, 2);
    assert.equal(phases[0], `cleanup: destroying sandbox ${record.sandbox.name}`, 'the leftover was destroyed first');
    assert.ok(!(await ours()).some((s) => s.id === left[0]?.id), 'the leftover sandbox is gone');
  });
});
