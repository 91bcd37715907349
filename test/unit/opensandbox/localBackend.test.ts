// OpenSandbox as a backend of the local runtime, end to end through the local gateway daemon
// (in-process, a temp state root) against the OpenSandbox simulator — or a real server, see
// target.ts. The editor's clients are the real ones: GatewayClient on era C and era D, and the
// extension's SandboxFiles (chunked writes, ranged or command-based reads). Sandboxes are counted
// through the lifecycle API (the product's metadata labels), never by looking inside the simulator.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@alibaba-group/opensandbox';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { Run } from '../../../protocol/kruntimes/run';
import { SandboxFiles } from '../../../extension/fs/sandboxFiles';
import type { LiveSandboxConnection } from '../../../extension/sandboxes/connection';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import type { GatewayApi } from '../../../server/gateway/apiEra';
import { localBackends } from '../../../server/sandboxes/localBackends';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { LABEL_PRODUCT, LABEL_RUN, PRODUCT } from '../../../server/sandboxes/opensandbox/labels';
import { OpenSandboxAnnotations } from '../../../server/sandboxes/opensandbox/runSettings';
import { call, patchTermination, runsPath, waitCommandRunning, waitPhase } from '../gateway/harness';
import { connection, startTarget, type Target } from './target';

const CANARY_KEY = `canary-key-${Date.now().toString(36)}-do-not-log`;

interface Daemon {
  gw: RunningGateway;
  stateDir: string;
  logLines: string[];
}

describe('OpenSandbox as a backend of the local runtime', function () {
  this.timeout(120_000);
  let target: Target;
  let client: OpenSandboxClient;
  const daemons: Daemon[] = [];
  const stateDirs: string[] = [];

  before(async () => {
    target = await startTarget({ apiKey: CANARY_KEY, graceMs: 50 });
    client = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: target.apiKey ?? '', env: {} }));
  });
  after(async () => {
    for (const d of daemons) await d.gw.close().catch(() => undefined);
    for (const s of await client.listOurs().catch(() => [])) await client.kill(s.id).catch(() => undefined);
    await target.simulator?.close();
    for (const dir of stateDirs) await fs.rm(dir, { recursive: true, force: true });
  });

  async function startDaemon(opts: { stateDir?: string; env?: NodeJS.ProcessEnv; api?: GatewayApi } = {}): Promise<Daemon> {
    const stateDir = opts.stateDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-')));
    if (!stateDirs.includes(stateDir)) stateDirs.push(stateDir);
    const env = opts.env ?? { OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey };
    const logLines: string[] = [];
    const gw = await startGateway({ stateDir, tickMs: 50, api: opts.api, backends: localBackends(stateDir, env), log: (l) => logLines.push(l) });
    const d = { gw, stateDir, logLines };
    daemons.push(d);
    return d;
  }

  async function stopDaemon(d: Daemon): Promise<void> {
    await d.gw.close();
    daemons.splice(daemons.indexOf(d), 1);
  }

  async function createRun(gw: RunningGateway, annotations: Record<string, string> = {}): Promise<Run> {
    const body = {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { generateName: 'osb-', annotations },
      spec: { runtime: 'opensandbox', mode: { session: {} }, env: [{ name: 'GREETING', value: 'hello from the Run' }] },
    };
    const r = await call(gw, 'POST', runsPath(), { body });
    assert.equal(r.status, 201, r.text);
    return r.json() as Run;
  }

  async function readyRun(gw: RunningGateway, annotations: Record<string, string> = {}): Promise<{ run: Run; gc: GatewayClient }> {
    const run = await waitPhase(gw, await createRun(gw, annotations), ['Ready', 'Failed'], 60_000);
    assert.equal(run.status?.phase, 'Ready', run.status?.message);
    return { run, gc: new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token }) };
  }

  /** The product's sandboxes of one Run, as the lifecycle API lists them. */
  const sandboxesOf = async (run: Run) => client.listOurs({ run: run.metadata.uid ?? '' });

  async function waitSandboxCount(run: Run, n: number): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const count = (await sandboxesOf(run)).length;
      if (count === n) return;
      if (Date.now() > deadline) assert.fail(`run ${run.metadata.name} has ${count} sandboxes, wanted ${n}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('without a connection, creating an opensandbox Run is a 422 that says what to set', async () => {
    const { gw } = await startDaemon({ env: {} });
    const r = await call(gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'no-conn' }, spec: { runtime: 'opensandbox', mode: { session: {} } } },
    });
    assert.equal(r.status, 422, r.text);
    assert.match(r.text, /OPEN_SANDBOX_DOMAIN/);
    assert.match(r.text, /Set OpenSandbox API Key/);
    const bad = await call(gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'no-conn' }, spec: { runtime: 'process', mode: { session: {} } } },
    });
    assert.equal(bad.status, 201, 'the local backends still work without OpenSandbox');
  });

  it('a Run becomes Ready on a new labelled sandbox with egress denied; commands stream, exit codes come back, env and cwd apply', async () => {
    const { gw } = await startDaemon();
    const { run, gc } = await readyRun(gw, { [OpenSandboxAnnotations.allowedEgress]: 'pypi.org,*.github.com' });
    const mine = await sandboxesOf(run);
    assert.equal(mine.length, 1, 'one sandbox for the Run');
    assert.equal(mine[0]?.metadata[LABEL_PRODUCT], PRODUCT);
    assert.equal(mine[0]?.metadata[LABEL_RUN], run.metadata.uid);
    const sbx = await Sandbox.connect({ sandboxId: mine[0]?.id ?? '', connectionConfig: connection(target) });
    try {
      const policy = await sbx.getEgressPolicy();
      assert.equal(policy.defaultAction, 'deny');
      assert.deepEqual(policy.egress?.map((r) => `${r.action} ${r.target}`).sort(), ['allow *.github.com', 'allow pypi.org']);
    } finally {
      await sbx.close();
    }

    const out = await gc.runCommand({ shell: 'echo "$GREETING"; echo oops >&2; pwd' });
    assert.equal(out.exitCode, 0);
    assert.equal(out.stdout.toString(), 'hello from the Run\n/workspace\n');
    assert.equal(out.stderr.toString(), 'oops\n');
    const exact = await gc.runCommand({ shell: "printf 'no newline\\r\\n\\000\\377tail'" });
    assert.deepEqual(exact.stdout, Buffer.from('no newline\r\n\x00\xfftail', 'latin1'), 'output bytes arrive exactly (CR, NUL, non-UTF-8, no final newline)');
    const failing = await gc.runCommand({ shell: 'echo before; exit 3' });
    assert.equal(failing.exitCode, 3);
    assert.equal(failing.stdout.toString(), 'before\n');
    await gc.createDirectory('sub');
    const argv = await gc.runCommand({ argv: ['sh', '-c', 'pwd; cat; printf "%s\\n" "$1"', 'sh', "it's one argument"], workingDirectory: 'sub', stdin: Buffer.from('from stdin\n').toString('base64') });
    assert.equal(argv.stdout.toString(), "/workspace/sub\nfrom stdin\nit's one argument\n");
    const missing = await gc.runCommand({ shell: 'true', workingDirectory: 'nope' }).then(() => undefined, (e: unknown) => e as Error);
    assert.match(String(missing?.message), /working directory nope is not a directory in the workspace/);
    await gc.close();
  });

  it('Cancel by operation id interrupts the command: the process is gone in the sandbox, the record says cancelled', async () => {
    const { gw } = await startDaemon();
    const { run, gc } = await readyRun(gw);
    const running = gc.runCommand({ shell: 'sleep 600' }, { idempotencyKey: 'op-sleep' }).then((o) => o, (e: unknown) => e);
    const opId = await waitCommandRunning(gw, run, 20_000);
    assert.equal(opId, 'op-sleep');
    const records = (await call(gw, 'GET', `${runsPath('default', run.metadata.name)}/operations`)).json() as { items: Array<{ operationId: string; remote?: { commandId: string } }> };
    const commandId = records.items.find((r) => r.operationId === opId)?.remote?.commandId;
    assert.ok(commandId, 'the exec record names the command in the sandbox');
    assert.equal(await gc.cancelOperation(opId), 'cancelled');
    const result = await running;
    assert.equal((result as { exitCode?: number }).exitCode, -1, String(result));
    const sbx = await Sandbox.connect({ sandboxId: (await sandboxesOf(run))[0]?.id ?? '', connectionConfig: connection(target) });
    try {
      const status = await sbx.commands.getCommandStatus(commandId);
      assert.equal(status.running, false, 'cancelled means the process is gone in the sandbox');
    } finally {
      await sbx.close();
    }
    const after = (await call(gw, 'GET', `${runsPath('default', run.metadata.name)}/operations`)).json() as { items: Array<{ operationId: string; outcome?: string }> };
    assert.equal(after.items.find((r) => r.operationId === opId)?.outcome, 'cancelled');
    await gc.close();
  });

  for (const api of ['era-c', 'era-d'] as const) {
    it(`file operations through the access API (${api}): write, list pages, read, mkdir, rename, delete, and a 3 MiB file`, async () => {
      const { gw } = await startDaemon({ api });
      const { run, gc } = await readyRun(gw);
      await gc.createDirectory('src');
      await gc.writeFile('src/a.txt', Buffer.from('alpha'));
      await gc.writeFile('deep/er/b.txt', Buffer.from('beta'), { createParents: true });
      const noParent = await gc.writeFile('nope/c.txt', Buffer.from('x')).then(() => undefined, (e: unknown) => e as { status?: number });
      assert.equal(noParent?.status, 404, 'a missing parent is refused unless createParents');
      for (const n of ['z', 'é', 'a', 'm']) await gc.writeFile(`src/${n}`, Buffer.from(n));
      const page1 = await gc.listPage({ path: 'src', limit: 2 });
      assert.deepEqual(page1.entries.map((e) => e.path), ['a', 'a.txt']);
      const all = [];
      for await (const e of gc.list('src', { limit: 2 })) all.push(e.path);
      assert.deepEqual(all, ['a', 'a.txt', 'm', 'z', 'é'], 'byte-wise order, paged');
      assert.equal((await gc.read('src/a.txt')).contents.toString(), 'alpha');
      await gc.renameFile('src/a.txt', 'src/renamed.txt');
      const clash = await gc.renameFile('src/z', 'src/m').then(() => undefined, (e: unknown) => e as { status?: number; message?: string });
      assert.equal(clash?.status, 500, 'rename onto an existing file needs overwrite (AlreadyExists, as the local workspace answers)');
      assert.match(clash?.message ?? '', /destination already exists/);
      await gc.renameFile('src/z', 'src/m', { overwrite: true });
      assert.equal((await gc.read('src/m')).contents.toString(), 'z');
      const dirDelete = await gc.deleteFile('deep').then(() => undefined, (e: unknown) => e as { status?: number });
      assert.equal(dirDelete?.status, 409, 'deleting a directory needs recursive (FailedPrecondition, as the local workspace answers)');
      await gc.deleteFile('deep', { recursive: true });
      const escape = await gc.writeFile('../escape.txt', Buffer.from('x')).then(() => undefined, (e: unknown) => e as { status?: number; message?: string });
      assert.equal(escape?.status, 400, 'a path out of the workspace is refused');
      assert.match(escape?.message ?? '', /escape/);
      const shown = await gc.runCommand({ shell: 'ls -A /workspace /workspace/src' });
      assert.equal(shown.stdout.toString(), '/workspace:\nsrc\n\n/workspace/src:\na\nm\nrenamed.txt\né\n', 'the sandbox sees what the API did');

      // The editor's own file code: a 3 MiB file is written in parts and joined in the sandbox, then read back.
      const status = await gc.status();
      const conn: LiveSandboxConnection = {
        key: 'osb',
        label: 'osb',
        client: async () => gc,
        invalidate: () => undefined,
        capabilities: () => status.capabilities,
        phase: () => 'Ready',
        hold: () => ({ dispose: () => undefined }),
      };
      const files = new SandboxFiles(conn);
      const big = Buffer.alloc(3 * 1024 * 1024);
      for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 10)) & 0xff;
      await files.writeFile('big.bin', big, { create: true, overwrite: false });
      const back = await new SandboxFiles(conn).readFile('big.bin');
      assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(big).digest('hex'));
      const inSandbox = await gc.runCommand({ shell: 'sha256sum big.bin | cut -d" " -f1' });
      assert.equal(inSandbox.stdout.toString().trim(), createHash('sha256').update(big).digest('hex'));
      assert.equal(status.capabilities?.rangedReads === true, api === 'era-c');
      assert.equal(status.capabilities?.backend ?? 'opensandbox', 'opensandbox');
      await gc.close();
      await call(gw, 'DELETE', runsPath('default', run.metadata.name));
      await waitSandboxCount(run, 0);
    });
  }

  it('Drain exports every top-level artifact with digests, then deletes the sandbox', async () => {
    const { gw } = await startDaemon();
    const { run, gc } = await readyRun(gw);
    const made = await gc.runCommand({
      shell: 'cd "$KRUNTIME_ARTIFACTS_DIR" && printf "the report\\n" > report.txt && mkdir -p out/nested && printf one > out/1.txt && printf two > out/nested/2.txt',
    });
    assert.equal(made.exitCode, 0, made.stderr.toString());
    await gc.close();
    assert.equal((await patchTermination(gw, run, 'Drain')).status, 200);
    const done = await waitPhase(gw, run, ['Succeeded', 'Failed'], 60_000);
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
    const refs = done.status?.artifactRefs ?? [];
    assert.deepEqual(refs.map((r) => `${r.name}:${r.type}`), ['out:directory', 'report.txt:file']);
    const report = refs.find((r) => r.name === 'report.txt');
    assert.equal(report?.digest, `sha256:${createHash('sha256').update('the report\n').digest('hex')}`);
    assert.equal(report?.sizeBytes, 11);
    const stored = await fs.readFile(path.join(gw.layout.artifactStoreRoot, (report?.location as { filesystem: { path: string } }).filesystem.path));
    assert.equal(stored.toString(), 'the report\n');
    assert.equal((await sandboxesOf(run)).length, 0, 'the sandbox is deleted once the Run Succeeded');
  });

  it('Cancel (Immediate) interrupts the running command and deletes the sandbox', async () => {
    const { gw } = await startDaemon();
    const { run, gc } = await readyRun(gw);
    const running = gc.runCommand({ shell: 'sleep 600' }).then((o) => o, (e: unknown) => e);
    await waitCommandRunning(gw, run, 20_000);
    assert.equal((await patchTermination(gw, run, 'Immediate')).status, 200);
    const done = await waitPhase(gw, run, ['Cancelled'], 30_000);
    assert.equal(done.status?.phase, 'Cancelled');
    await running;
    await gw.runtime.settled('default', run.metadata.name ?? '');
    assert.equal((await sandboxesOf(run)).length, 0);
    await gc.close();
  });

  it('a daemon restart reattaches a live Run to its sandbox; a sandbox a crash left without a record is deleted with the Run', async () => {
    const first = await startDaemon();
    const { run, gc } = await readyRun(first.gw);
    await gc.writeFile('kept.txt', Buffer.from('still here'));
    await gc.close();
    const sandboxId = (await sandboxesOf(run))[0]?.id;
    await stopDaemon(first);
    // What a crash between create and record leaves: a sandbox labelled for the Run that no record names.
    const stray = await client.create({ image: target.image, ttlSeconds: 600, run: run.metadata.uid ?? '' });
    await stray.close();
    const second = await startDaemon({ stateDir: first.stateDir });
    const again = await waitPhase(second.gw, run, ['Ready', 'Failed'], 30_000);
    assert.equal(again.status?.phase, 'Ready', again.status?.message);
    const gc2 = new GatewayClient({ endpoint: { url: again.status?.endpoint?.url ?? '' }, token: second.gw.token });
    assert.equal((await gc2.read('kept.txt')).contents.toString(), 'still here', 'the same sandbox, reattached');
    assert.ok((await sandboxesOf(run)).some((s) => s.id === sandboxId));
    await gc2.close();
    await call(second.gw, 'DELETE', runsPath('default', run.metadata.name));
    assert.equal((await sandboxesOf(run)).length, 0, 'deleting the Run deleted its sandbox and the stray one');
  });

  it('a restart after the sandbox vanished ends the Run Failed (ExecutionLost) instead of serving a dead session', async () => {
    const first = await startDaemon();
    const { run, gc } = await readyRun(first.gw);
    await gc.close();
    await stopDaemon(first);
    for (const s of await sandboxesOf(run)) await client.kill(s.id); // its TTL ran out while the daemon was away
    const second = await startDaemon({ stateDir: first.stateDir });
    const after = await waitPhase(second.gw, run, ['Failed'], 30_000);
    assert.match(after.status?.message ?? '', /runtime session not found after runtimed restart/);
    assert.equal(after.status?.conditions?.find((c) => c.type === 'Completed')?.reason, 'ExecutionLost');
  });

  it('the API key never reaches Run records, exec records, runtimed logs or the daemon log', async () => {
    assert.ok(target.apiKey, 'the target needs an API key');
    const d = await startDaemon();
    const { run, gc } = await readyRun(d.gw);
    await gc.runCommand({ shell: 'env; echo "${OPEN_SANDBOX_API_KEY:-unset}"' });
    await gc.writeFile('f.txt', Buffer.from('x'));
    await gc.close();
    await patchTermination(d.gw, run, 'Drain');
    await waitPhase(d.gw, run, ['Succeeded', 'Failed'], 60_000);
    const hits: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const e of await fs.readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.isFile() && (await fs.readFile(p).catch(() => Buffer.alloc(0))).includes(target.apiKey as string)) hits.push(path.relative(d.stateDir, p));
      }
    };
    await walk(d.stateDir);
    assert.deepEqual(hits, [], 'no file of the state root holds the key');
    assert.ok(d.logLines.some((l) => l.includes('created OpenSandbox sandbox')), 'the daemon did log about the sandbox');
    assert.deepEqual(d.logLines.filter((l) => l.includes(target.apiKey as string)), []);
  });
});
