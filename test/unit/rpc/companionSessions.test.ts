// The companion server's bundle and session methods over real stdio: pack/inspect/hydrate with
// the workspace policy, progress in order ending at 100%, a cancelled pack leaving nothing
// behind, and sandboxes saved as compare-and-set revisions and reopened in fresh sandboxes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CancellationTokenSource, ResponseError } from 'vscode-jsonrpc/node';
import type { ProgressValue } from '../../../protocol/companion';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';

describe('companion server: bundles and sessions', function () {
  this.timeout(90_000);
  let work: string;
  let server: CompanionProcess;
  const progress: { token: string | number; value: ProgressValue }[] = [];

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-sessions-'));
    server = spawnCompanion({
      SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state'),
      SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository'),
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

  const request = <T>(method: string, params: unknown, token?: CancellationTokenSource) =>
    (token ? server.connection.sendRequest(method, params, token.token) : server.connection.sendRequest(method, params)) as Promise<T>;
  const rejectsWith = async (p: Promise<unknown>, code: string, cause?: string, message?: RegExp) => {
    await assert.rejects(p, (e: unknown) => {
      assert.ok(e instanceof ResponseError, String(e));
      const data = e.data as { code: string; cause?: string };
      assert.equal(data.code, code, e.message);
      if (cause) assert.equal(data.cause, cause, e.message);
      if (message) assert.match(e.message, message);
      return true;
    });
  };

  const tree = (name: string, files: Record<string, string>) => {
    const root = path.join(work, name);
    for (const [rel, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), content);
    }
    fs.mkdirSync(root, { recursive: true });
    return root;
  };

  describe('bundles', () => {
    let bundle: string;

    it('packs with the workspace policy and reports progress in order, ending at 100%', async () => {
      const state = tree('s1/state', { 'notes.md': 'state' });
      const ws = tree('s1/workspace', { 'src/app.js': 'console.log(1)\n', 'node_modules/x/index.js': 'x', 'debug.log': 'noise' });
      bundle = path.join(work, 's1.tar.zst');
      const result = await request<{ artifact: { archiveDigest: string; entryCount: number }; workspace: { excludedEntries: { path: string }[] } }>(
        'bundles/pack',
        { stateRoot: state, workspaceRoot: ws, destination: bundle, sessionId: 'session-1', progressToken: 'pack-1' },
      );
      assert.match(result.artifact.archiveDigest, /^sha256:[0-9a-f]{64}$/);
      assert.deepEqual(result.workspace.excludedEntries.map((e) => e.path).sort(), ['debug.log', 'node_modules/']);
      const mine = progress.filter((p) => p.token === 'pack-1').map((p) => p.value);
      assert.deepEqual(mine.at(-1), { phase: 'done', percent: 100 });
      assert.ok(mine.slice(0, -1).every((v) => (v.percent ?? 0) < 100), 'only the last one says 100%');
    });

    it('inspects and hydrates the bundle; a wrong session or a corrupt file is refused with its code', async () => {
      const inspection = await request<{ manifest: { envelope: { sessionId: string } }; entryCount: number }>('bundles/inspect', { path: bundle });
      assert.equal(inspection.manifest.envelope.sessionId, 'session-1');
      const dest = path.join(work, 'restored');
      await request('bundles/hydrate', { path: bundle, sessionId: 'session-1', destination: dest });
      assert.equal(fs.readFileSync(path.join(dest, 'workspace/src/app.js'), 'utf8'), 'console.log(1)\n');
      assert.equal(fs.existsSync(path.join(dest, 'workspace/node_modules')), false);
      await rejectsWith(request('bundles/hydrate', { path: bundle, sessionId: 'other', destination: path.join(work, 'r2') }), 'refused', 'identity_mismatch');
      const bad = path.join(work, 'bad.tar.zst');
      fs.writeFileSync(bad, Buffer.concat([fs.readFileSync(bundle).subarray(0, 100), Buffer.from('garbage')]));
      await rejectsWith(request('bundles/inspect', { path: bad }), 'refused', 'integrity_mismatch');
      await rejectsWith(request('bundles/inspect', { path: 'relative.tar.zst' }), 'invalid_params');
    });

    it('refuses to pack a secret file, naming it', async () => {
      const ws = tree('s2/workspace', { 'app.py': 'print(1)', '.env': 'API_KEY=canary' });
      const state = tree('s2/state', {});
      await rejectsWith(
        request('bundles/pack', { stateRoot: state, workspaceRoot: ws, destination: path.join(work, 's2.tar.zst'), sessionId: 's2' }),
        'refused',
        'policy_rejected',
        /\.env/,
      );
      assert.equal(fs.existsSync(path.join(work, 's2.tar.zst')), false);
    });

    it('cancels a long pack and leaves no temp files and no bundle', async () => {
      const ws = path.join(work, 'big/workspace');
      fs.mkdirSync(ws, { recursive: true });
      const block = Buffer.alloc(1 << 20);
      for (let i = 0; i < block.length; i += 4) block.writeUInt32LE((i * 2654435761) >>> 0, i);
      for (let i = 0; i < 150; i++) fs.writeFileSync(path.join(ws, `f${i}.bin`), block.map((b) => b ^ i));
      const state = tree('big/state', {});
      const outDir = path.join(work, 'out');
      fs.mkdirSync(outDir);
      const snapshotsBefore = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-snapshot-')).length;
      const cancel = new CancellationTokenSource();
      const seen = new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (progress.some((p) => p.token === 'pack-big')) {
            clearInterval(timer);
            resolve();
          }
        }, 10);
      });
      const pending = request('bundles/pack', { stateRoot: state, workspaceRoot: ws, destination: path.join(outDir, 'big.tar.zst'), sessionId: 'big', progressToken: 'pack-big' }, cancel);
      await seen;
      cancel.cancel();
      await rejectsWith(pending, 'cancelled');
      assert.deepEqual(fs.readdirSync(outDir), [], 'no bundle and no temp file');
      const snapshotsAfter = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-snapshot-')).length;
      assert.ok(snapshotsAfter <= snapshotsBefore, 'the snapshot was removed');
      // The server is still there for the next request.
      await request('sessions/list', {});
    });
  });

  describe('sessions from sandboxes', () => {
    let sandbox: SandboxSummary;
    let client: GatewayClient;

    before(async () => {
      ({ sandbox } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default' } }));
      const c = await request<SandboxConnection>('sandboxes/open', { ref: sandbox.ref });
      client = new GatewayClient({ endpoint: c.endpoint, token: c.token });
      await client.writeFile('README.md', Buffer.from('first\n'));
      await client.runCommand({ shell: 'mkdir -p .git node_modules/dep && echo x > .git/HEAD && echo y > node_modules/dep/a.js && printf "#!/bin/sh\\n" > run.sh && chmod +x run.sh' });
    });
    after(() => client?.close());

    it('saves a sandbox as r1 and r2 (compare-and-set), refusing a stale writer', async () => {
      const r1 = await request<{ revision: { ref: { revision: string } }; workspace: { excludedEntries: { path: string }[] } }>('sessions/saveSandbox', {
        sandbox: sandbox.ref,
        sessionId: 'demo',
        progressToken: 'save-1',
      });
      assert.equal(r1.revision.ref.revision, 'r1');
      assert.deepEqual(r1.workspace.excludedEntries.map((e) => e.path), ['.git/', 'node_modules/'], 'the exclusions are listed');
      // The sandbox's Run says which revision it is now, for every client (VS Code's comparison, the MCP server).
      const markOf = async () => (await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: sandbox.ref })).sandbox.sessionRevision;
      const afterR1 = await markOf();
      assert.deepEqual([afterR1?.sessionId, afterR1?.revision, afterR1?.how], ['demo', 'r1', 'saved']);
      await client.writeFile('README.md', Buffer.from('second\n'));
      const r2 = await request<{ revision: { ref: { revision: string } } }>('sessions/saveSandbox', { sandbox: sandbox.ref, sessionId: 'demo', expectedRevision: 'r1' });
      assert.equal(r2.revision.ref.revision, 'r2');
      const afterR2 = await markOf();
      assert.deepEqual([afterR2?.revision, afterR2?.how], ['r2', 'saved']);
      assert.ok(Date.parse(afterR2?.at ?? '') >= Date.parse(afterR1?.at ?? ''));
      await rejectsWith(request('sessions/saveSandbox', { sandbox: sandbox.ref, sessionId: 'demo', expectedRevision: 'r1' }), 'conflict', 'revision_conflict');
      assert.equal((await markOf())?.revision, 'r2', 'a refused save leaves the mark alone');
      const { sessions, repository } = await request<{ sessions: { sessionId: string; head: { revision: string } }[]; repository: { kind: string; location: string } }>(
        'sessions/list',
        {},
      );
      assert.deepEqual(sessions.map((s) => [s.sessionId, s.head.revision]), [['demo', 'r2']]);
      assert.deepEqual(repository, { kind: 'file', location: path.join(work, 'repository') });
      const { revisions } = await request<{ revisions: { ref: { revision: string } }[] }>('sessions/revisions', { sessionId: 'demo' });
      assert.deepEqual(revisions.map((r) => r.ref.revision), ['r2', 'r1']);
    });

    it('browses revisions straight from their bundles, indexing each bundle once', async () => {
      type Listing = { entries: { name: string; directory: boolean; size: number }[]; indexBuilds: number };
      const root = await request<Listing>('revisions/list', { sessionId: 'demo', revision: 'r1', path: '' });
      assert.deepEqual(root.entries.map((e) => e.name), ['state-identity.json', 'state', 'workspace']);
      const ws = await request<Listing>('revisions/list', { sessionId: 'demo', revision: 'r1', path: 'workspace' });
      assert.deepEqual(ws.entries.map((e) => [e.name, e.directory]), [['README.md', false], ['run.sh', false]]);
      const read = async (revision: string) =>
        Buffer.from((await request<{ contents: string }>('revisions/read', { sessionId: 'demo', revision, path: 'workspace/README.md' })).contents, 'base64').toString();
      assert.equal(await read('r1'), 'first\n');
      assert.equal(await read('r2'), 'second\n');
      const part = await request<{ contents: string; size: number; truncated: boolean }>('revisions/read', { sessionId: 'demo', revision: 'r2', path: 'workspace/README.md', offset: 2, length: 3 });
      assert.deepEqual([Buffer.from(part.contents, 'base64').toString(), part.size, part.truncated], ['con', 7, true]);
      for (let i = 0; i < 5; i++) await read('r1');
      const again = await request<Listing>('revisions/list', { sessionId: 'demo', revision: 'r2', path: 'workspace' });
      assert.equal(again.indexBuilds - root.indexBuilds, 1, 'r1 and r2 were each decompressed once');
      await rejectsWith(request('revisions/read', { sessionId: 'demo', revision: 'r1', path: 'workspace/missing.txt' }), 'not_found');
    });

    it('exports a revision as a bundle file that inspects clean against its digest', async () => {
      const destination = path.join(work, 'demo-r1.tar.zst');
      const out = await request<{ path: string; digest: string; bytes: number; revision: { revision: string } }>('sessions/export', {
        sessionId: 'demo',
        revision: 'r1',
        destination,
      });
      assert.equal(out.revision.revision, 'r1');
      assert.equal(fs.statSync(destination).size, out.bytes);
      const inspection = await request<{ manifest: { envelope: { sessionId: string } } }>('bundles/inspect', { path: destination, expectedArchiveDigest: out.digest });
      assert.equal(inspection.manifest.envelope.sessionId, 'demo');
      await rejectsWith(request('sessions/export', { sessionId: 'demo', revision: 'r1', destination }), 'conflict');
    });

    it('imports a bundle file as a revision of its own session: checked byte for byte, compare-and-set, nothing kept of a refused one', async () => {
      // A bundle from elsewhere, packed for session "imported".
      const file = path.join(work, 'to-import.tar.zst');
      const packed = await request<{ artifact: { archiveDigest: string } }>('bundles/pack', {
        stateRoot: tree('imp/state', { 'notes.md': 'state' }),
        workspaceRoot: tree('imp/workspace', { 'README.md': 'imported\n' }),
        destination: file,
        sessionId: 'imported',
      });
      const created = await request<{ revision: { ref: { sessionId: string; revision: string } }; bundle: { digest: string } }>('sessions/import', { path: file, progressToken: 'import-1' });
      assert.deepEqual(created.revision.ref, { sessionId: 'imported', revision: 'r1' });
      assert.equal(created.bundle.digest, packed.artifact.archiveDigest);
      assert.ok(progress.some((p) => p.token === 'import-1' && p.value.phase === 'committing'), 'progress says what it does');
      const read = await request<{ contents: string }>('revisions/read', { sessionId: 'imported', revision: 'r1', path: 'workspace/README.md' });
      assert.equal(Buffer.from(read.contents, 'base64').toString(), 'imported\n');
      // The session exists now: a second import is a compare-and-set commit on its head, or refused.
      await rejectsWith(request('sessions/import', { path: file }), 'conflict', 'session_already_exists');
      await rejectsWith(request('sessions/import', { path: file, expectedRevision: 'r2' }), 'conflict', 'revision_conflict');
      const next = await request<{ revision: { ref: { revision: string } } }>('sessions/import', { path: file, expectedRevision: 'r1' });
      assert.equal(next.revision.ref.revision, 'r2');
      // A corrupt copy (one byte flipped) is refused by the byte-for-byte check; the head does not move.
      const corrupt = path.join(work, 'corrupt.tar.zst');
      const bytes = fs.readFileSync(file);
      bytes.writeUInt8(bytes.readUInt8(bytes.length - 8) ^ 0xff, bytes.length - 8);
      fs.writeFileSync(corrupt, bytes);
      await rejectsWith(request('sessions/import', { path: corrupt, expectedRevision: 'r2' }), 'refused');
      const { revisions } = await request<{ revisions: { ref: { revision: string }; isHead: boolean }[] }>('sessions/revisions', { sessionId: 'imported' });
      assert.deepEqual(revisions.filter((r) => r.isHead).map((r) => r.ref.revision), ['r2']);
      await rejectsWith(request('sessions/import', { path: 'relative.tar.zst' }), 'invalid_params');
    });

    it('opens r1 in a fresh sandbox with r1 content and without the excluded trees', async () => {
      const opened = await request<{ sandbox: SandboxSummary; revision: { revision: string } }>('sessions/openInSandbox', {
        sessionId: 'demo',
        revision: 'r1',
        sandbox: { provider: 'local', runtime: 'process', namespace: 'default' },
      });
      assert.equal(opened.revision.revision, 'r1');
      assert.notEqual(opened.sandbox.key, sandbox.key);
      assert.deepEqual([opened.sandbox.sessionRevision?.sessionId, opened.sandbox.sessionRevision?.revision, opened.sandbox.sessionRevision?.how], ['demo', 'r1', 'opened']);
      const c = await request<SandboxConnection>('sandboxes/open', { ref: opened.sandbox.ref });
      const fresh = new GatewayClient({ endpoint: c.endpoint, token: c.token });
      try {
        assert.equal((await fresh.read('README.md')).contents.toString(), 'first\n');
        const names = (await fresh.listPage({})).entries.map((e) => e.path).sort();
        assert.deepEqual(names, ['README.md', 'run.sh']);
        const exec = await fresh.runCommand({ argv: ['sh', '-c', 'test -x run.sh && echo executable'] });
        assert.equal(exec.stdout.toString(), 'executable\n');
      } finally {
        await fresh.close();
      }
    });

    it('compares a sandbox with a revision: exactly what a save would change, byte for byte and by mode', async () => {
      type Changes = { against: { revision: string }; changes: { path: string; status: string }[]; total: number; unchanged: number; workspace: { excludedEntries: { path: string }[] } };
      const compare = (revision: string) => request<Changes>('sessions/compareSandbox', { sandbox: sandbox.ref, sessionId: 'demo', revision, progressToken: `cmp-${revision}` });
      const same = await compare('r2');
      assert.deepEqual([same.changes, same.total, same.unchanged], [[], 0, 2]);
      assert.deepEqual((await compare('r1')).changes, [{ path: 'README.md', status: 'modified' }]);
      // The same size with other bytes; a mode change; a new file; a removed one; a rewrite with the same bytes;
      // and what the snapshot policy leaves out (not a change: a save would not include it either).
      const edit = await client.runCommand({
        shell:
          'printf "SECOND\\n" > README.md && chmod -x run.sh && mkdir -p src && echo "export {}" > src/new.ts && ' +
          'printf "#!/bin/sh\\n" > kept.sh && echo z > node_modules/dep/b.js && echo h > .git/ORIG_HEAD',
      });
      assert.equal(edit.exitCode, 0);
      const saved = await request<{ revision: { ref: { revision: string } } }>('sessions/saveSandbox', { sandbox: sandbox.ref, sessionId: 'compared' });
      assert.equal(saved.revision.ref.revision, 'r1');
      const more = await client.runCommand({ shell: 'rm kept.sh && printf "SECOND\\n" > README.md && printf "more\\n" >> src/new.ts' });
      assert.equal(more.exitCode, 0);
      const changed = await compare('r2');
      assert.deepEqual(changed.changes, [
        { path: 'README.md', status: 'modified' },
        { path: 'run.sh', status: 'modified' },
        { path: 'src/new.ts', status: 'added' },
      ]);
      assert.deepEqual([changed.total, changed.unchanged], [3, 0]);
      assert.deepEqual(changed.workspace.excludedEntries.map((e) => e.path), ['.git/', 'node_modules/']);
      const sinceOwn = await request<Changes>('sessions/compareSandbox', { sandbox: sandbox.ref, sessionId: 'compared', revision: 'r1' });
      assert.deepEqual(sinceOwn.changes, [
        { path: 'kept.sh', status: 'deleted' },
        { path: 'src/new.ts', status: 'modified' },
      ]);
      assert.equal(sinceOwn.unchanged, 2, 'README.md rewritten with the same bytes, and run.sh');
      assert.ok(progress.some((p) => p.token === 'cmp-r2' && p.value.phase === 'comparing'), 'progress names the comparing phase');
      await rejectsWith(request('sessions/compareSandbox', { sandbox: sandbox.ref, sessionId: 'demo', revision: 'r9' }), 'not_found');
      // A sandbox that cannot be reached (gone): refused, and no scratch folder made for it.
      await assert.rejects(request('sessions/compareSandbox', { sandbox: { ...sandbox.ref, name: 'no-such-sandbox' }, sessionId: 'compared', revision: 'r1' }));
      const leftovers = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-changes-'));
      assert.deepEqual(leftovers, [], 'no scratch left behind');
    });

    it('refuses to save a sandbox holding a secret file, naming it, and commits nothing', async () => {
      await client.writeFile('.env.local', Buffer.from('TOKEN=canary'));
      await rejectsWith(request('sessions/saveSandbox', { sandbox: sandbox.ref, sessionId: 'demo', expectedRevision: 'r2' }), 'refused', 'policy_rejected', /\.env\.local/);
      const { revisions } = await request<{ revisions: unknown[] }>('sessions/revisions', { sessionId: 'demo' });
      assert.equal(revisions.length, 2);
    });

    it('saves a sandbox holding a symbolic link as the file it names (the gateway path, as on a cluster)', async () => {
      const { sandbox: linked } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default' } });
      const c = await request<SandboxConnection>('sandboxes/open', { ref: linked.ref });
      const gw = new GatewayClient({ endpoint: c.endpoint, token: c.token });
      try {
        const made = await gw.runCommand({ shell: 'printf "linked\\n" > target.txt && ln -s target.txt latest' });
        assert.equal(made.exitCode, 0);
      } finally {
        await gw.close();
      }
      const saved = await request<{ revision: { ref: { revision: string } } }>('sessions/saveSandbox', { sandbox: linked.ref, sessionId: 'linked' });
      assert.equal(saved.revision.ref.revision, 'r1');
      const ws = await request<{ entries: { name: string; directory: boolean }[] }>('revisions/list', { sessionId: 'linked', revision: 'r1', path: 'workspace' });
      assert.deepEqual(ws.entries.map((e) => e.name), ['latest', 'target.txt']);
      const latest = await request<{ contents: string }>('revisions/read', { sessionId: 'linked', revision: 'r1', path: 'workspace/latest' });
      assert.equal(Buffer.from(latest.contents, 'base64').toString(), 'linked\n');
      // Compared the same way (from a copy through the gateway): the link is the file it names.
      type Changes = { changes: { path: string; status: string }[]; unchanged: number };
      const compare = () => request<Changes>('sessions/compareSandbox', { sandbox: linked.ref, sessionId: 'linked', revision: 'r1' });
      assert.deepEqual(await compare(), { ...(await compare()), changes: [], unchanged: 2 });
      const gw2 = new GatewayClient({ endpoint: c.endpoint, token: c.token });
      try {
        assert.equal((await gw2.runCommand({ shell: 'printf "LINKED\\n" > target.txt' })).exitCode, 0);
      } finally {
        await gw2.close();
      }
      assert.deepEqual((await compare()).changes, [
        { path: 'latest', status: 'modified' },
        { path: 'target.txt', status: 'modified' },
      ]);
      assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-changes-')), [], 'the copy is gone');
      // A link out of the workspace is refused, as a save refuses it: nothing outside is read or compared.
      const gw3 = new GatewayClient({ endpoint: c.endpoint, token: c.token });
      try {
        assert.equal((await gw3.runCommand({ shell: 'ln -s /etc/hostname outside' })).exitCode, 0);
      } finally {
        await gw3.close();
      }
      await assert.rejects(compare(), /must not escape the session workspace/);
      assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-changes-')), [], 'nothing left behind');
    });

    it('answers not_found for an unknown session', async () => {
      await rejectsWith(request('sessions/openInSandbox', { sessionId: 'nope', sandbox: { provider: 'local', runtime: 'process' } }), 'not_found', 'session_not_found');
    });
  });
});
