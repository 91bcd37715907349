// Sessions in a real VS Code: save a sandbox as r1 and r2, see them in the Sessions view, open r1
// in a new sandbox (and r2 in a kruntimes one, then compared with r2 through its gateway), export it
// as a bundle, inspect and hydrate that bundle, and refuse a secret.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, until } from './helpers';

const text = (s: string) => new TextEncoder().encode(s);
const sandboxUri = (key: string, p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: key, path: `/${p}` });

describe('sessions', () => {
  let sandbox: SandboxSummary;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'it-sessions-'));

  before(async () => {
    sandbox = await newLocalSandbox();
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, 'README.md'), text('first\n'));
    await vscode.workspace.fs.createDirectory(sandboxUri(sandbox.key, 'node_modules'));
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, 'node_modules/dep.js'), text('dep'));
  });

  it('saves a sandbox as r1 and r2 and shows them in the Sessions view', async () => {
    type Saved = { revision: { ref: { revision: string } }; workspace: { excludedEntries: { path: string }[] } };
    const r1 = await vscode.commands.executeCommand<Saved>('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-demo' });
    assert.equal(r1.revision.ref.revision, 'r1');
    assert.deepEqual(r1.workspace.excludedEntries.map((e) => e.path), ['node_modules/']);
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, 'README.md'), text('second\n'));
    const r2 = await vscode.commands.executeCommand<Saved>('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-demo', expectedRevision: 'r1' });
    assert.equal(r2.revision.ref.revision, 'r2');

    const { sessions } = await api();
    const [repository] = await sessions.getChildren();
    assert.equal(repository?.kind, 'repository');
    const session = (await sessions.getChildren(repository)).find((n) => n.kind === 'session' && n.session.sessionId === 'it-demo');
    assert.ok(session, 'the session is listed');
    const revisions = (await sessions.getChildren(session)).filter((n) => n.kind === 'revision');
    assert.deepEqual(
      revisions.map((n) => (n.kind === 'revision' ? n.revision.ref.revision : '')),
      ['r2', 'r1'],
    );
    assert.match(String(sessions.getTreeItem(revisions[0]!).description), /head/);
  });

  it('opens r1 in a new sandbox with r1 content', async () => {
    const opened = await vscode.commands.executeCommand<{ sandbox: SandboxSummary }>(
      'sandboxSessions.openRevisionInSandbox',
      { sessionId: 'it-demo', revision: 'r1' },
      { provider: 'local', runtime: 'process', open: false },
    );
    assert.notEqual(opened.sandbox.key, sandbox.key);
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(sandboxUri(opened.sandbox.key, 'README.md'))), 'first\n');
    const names = (await vscode.workspace.fs.readDirectory(sandboxUri(opened.sandbox.key, ''))).map(([n]) => n).sort();
    assert.deepEqual(names, ['README.md'], 'node_modules was never saved');
  });

  it('opens r2 in a new kruntimes sandbox (the cluster simulator) with r2 content', async () => {
    const opened = await vscode.commands.executeCommand<{ sandbox: SandboxSummary }>(
      'sandboxSessions.openRevisionInSandbox',
      { sessionId: 'it-demo', revision: 'r2' },
      { provider: 'kruntimes', context: 'simulator', namespace: 'default', runtime: 'bash', open: false },
    );
    assert.equal(opened.sandbox.ref.provider, 'kruntimes');
    assert.equal(opened.sandbox.phase, 'Ready');
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(sandboxUri(opened.sandbox.key, 'README.md'))), 'second\n');
    // What it changed since r2, read through its gateway (a cluster sandbox has no directory here).
    const { companion } = await api();
    const compare = () => companion.request('sessions/compareSandbox', { sandbox: opened.sandbox.ref, sessionId: 'it-demo', revision: 'r2' });
    assert.deepEqual([(await compare()).changes, (await compare()).unchanged], [[], 1]);
    await vscode.workspace.fs.writeFile(sandboxUri(opened.sandbox.key, 'cluster.txt'), text('made on the cluster\n'));
    assert.deepEqual((await compare()).changes, [{ path: 'cluster.txt', status: 'added' }]);
    const closed = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.closeSandbox', opened.sandbox.key);
    assert.equal(closed?.phase, 'Succeeded');
  });

  it('exports r1 as a bundle, inspects it and hydrates it to a folder', async () => {
    const bundle = path.join(work, 'it-demo-r1.tar.zst');
    const exported = await vscode.commands.executeCommand<{ path: string; digest: string }>('sandboxSessions.exportRevision', { sessionId: 'it-demo', revision: 'r1' }, bundle);
    assert.equal(exported.path, bundle);
    const inspected = await vscode.commands.executeCommand<{ report: string }>('sandboxSessions.inspectBundle', vscode.Uri.file(bundle), { show: false });
    assert.match(inspected.report, /valid Session Bundle v1/);
    assert.match(inspected.report, new RegExp(exported.digest));
    const dest = path.join(work, 'hydrated');
    await vscode.commands.executeCommand('sandboxSessions.hydrateBundle', vscode.Uri.file(bundle), dest);
    assert.equal(fs.readFileSync(path.join(dest, 'workspace', 'README.md'), 'utf8'), 'first\n');
    fs.writeFileSync(path.join(work, 'bad.tar.zst'), 'not a bundle');
    const bad = await vscode.commands.executeCommand<{ report: string }>('sandboxSessions.inspectBundle', vscode.Uri.file(path.join(work, 'bad.tar.zst')), { show: false });
    assert.match(bad.report, /rejected[\s\S]*integrity_mismatch/);
  });

  it('imports a bundle file as a revision of the session it was packed for: a new session, or the next revision', async () => {
    const { companion, sessions } = await api();
    // A bundle from elsewhere, for a session this repository does not have: it is created.
    const state = path.join(work, 'import-src', 'state');
    const ws = path.join(work, 'import-src', 'workspace');
    fs.mkdirSync(state, { recursive: true });
    fs.mkdirSync(ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'notes.md'), 'from elsewhere\n');
    const file = path.join(work, 'it-imported.tar.zst');
    await companion.request('bundles/pack', { stateRoot: state, workspaceRoot: ws, destination: file, sessionId: 'it-imported' });
    const created = await vscode.commands.executeCommand<{ revision: { ref: { sessionId: string; revision: string } } }>('sandboxSessions.importBundle', vscode.Uri.file(file), { expectedRevision: null });
    assert.deepEqual(created.revision.ref, { sessionId: 'it-imported', revision: 'r1' });
    const [repository] = await sessions.getChildren();
    assert.ok((await sessions.getChildren(repository)).some((n) => n.kind === 'session' && n.session.sessionId === 'it-imported'), 'the Sessions view lists it');
    const read = await companion.request('revisions/read', { sessionId: 'it-imported', revision: 'r1', path: 'workspace/notes.md', offset: 0, length: 1024 });
    assert.equal(Buffer.from(read.contents, 'base64').toString(), 'from elsewhere\n');
    // Again, on its head: the next revision. On a head that moved: refused, nothing committed.
    const next = await vscode.commands.executeCommand<{ revision: { ref: { revision: string } } }>('sandboxSessions.importBundle', vscode.Uri.file(file), { expectedRevision: 'r1' });
    assert.equal(next.revision.ref.revision, 'r2');
    await assert.rejects(Promise.resolve(vscode.commands.executeCommand('sandboxSessions.importBundle', vscode.Uri.file(file), { expectedRevision: 'r1' })), /revision|head/i);
    const { revisions } = await companion.request('sessions/revisions', { sessionId: 'it-imported' });
    assert.equal(revisions.length, 2);
    await vscode.commands.executeCommand('notifications.clearAll');
  });

  it('refuses to save a sandbox holding a secret file, naming it, and commits nothing', async () => {
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, '.env'), text('API_KEY=canary'));
    await assert.rejects(
      Promise.resolve(vscode.commands.executeCommand('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-demo', expectedRevision: 'r2' })),
      (e: unknown) => {
        assert.match((e as Error).message, /\.env/);
        return true;
      },
    );
    const { revisions } = await (await api()).companion.request('sessions/revisions', { sessionId: 'it-demo' });
    assert.equal(revisions.length, 2);
  });

  it('forks r1 and shows the lineage', async () => {
    const fork = await vscode.commands.executeCommand<{ target: { sessionId: string; revision: string } }>(
      'sandboxSessions.forkSession',
      { sessionId: 'it-demo', revision: 'r1' },
      { targetSessionId: 'it-demo-fork' },
    );
    assert.deepEqual(fork.target, { sessionId: 'it-demo-fork', revision: 'r1' });
    const { sessions } = await api();
    const [repository] = await sessions.getChildren();
    const forked = (await sessions.getChildren(repository)).find((n) => n.kind === 'session' && n.session.sessionId === 'it-demo-fork');
    assert.ok(forked);
    const lineage = (await sessions.getChildren(forked)).filter((n) => n.kind === 'lineage').map((n) => (n.kind === 'lineage' ? n.text : ''));
    assert.deepEqual(lineage, ['forked from it-demo@r1']);
    const source = (await sessions.getChildren(repository)).find((n) => n.kind === 'session' && n.session.sessionId === 'it-demo');
    const forks = (await sessions.getChildren(source)).filter((n) => n.kind === 'lineage').map((n) => (n.kind === 'lineage' ? n.text : ''));
    assert.deepEqual(forks, ['fork it-demo-fork (from r1)']);
  });

  it('runs an activation with the test agent and commits a new revision', async () => {
    const result = await vscode.commands.executeCommand<{ commit: string; revision?: string; outcome?: { status: string } }>(
      'sandboxSessions.runActivation',
      'it-agent',
      { message: 'hello from VS Code', provider: 'local', runtime: 'process' },
    );
    assert.equal(result.commit, 'committed', JSON.stringify(result));
    assert.equal(result.revision, 'r1');
    assert.equal(result.outcome?.status, 'completed');
  });

  it('browses revisions read-only and diffs a sandbox file against r1', async () => {
    const rev = (revision: string, p: string) => vscode.Uri.from({ scheme: 'sandbox-revision', authority: `${revision}.it-demo`, path: `/${p}` });
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(rev('r1', 'workspace/README.md'))), 'first\n');
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(rev('r2', 'workspace/README.md'))), 'second\n');
    assert.deepEqual((await vscode.workspace.fs.readDirectory(rev('r1', 'workspace'))).map(([n]) => n), ['README.md']);
    await assert.rejects(Promise.resolve(vscode.workspace.fs.writeFile(rev('r1', 'workspace/README.md'), text('x'))), (e: unknown) => (e as vscode.FileSystemError).code === 'NoPermissions');
    await vscode.commands.executeCommand('sandboxSessions.compareWithRevision', sandboxUri(sandbox.key, 'README.md'), { sessionId: 'it-demo', revision: 'r1' });
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    assert.ok(input instanceof vscode.TabInputTextDiff, 'a diff editor is open');
    assert.equal(input.original.toString(), rev('r1', 'workspace/README.md').toString());
    assert.equal(input.modified.toString(), sandboxUri(sandbox.key, 'README.md').toString());
    await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
  });

  it('indexes a 5,000-file revision once and serves later listings and reads from the index', async () => {
    const big = await newLocalSandbox();
    const client = await (await api()).registry.connection(big.key)!.client();
    const made = await client.runCommand({ shell: 'mkdir -p d && cd d && for i in $(seq 1 5000); do echo "file $i" > f$i.txt; done' });
    assert.equal(made.exitCode, 0);
    await vscode.commands.executeCommand('sandboxSessions.saveSandboxAsRevision', big.key, { sessionId: 'it-big' });
    const { companion } = await api();
    const before = (await companion.request('revisions/list', { sessionId: 'it-demo', revision: 'r1', path: '' })).indexBuilds;
    const rev = (p: string) => vscode.Uri.from({ scheme: 'sandbox-revision', authority: 'r1.it-big', path: `/${p}` });
    const listing = await vscode.workspace.fs.readDirectory(rev('workspace/d'));
    assert.equal(listing.length, 5000);
    for (const i of [1, 777, 5000]) assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(rev(`workspace/d/f${i}.txt`))), `file ${i}\n`);
    await Promise.all(listing.slice(0, 200).map(([name]) => vscode.workspace.fs.stat(rev(`workspace/d/${name}`))));
    const after = (await companion.request('revisions/list', { sessionId: 'it-big', revision: 'r1', path: 'workspace' })).indexBuilds;
    assert.equal(after - before, 1, 'the bundle was decompressed once');
  });

  it('cancelling a save or an open leaves no temp files, no revision and no half-filled sandbox', async () => {
    const { companion, registry } = await api();
    const busy = await newLocalSandbox();
    const client = await registry.connection(busy.key)!.client();
    const made = await client.runCommand({ shell: 'for i in $(seq 1 400); do head -c 65536 /dev/urandom > f$i.bin; done' });
    assert.equal(made.exitCode, 0);
    const temps = () => fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-save-') || n.startsWith('sandbox-sessions-open-')).sort();
    const before = temps();
    const cancelAfterFirstProgress = async (run: (token: vscode.CancellationToken, onProgress: () => void) => Promise<unknown>) => {
      const source = new vscode.CancellationTokenSource();
      await assert.rejects(
        run(source.token, () => source.cancel()),
        (e: unknown) => (e as { code?: string }).code === 'cancelled',
      );
    };
    await cancelAfterFirstProgress((token, onProgress) =>
      companion.request('sessions/saveSandbox', { sandbox: busy.ref, sessionId: 'it-cancelled' }, { token, onProgress }),
    );
    await assert.rejects(companion.request('sessions/revisions', { sessionId: 'it-cancelled' }), (e: unknown) => (e as { code?: string }).code === 'not_found');
    const sandboxesBefore = (await companion.request('sandboxes/list', { provider: 'local' })).sandboxes.filter((x) => x.phase === 'Ready').length;
    await cancelAfterFirstProgress((token, onProgress) =>
      companion.request('sessions/openInSandbox', { sessionId: 'it-demo', revision: 'r1', sandbox: { provider: 'local', runtime: 'process' } }, { token, onProgress }),
    );
    const sandboxesAfter = (await companion.request('sandboxes/list', { provider: 'local' })).sandboxes.filter((x) => x.phase === 'Ready').length;
    assert.equal(sandboxesAfter, sandboxesBefore, 'no extra Ready sandbox survives a cancelled open');
    // The client rejects at once; the server finishes unwinding (and removes its temp folders) right after.
    await until(() => JSON.stringify(temps()) === JSON.stringify(before), 'the temp folders to be gone', 10_000);
  });
});
