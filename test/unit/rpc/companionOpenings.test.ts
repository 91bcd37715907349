// "Changed since opened" over the companion's real stdio: the first comparison of a sandbox takes its opening
// snapshot (kept 0600 in the state root, surviving a server restart); later ones list what changed since, as a save
// would see it; its files read back as they were; two servers taking it at once agree on one; a sandbox holding a
// secret gets none; a newer sandbox with the same name gets its own; deleting the sandbox removes it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { OpeningChanges } from '../../../protocol/companion/openings';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxConnection, SandboxRef, SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { type CompanionProcess, rejectsWithCode, spawnCompanion } from '../../fixtures/companionProcess';

describe('companion server: changed since opened', function () {
  this.timeout(90_000);
  let work: string;
  let snapshots: string;
  let env: Record<string, string>;
  const servers: CompanionProcess[] = [];

  const start = async (): Promise<CompanionProcess> => {
    const server = spawnCompanion(env);
    servers.push(server);
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
    return server;
  };

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-openings-'));
    snapshots = path.join(work, 'state', 'opening-snapshots');
    env = { SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state'), SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository') };
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const request = <T>(server: CompanionProcess, method: string, params: unknown) => server.connection.sendRequest(method, params) as Promise<T>;
  const newSandbox = async (server: CompanionProcess, name?: string): Promise<SandboxRef> =>
    (await request<{ sandbox: SandboxSummary }>(server, 'sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default', ...(name ? { name } : {}) } })).sandbox.ref;
  const run = async (server: CompanionProcess, ref: SandboxRef, shell: string) => {
    const c = await request<SandboxConnection>(server, 'sandboxes/open', { ref });
    const gw = new GatewayClient({ endpoint: c.endpoint, token: c.token });
    try {
      const done = await gw.runCommand({ shell });
      assert.equal(done.exitCode, 0, done.stderr.toString());
    } finally {
      await gw.close();
    }
  };
  const compare = (server: CompanionProcess, ref: SandboxRef) => request<OpeningChanges>(server, 'openings/compareSandbox', { sandbox: ref });
  const read = async (server: CompanionProcess, ref: SandboxRef, file: string) =>
    Buffer.from((await request<{ contents: string }>(server, 'openings/read', { sandbox: ref, path: file })).contents, 'base64').toString();
  const records = () => (fs.existsSync(snapshots) ? fs.readdirSync(snapshots).filter((n) => n.endsWith('.json')) : []);
  const bundles = () => (fs.existsSync(snapshots) ? fs.readdirSync(snapshots).filter((n) => n.endsWith('.tar.zst')) : []);

  it('takes the snapshot on the first comparison, then lists what changed since; its files read as they were', async () => {
    const server = await start();
    const ref = await newSandbox(server);
    await run(server, ref, 'printf "first\\n" > README.md && mkdir -p src node_modules/dep && echo gone > src/gone.ts && echo x > node_modules/dep/a.js');
    await rejectsWithCode(read(server, ref, 'workspace/README.md'), 'not_found', { message: /no opening snapshot yet/ });

    const first = await compare(server, ref);
    assert.equal(first.taken, true);
    assert.deepEqual([first.changes, first.unchanged], [[], 2]);
    assert.deepEqual(first.workspace.excludedEntries.map((e) => e.path), ['node_modules/'], 'the policy a save follows');
    assert.equal(fs.statSync(snapshots).mode & 0o777, 0o700);
    assert.deepEqual([records().length, bundles().length], [1, 1]);
    for (const name of fs.readdirSync(snapshots)) assert.equal(fs.statSync(path.join(snapshots, name)).mode & 0o777, 0o600, name);

    await run(server, ref, 'printf "FIRST\\n" > README.md && rm src/gone.ts && echo new > added.txt && echo y > node_modules/dep/b.js');
    const later = await compare(server, ref);
    assert.equal(later.taken, false);
    assert.equal(later.opened.at, first.opened.at);
    assert.deepEqual(later.changes, [
      { path: 'README.md', status: 'modified' },
      { path: 'added.txt', status: 'added' },
      { path: 'src/gone.ts', status: 'deleted' },
    ]);
    assert.equal(await read(server, ref, 'workspace/README.md'), 'first\n', 'the file as it was when opened');
    assert.equal(await read(server, ref, 'workspace/src/gone.ts'), 'gone\n');
    const listed = await request<{ entries: { name: string }[] }>(server, 'openings/list', { sandbox: ref, path: 'workspace' });
    assert.deepEqual(listed.entries.map((e) => e.name), ['README.md', 'src']);
    await rejectsWithCode(read(server, ref, 'workspace/added.txt'), 'not_found');
    await rejectsWithCode(read(server, ref, '../../etc/passwd'), 'not_found');

    // Kept across a restart of the server (a window reload): the same snapshot, not a new one.
    await server.stop();
    const again = await start();
    const afterRestart = await compare(again, ref);
    assert.deepEqual([afterRestart.taken, afterRestart.opened.at, afterRestart.total], [false, first.opened.at, 3]);
    assert.deepEqual([records().length, bundles().length], [1, 1]);
  });

  it('two servers comparing a fresh sandbox at once keep one snapshot', async () => {
    const [a, b] = [await start(), await start()];
    const ref = await newSandbox(a);
    await run(a, ref, 'seq 1 20000 > numbers.txt');
    const before = records().length;
    const [x, y] = await Promise.all([compare(a, ref), compare(b, ref)]);
    assert.equal(x.opened.at, y.opened.at, 'both answer with the snapshot that won');
    assert.deepEqual([records().length, bundles().length], [before + 1, before + 1], 'the loser left nothing behind');
    assert.deepEqual(fs.readdirSync(snapshots).filter((n) => n.startsWith('.')), [], 'no draft record left');
  });

  it('a sandbox holding a secret gets no snapshot: the comparison names the file', async () => {
    const server = await start();
    const ref = await newSandbox(server);
    await run(server, ref, 'echo TOKEN=canary > .env.local');
    const before = [records().length, bundles().length];
    await rejectsWithCode(compare(server, ref), 'refused', { message: /\.env\.local/ });
    assert.deepEqual([records().length, bundles().length], before, 'nothing kept');
    for (const name of fs.readdirSync(snapshots)) assert.ok(!fs.readFileSync(path.join(snapshots, name)).includes('canary'), name);
  });

  it('a newer sandbox with the same name gets its own snapshot; deleting a sandbox removes its snapshot', async () => {
    const server = await start();
    const ref = await newSandbox(server, 'reused-name');
    await run(server, ref, 'echo old > old.txt');
    const old = await compare(server, ref);
    assert.equal(old.taken, true);
    const kept = new Map(fs.readdirSync(snapshots).map((n) => [n, fs.readFileSync(path.join(snapshots, n))]));
    await request(server, 'sandboxes/delete', { ref });
    assert.deepEqual([records().length, bundles().length], [kept.size / 2 - 1, kept.size / 2 - 1], 'deleted with its sandbox');

    // Deleted by something that does not know of snapshots (kubectl, another tool): the old one is still there.
    for (const [name, bytes] of kept) fs.writeFileSync(path.join(snapshots, name), bytes, { mode: 0o600 });
    const again = await newSandbox(server, 'reused-name');
    await run(server, again, 'echo new > new.txt');
    const fresh = await compare(server, again);
    assert.equal(fresh.taken, true, 'not the old sandbox’s snapshot');
    assert.deepEqual(fresh.changes, []);
    assert.equal(await read(server, again, 'workspace/new.txt'), 'new\n');
    await rejectsWithCode(read(server, again, 'workspace/old.txt'), 'not_found');
    assert.deepEqual([records().length, bundles().length], [kept.size / 2, kept.size / 2], 'the old one was replaced');
  });
});
