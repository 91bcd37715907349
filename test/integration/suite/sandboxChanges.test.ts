// What a sandbox changed since a revision, in a real VS Code: a save makes the saved revision the sandbox's
// baseline; while the sandbox is shown, its edits (the window's own writes and a command's) are listed as a save
// would see them, without Refresh; a change opens as a diff revision ↔ sandbox; another save empties the list;
// Compare Sandbox with Revision… picks another baseline; a revision opened in a new sandbox is that sandbox's
// baseline; Stop Comparing removes the entry. A sandbox another client (an agent, through the MCP server) opened
// from a revision is compared with it with no step here, and that client's later save moves the comparison on.
// A sandbox made from an image is compared with what it held when it was opened, until it is saved.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, until } from './helpers';

const text = (s: string) => new TextEncoder().encode(s);
type Api = Awaited<ReturnType<typeof api>>;
/** The revision a shown sandbox was last compared with (undefined: not compared, or since opened). */
const comparedWith = (a: Api, key: string) => {
  const result = a.changes.state(key)?.result;
  return result && 'against' in result ? result.against.revision : undefined;
};

describe('what a sandbox changed since a revision', () => {
  let sandbox: SandboxSummary;
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('lists what a save would change, live, and opens a change as a diff', async () => {
    const a = await api();
    sandbox = await newLocalSandbox();
    await vscode.workspace.fs.writeFile(uri('README.md'), text('first\n'));
    await vscode.workspace.fs.createDirectory(uri('src'));
    await vscode.workspace.fs.writeFile(uri('src/gone.ts'), text('export {};\n'));
    const saved = await vscode.commands.executeCommand<{ revision: { ref: { revision: string } } }>('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-changes' });
    assert.equal(saved.revision.ref.revision, 'r1');
    assert.equal(a.changes.compared().includes(sandbox.key), false, 'not shown in this window yet');

    // Shown (an editor of it is open): compared with r1, the baseline the save set.
    await vscode.window.showTextDocument(uri('README.md'));
    await until(() => a.changes.state(sandbox.key)?.result !== undefined, 'the first comparison');
    assert.deepEqual(a.changes.state(sandbox.key)?.result?.changes, []);
    assert.equal(a.changes.state(sandbox.key)?.result?.unchanged, 2);

    // The window's own writes and a command's, without Refresh.
    await vscode.workspace.fs.writeFile(uri('README.md'), text('FIRST\n'));
    await vscode.workspace.fs.delete(uri('src/gone.ts'));
    const connection = a.registry.connection(sandbox.key);
    assert.ok(connection);
    const made = await (await connection.client()).runCommand({ shell: 'echo new > added.txt' });
    assert.equal(made.exitCode, 0);
    await a.fileSystem.commandRanIn(sandbox.key, '');
    const expected = [
      { path: 'README.md', status: 'modified' },
      { path: 'added.txt', status: 'added' },
      { path: 'src/gone.ts', status: 'deleted' },
    ];
    await until(() => JSON.stringify(a.changes.state(sandbox.key)?.result?.changes) === JSON.stringify(expected), 'the three changes to be listed');
    assert.deepEqual(a.changes.status(uri('README.md')), { status: 'modified', baseline: a.changes.baseline(sandbox.key) });
    assert.deepEqual({ ...a.changes.baseline(sandbox.key), setAt: 0 }, { sessionId: 'it-changes', revision: 'r1', setAt: 0 });
    assert.equal(a.changes.status(uri('src/other.ts')), undefined);

    await vscode.commands.executeCommand('sandboxSessions.openSandboxChange', sandbox.key, 'README.md', 'modified');
    await until(() => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff, 'the diff');
    const diff = vscode.window.tabGroups.activeTabGroup.activeTab?.input as vscode.TabInputTextDiff;
    assert.deepEqual([diff.original.scheme, diff.original.path], ['sandbox-revision', '/workspace/README.md']);
    assert.equal(diff.modified.toString(), uri('README.md').toString());
    assert.equal((await vscode.workspace.openTextDocument(diff.original)).getText(), 'first\n', "r1's version");
  });

  it('a save moves the baseline on; Compare Sandbox with Revision… picks another; Stop Comparing ends it', async () => {
    const a = await api();
    const saved = await vscode.commands.executeCommand<{ revision: { ref: { revision: string } } }>('sandboxSessions.saveSandboxAsRevision', sandbox.key, {
      sessionId: 'it-changes',
      expectedRevision: 'r1',
    });
    assert.equal(saved.revision.ref.revision, 'r2');
    await until(() => comparedWith(a, sandbox.key) === 'r2', 'the comparison with r2');
    assert.deepEqual(a.changes.state(sandbox.key)?.result?.changes, []);

    // As from the Source Control entry's title menu, whose argument is the entry (its rootUri names the sandbox).
    const state = await vscode.commands.executeCommand<{ result?: { changes: unknown[] } }>('sandboxSessions.compareSandboxWithRevision', { rootUri: uri() }, {
      sessionId: 'it-changes',
      revision: 'r1',
    });
    assert.equal(state.result?.changes.length, 3, 'compared with r1 again, at once');

    await vscode.commands.executeCommand('sandboxSessions.stopComparingSandbox', sandbox.key);
    assert.equal(a.changes.compared().includes(sandbox.key), false);
    assert.equal(a.changes.baseline(sandbox.key), undefined);
  });

  it('names why a comparison is not possible: a secret file a save would refuse', async () => {
    const a = await api();
    await vscode.commands.executeCommand('sandboxSessions.compareSandboxWithRevision', sandbox.key, { sessionId: 'it-changes' });
    assert.equal(comparedWith(a, sandbox.key), 'r2', 'without a revision: the head');
    await vscode.workspace.fs.writeFile(uri('.env'), text('TOKEN=canary\n'));
    await until(() => a.changes.state(sandbox.key)?.error !== undefined, 'the refusal');
    assert.match(a.changes.state(sandbox.key)?.error ?? '', /a save would be refused.*\.env/);
    await vscode.workspace.fs.delete(uri('.env'));
    await until(() => a.changes.state(sandbox.key)?.result !== undefined, 'a comparison again once the secret is gone');
  });

  it('a revision opened in a new sandbox is that sandbox’s baseline', async () => {
    const a = await api();
    const opened = await vscode.commands.executeCommand<{ sandbox: SandboxSummary }>(
      'sandboxSessions.openRevisionInSandbox',
      { sessionId: 'it-changes', revision: 'r1' },
      { provider: 'local', runtime: 'process', open: false },
    );
    assert.deepEqual(
      { ...a.changes.baseline(opened.sandbox.key), setAt: 0 },
      { sessionId: 'it-changes', revision: 'r1', setAt: 0 },
    );
    await vscode.window.showTextDocument(vscode.Uri.from({ scheme: 'sandbox', authority: opened.sandbox.key, path: '/README.md' }));
    await until(() => a.changes.state(opened.sandbox.key)?.result !== undefined, 'the comparison of the new sandbox');
    assert.deepEqual(a.changes.state(opened.sandbox.key)?.result?.changes, []);
  });

  it('a sandbox another client opened from a revision is compared with it here, and that client’s save moves the comparison on', async () => {
    const a = await api();
    // As the MCP server's session_open_revision and session_save do it: the companion's own calls, no command here.
    const { companion } = a.registry;
    const opened = await companion.request('sessions/openInSandbox', { sessionId: 'it-changes', revision: 'r1', sandbox: { provider: 'local', runtime: 'process', namespace: 'default' } });
    const key = opened.sandbox.key;
    const theirs = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: key, path: `/${p}` });
    await vscode.window.showTextDocument(theirs('README.md'));
    await until(() => comparedWith(a, key) === 'r1', 'the comparison with the revision it was opened from');
    assert.deepEqual(a.changes.state(key)?.result?.changes, []);

    await vscode.workspace.fs.writeFile(theirs('README.md'), text('edited by the agent\n'));
    await until(() => a.changes.state(key)?.result?.changes.length === 1, 'the edit to be listed');
    const saved = await companion.request('sessions/saveSandbox', { sandbox: opened.sandbox.ref, sessionId: 'it-changes', expectedRevision: 'r2' });
    assert.equal(saved.revision.ref.revision, 'r3');
    await until(() => comparedWith(a, key) === 'r3', 'the comparison to move on to the revision the other client saved');
    assert.deepEqual(a.changes.state(key)?.result?.changes, []);

    // Stop Comparing holds over that mark; Compare with… picks another again.
    await vscode.commands.executeCommand('sandboxSessions.stopComparingSandbox', key);
    assert.equal(a.changes.compared().includes(key), false);
    assert.equal(a.changes.baseline(key), undefined);
  });

  it('a sandbox made from an image is compared with what it held when it was opened, until it is saved', async () => {
    const a = await api();
    const fresh = await newLocalSandbox();
    const own = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: fresh.key, path: `/${p}` });
    await vscode.workspace.fs.writeFile(own('README.md'), text('as opened\n'));
    await vscode.workspace.fs.writeFile(own('gone.txt'), text('bye\n'));
    await vscode.window.showTextDocument(own('README.md'));
    await until(() => a.changes.state(fresh.key)?.result !== undefined, 'the first comparison');
    const first = a.changes.state(fresh.key)?.result;
    assert.ok(first && 'opened' in first, JSON.stringify(first));
    assert.deepEqual([first.changes, first.unchanged], [[], 2]);
    assert.deepEqual(a.changes.baseline(fresh.key), { opened: true });

    await vscode.workspace.fs.writeFile(own('README.md'), text('edited\n'));
    await vscode.workspace.fs.writeFile(own('notes.md'), text('new\n'));
    await vscode.workspace.fs.delete(own('gone.txt'));
    const expected = [
      { path: 'README.md', status: 'modified' },
      { path: 'gone.txt', status: 'deleted' },
      { path: 'notes.md', status: 'added' },
    ];
    await until(() => JSON.stringify(a.changes.state(fresh.key)?.result?.changes) === JSON.stringify(expected), 'the three changes since opened');
    assert.deepEqual(a.changes.status(own('notes.md')), { status: 'added', baseline: { opened: true } });

    // A change opens as a diff with the file as it was when the sandbox was opened.
    await vscode.commands.executeCommand('sandboxSessions.openSandboxChange', fresh.key, 'README.md', 'modified');
    await until(() => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff, 'the diff');
    const diff = vscode.window.tabGroups.activeTabGroup.activeTab?.input as vscode.TabInputTextDiff;
    assert.deepEqual([diff.original.scheme, diff.original.path], ['sandbox-revision', '/workspace/README.md']);
    assert.equal((await vscode.workspace.openTextDocument(diff.original)).getText(), 'as opened\n');
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.joinPath(diff.original, '../gone.txt'))), 'bye\n', 'a deleted file as it was');

    // Stop Comparing ends it; Compare Sandbox Since Opened brings the same snapshot back (not a new one).
    await vscode.commands.executeCommand('sandboxSessions.stopComparingSandbox', fresh.key);
    assert.equal(a.changes.compared().includes(fresh.key), false);
    const back = await vscode.commands.executeCommand<{ result?: { opened?: { at: string }; taken?: boolean; total: number } }>('sandboxSessions.compareSandboxSinceOpened', fresh.key);
    assert.deepEqual([back.result?.opened?.at, back.result?.taken, back.result?.total], [first.opened.at, false, 3]);

    // A save makes the revision the baseline; Stop Comparing then shows nothing, not "since opened" again.
    await vscode.commands.executeCommand('sandboxSessions.saveSandboxAsRevision', fresh.key, { sessionId: 'it-opened' });
    await until(() => comparedWith(a, fresh.key) === 'r1', 'the comparison with the saved revision');
    assert.deepEqual(a.changes.state(fresh.key)?.result?.changes, []);
    await vscode.commands.executeCommand('sandboxSessions.stopComparingSandbox', fresh.key);
    assert.equal(a.changes.compared().includes(fresh.key), false);
    assert.equal(a.changes.baseline(fresh.key), undefined);
  });
});
