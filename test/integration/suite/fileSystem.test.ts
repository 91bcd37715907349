// The `sandbox:` file system inside a real VS Code, against the real companion server and
// local gateway: round trips, error mapping, files larger than one gateway call, read-only
// while Finalizing, and no stat storm on a 2,000-file folder.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, gatewayRequests, newLocalSandbox, until } from './helpers';

const text = (s: string) => new TextEncoder().encode(s);
const read = async (uri: vscode.Uri) => new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));

describe('sandbox: file system', () => {
  let sandbox: SandboxSummary;
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });

  before(async () => {
    sandbox = await newLocalSandbox();
  });

  it('writes, stats, reads, lists, renames and deletes', async () => {
    await vscode.workspace.fs.createDirectory(uri('src'));
    await vscode.workspace.fs.writeFile(uri('src/hello.txt'), text('hello sandbox\n'));
    assert.equal(await read(uri('src/hello.txt')), 'hello sandbox\n');
    const stat = await vscode.workspace.fs.stat(uri('src/hello.txt'));
    assert.equal(stat.type, vscode.FileType.File);
    assert.equal(stat.size, 14);
    assert.deepEqual(await vscode.workspace.fs.readDirectory(uri('src')), [['hello.txt', vscode.FileType.File]]);
    await vscode.workspace.fs.rename(uri('src/hello.txt'), uri('src/renamed.txt'));
    assert.equal(await read(uri('src/renamed.txt')), 'hello sandbox\n');
    await assert.rejects(Promise.resolve(vscode.workspace.fs.stat(uri('src/hello.txt'))), (e: unknown) => (e as vscode.FileSystemError).code === 'FileNotFound');
    await vscode.workspace.fs.delete(uri('src'), { recursive: true });
    await assert.rejects(Promise.resolve(vscode.workspace.fs.stat(uri('src'))), (e: unknown) => (e as vscode.FileSystemError).code === 'FileNotFound');
  });

  it('copies a folder inside the sandbox with one command, not a read and a write per file; refuses what a copy must not do', async () => {
    const exported = await api();
    const client = await exported.registry.connection(sandbox.key)!.client();
    const made = await client.runCommand({ shell: 'mkdir -p tree/sub && for i in $(seq 1 50); do echo "file $i" > tree/sub/f$i.txt; done && printf "#!/bin/sh\\n" > tree/run.sh && chmod +x tree/run.sh' });
    assert.equal(made.exitCode, 0, made.stderr.toString());
    // What the Sandbox terminal does after each command: tell the file system where it ran.
    await exported.fileSystem.commandRanIn(sandbox.key, '');
    const before = await gatewayRequests(sandbox.ref.name);
    await vscode.workspace.fs.copy(uri('tree'), uri('tree copy'));
    const after = await gatewayRequests(sandbox.ref.name);
    const delta = (kind: string) => (after[kind] ?? 0) - (before[kind] ?? 0);
    assert.equal(delta('read'), 0, 'no file was read through the window');
    // Writes are operations too: file by file this would be 52 of them (2 folders, 51 files); here it is the one `cp`.
    assert.equal(delta('execute'), 1, `operations at the gateway: ${delta('execute')}`);
    assert.equal(await read(uri('tree copy/sub/f50.txt')), 'file 50\n');
    assert.deepEqual((await vscode.workspace.fs.readDirectory(uri('tree copy/sub'))).length, 50);
    const mode = await client.runCommand({ shell: 'test -x "tree copy/run.sh" && echo executable' });
    assert.equal(mode.stdout.toString(), 'executable\n', 'modes kept');
    // One file; an existing destination only with overwrite (a folder replaced, not copied into).
    await vscode.workspace.fs.copy(uri('tree/run.sh'), uri('run-copy.sh'));
    assert.equal(await read(uri('run-copy.sh')), '#!/bin/sh\n');
    await assert.rejects(Promise.resolve(vscode.workspace.fs.copy(uri('tree'), uri('tree copy'))), (e: unknown) => (e as vscode.FileSystemError).code === 'FileExists');
    await vscode.workspace.fs.writeFile(uri('tree/sub/f1.txt'), text('changed\n'));
    await vscode.workspace.fs.copy(uri('tree'), uri('tree copy'), { overwrite: true });
    assert.equal(await read(uri('tree copy/sub/f1.txt')), 'changed\n');
    assert.deepEqual(await client.runCommand({ argv: ['test', '-e', 'tree copy/tree'] }).then((r) => r.exitCode), 1, 'replaced, not copied into');
    // Not into itself; the source must exist.
    // (VS Code refuses that one itself before asking; the provider refuses it too, for any other caller.)
    await assert.rejects(Promise.resolve(vscode.workspace.fs.copy(uri('tree'), uri('tree/sub/again'))), /parent of target/);
    await assert.rejects(exported.fileSystem.copy(uri('tree'), uri('tree/sub/again'), { overwrite: false }), (e: unknown) => (e as vscode.FileSystemError).code === 'NoPermissions');
    await assert.rejects(Promise.resolve(vscode.workspace.fs.copy(uri('no-such'), uri('x'))), (e: unknown) => (e as vscode.FileSystemError).code === 'FileNotFound');
    await vscode.workspace.fs.delete(uri('tree copy'), { recursive: true });
    await vscode.workspace.fs.delete(uri('tree'), { recursive: true });
    await vscode.workspace.fs.delete(uri('run-copy.sh'));
  });

  it('copies from one sandbox to another file by file', async () => {
    const other = await newLocalSandbox();
    const otherUri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: other.key, path: `/${p}` });
    await vscode.workspace.fs.createDirectory(uri('across'));
    await vscode.workspace.fs.writeFile(uri('across/a.txt'), text('a\n'));
    await vscode.workspace.fs.copy(uri('across'), otherUri('across'));
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(otherUri('across/a.txt'))), 'a\n');
    await vscode.workspace.fs.delete(uri('across'), { recursive: true });
    await (await api()).companion.request('sandboxes/terminate', { ref: other.ref, mode: 'Immediate', wait: true });
  });

  it('moves mtime forward on every write, even when the size stays the same', async () => {
    await vscode.workspace.fs.writeFile(uri('m.txt'), text('aaaa'));
    const first = await vscode.workspace.fs.stat(uri('m.txt'));
    await vscode.workspace.fs.writeFile(uri('m.txt'), text('bbbb'));
    const second = await vscode.workspace.fs.stat(uri('m.txt'));
    assert.ok(second.mtime > first.mtime, `${second.mtime} > ${first.mtime}`);
    assert.equal(await read(uri('m.txt')), 'bbbb');
  });

  it('maps errors to FileSystemError codes', async () => {
    const code = async (p: Thenable<unknown>) => {
      try {
        await p;
      } catch (e) {
        return (e as vscode.FileSystemError).code;
      }
      return 'no error';
    };
    assert.equal(await code(vscode.workspace.fs.readFile(uri('missing.txt'))), 'FileNotFound');
    await vscode.workspace.fs.writeFile(uri('a.txt'), text('a'));
    await vscode.workspace.fs.writeFile(uri('b.txt'), text('b'));
    assert.equal(await code(vscode.workspace.fs.rename(uri('a.txt'), uri('b.txt'), { overwrite: false })), 'FileExists');
    await vscode.workspace.fs.rename(uri('a.txt'), uri('b.txt'), { overwrite: true });
    assert.equal(await read(uri('b.txt')), 'a');
  });

  it('reads and writes a file larger than one gateway call (2 MB)', async () => {
    const big = new Uint8Array(2 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >> 9)) & 0xff;
    await vscode.workspace.fs.writeFile(uri('big.bin'), big);
    const back = await vscode.workspace.fs.readFile(uri('big.bin'));
    assert.equal(back.length, big.length);
    assert.ok(Buffer.from(back).equals(Buffer.from(big)), 'same bytes');
    const names = (await vscode.workspace.fs.readDirectory(uri())).map(([n]) => n);
    assert.ok(!names.some((n) => n.includes('sandbox-upload')), `no part files left: ${names.join(', ')}`);
  });

  it('serves a 2,000-file folder with fewer than 3 listing calls and no per-entry stats', async () => {
    const exported = await api();
    const connection = exported.registry.connection(sandbox.key)!;
    const client = await connection.client();
    const made = await client.runCommand({ shell: 'mkdir many && cd many && for i in $(seq 1 2000); do : > f$i.txt; done' });
    assert.equal(made.exitCode, 0, made.stderr.toString());
    // What the Sandbox terminal does after each command: tell the file system where it ran.
    await exported.fileSystem.commandRanIn(sandbox.key, '');
    const files = exported.fileSystem.filesOf(sandbox.key);
    const before = { ...files.counters };
    const atGatewayBefore = await gatewayRequests(sandbox.ref.name);
    const entries = await vscode.workspace.fs.readDirectory(uri('many'));
    assert.equal(entries.length, 2000);
    // What the explorer and other extensions do next: stat each entry, and probe for config files.
    await Promise.all(entries.map(([name]) => vscode.workspace.fs.stat(uri(`many/${name}`))));
    for (const probe of ['.vscode', '.git', 'node_modules', 'package.json']) {
      await Promise.resolve(vscode.workspace.fs.stat(uri(`many/${probe}`))).catch(() => undefined);
    }
    const listCalls = files.counters.listPages - before.listPages;
    assert.ok(listCalls < 3, `listing calls: ${listCalls}`);
    assert.equal(files.counters.reads - before.reads, 0, 'no per-entry reads');
    // The same, counted by the gateway: the listing pages of `many`, and nothing per entry.
    const atGatewayAfter = await gatewayRequests(sandbox.ref.name);
    const delta = (kind: string) => (atGatewayAfter[kind] ?? 0) - (atGatewayBefore[kind] ?? 0);
    assert.ok(delta('list') < 3, `listing calls at the gateway: ${delta('list')}`);
    assert.equal(delta('read'), 0, 'no reads at the gateway');
    assert.equal(delta('status'), 0, 'no status calls at the gateway');
  });

  it('refuses a save over a change the window has not seen, and keeps both versions', async () => {
    const exported = await api();
    await vscode.workspace.fs.writeFile(uri('conflict.txt'), text('aaaa\n'));
    // A document with no editor tab: the window does not follow the sandbox, so nothing announces the change below
    // (as for a process in a remote sandbox that rewrites a file while the user types).
    const doc = await vscode.workspace.openTextDocument(uri('conflict.txt'));
    assert.ok(!exported.live.followed().includes(sandbox.key));
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, new vscode.Range(0, 0, 0, 4), 'mine');
    assert.ok(await vscode.workspace.applyEdit(edit));
    const client = await exported.registry.connection(sandbox.key)!.client();
    const inSandbox = async () => (await client.runCommand({ argv: ['cat', 'conflict.txt'] })).stdout.toString('utf8');
    // Same size: VS Code's own check (it compares sizes) cannot see it.
    assert.equal((await client.runCommand({ shell: 'printf "bbbb\\n" > conflict.txt' })).exitCode, 0);

    assert.equal(await doc.save(), false, 'the save was refused');
    assert.equal(await inSandbox(), 'bbbb\n', "the other writer's version is still in the sandbox");
    assert.ok(doc.isDirty);
    assert.equal(doc.getText(), 'mine\n', "the user's version is still in the editor");

    // Retry (and auto save) is refused too, until the user decides: Overwrite (the notice's button) saves the user's version.
    assert.equal(await doc.save(), false);
    assert.equal(await inSandbox(), 'bbbb\n');
    await vscode.commands.executeCommand('sandboxSessions.overwriteChangedFile', doc.uri);
    assert.equal(await inSandbox(), 'mine\n');
    assert.ok(!doc.isDirty);
  });

  it("refuses the save even after another reader read the changed file while the editor had unsaved edits", async () => {
    const exported = await api();
    await vscode.workspace.fs.writeFile(uri('reread.txt'), text('aaaa\n'));
    const doc = await vscode.workspace.openTextDocument(uri('reread.txt'));
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, new vscode.Range(0, 0, 0, 4), 'mine');
    assert.ok(await vscode.workspace.applyEdit(edit));
    const client = await exported.registry.connection(sandbox.key)!.client();
    assert.equal((await client.runCommand({ shell: 'printf "bbbb\\n" > reread.txt' })).exitCode, 0);
    // Compare with Saved, a chat's context or another extension reads the file through the file system meanwhile.
    assert.equal(await read(uri('reread.txt')), 'bbbb\n');
    assert.equal(await doc.save(), false, 'the editor still builds on aaaa: the save was refused');
    assert.equal((await client.runCommand({ argv: ['cat', 'reread.txt'] })).stdout.toString('utf8'), 'bbbb\n');
    await vscode.commands.executeCommand('sandboxSessions.takeSandboxVersion', doc.uri);
    assert.equal(doc.getText(), 'bbbb\n');
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it("compares a refused save in a diff whose title bar overwrites, or takes the sandbox's version", async () => {
    const exported = await api();
    await vscode.workspace.fs.writeFile(uri('compared.txt'), text('aaaa\n'));
    const doc = await vscode.workspace.openTextDocument(uri('compared.txt'));
    const client = await exported.registry.connection(sandbox.key)!.client();
    const inSandbox = async () => (await client.runCommand({ argv: ['cat', 'compared.txt'] })).stdout.toString('utf8');
    const conflictTabs = () =>
      vscode.window.tabGroups.all
        .flatMap((g) => g.tabs)
        .filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.original.scheme === 'sandbox-conflict');
    /** Edits the document, lets another writer change the file at the same size, and has the save refused. */
    const refusedSave = async (mine: string, theirs: string) => {
      const edit = new vscode.WorkspaceEdit();
      edit.replace(doc.uri, new vscode.Range(0, 0, 0, 4), mine);
      assert.ok(await vscode.workspace.applyEdit(edit));
      assert.equal((await client.runCommand({ shell: `printf "${theirs}\\n" > compared.txt` })).exitCode, 0);
      assert.equal(await doc.save(), false, 'the save was refused');
    };

    // Compare (the notice's button): the sandbox's version on the left, the unsaved editor on the right.
    await refusedSave('mine', 'bbbb');
    await vscode.commands.executeCommand('sandboxSessions.compareChangedFile', doc.uri);
    const diff = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    assert.ok(diff instanceof vscode.TabInputTextDiff, 'the active editor is a diff');
    assert.equal(diff.original.scheme, 'sandbox-conflict');
    assert.equal(diff.modified.toString(), doc.uri.toString());
    assert.equal((await vscode.workspace.openTextDocument(diff.original)).getText(), 'bbbb\n');
    // A save while the diff is on screen is refused too (nothing is lost while the person reads).
    assert.equal(await doc.save(), false);
    assert.equal(await inSandbox(), 'bbbb\n');

    // Take the Sandbox's Version, from the diff's title bar (VS Code passes the file): the editor has theirs, the diff
    // closes, and the conflict is over: the next edit saves.
    await vscode.commands.executeCommand('sandboxSessions.takeSandboxVersion', doc.uri);
    assert.equal(doc.getText(), 'bbbb\n');
    assert.ok(!doc.isDirty);
    assert.deepEqual(conflictTabs(), []);
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, new vscode.Range(0, 0, 0, 4), 'next');
    assert.ok(await vscode.workspace.applyEdit(edit));
    assert.equal(await doc.save(), true);
    assert.equal(await inSandbox(), 'next\n');

    // Overwrite, from the palette (no argument: the active diff's file): the sandbox gets the editor's version.
    await refusedSave('ours', 'cccc');
    await vscode.commands.executeCommand('sandboxSessions.compareChangedFile', doc.uri);
    await vscode.commands.executeCommand('sandboxSessions.overwriteChangedFile');
    assert.equal(await inSandbox(), 'ours\n');
    assert.ok(!doc.isDirty);
    assert.deepEqual(conflictTabs(), []);
  });

  it('is read-only while the sandbox is Finalizing (Drain), then refuses writes', async () => {
    const exported = await api();
    const other = await newLocalSandbox();
    const otherUri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: other.key, path: `/${p}` });
    await vscode.workspace.fs.writeFile(otherUri('keep.txt'), text('keep'));
    const client = await exported.registry.connection(other.key)!.client();
    // The command runs until the test lets it end, through a file outside the sandbox (it takes no writes while
    // Finalizing); a process-backend sandbox sees the host's folders.
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'drain-release-'));
    const release = path.join(outside, 'release');
    const running = client.runCommand({ shell: `: > drain-started; while [ ! -e '${release}' ]; do sleep 0.05; done` });
    await until(() => client.read('drain-started').then(() => true, () => false), 'the command to start');
    await exported.companion.request('sandboxes/terminate', { ref: other.ref, mode: 'Drain', wait: false });
    await until(() => exported.registry.summary(other.key)?.phase === 'Finalizing', 'the Finalizing phase');
    const stat = await vscode.workspace.fs.stat(otherUri('keep.txt'));
    assert.equal(stat.permissions, vscode.FilePermission.Readonly);
    await assert.rejects(Promise.resolve(vscode.workspace.fs.writeFile(otherUri('keep.txt'), text('changed'))), (e: unknown) => {
      assert.equal((e as vscode.FileSystemError).code, 'NoPermissions');
      assert.match((e as Error).message, /closing \(Drain\)/);
      return true;
    });
    fs.writeFileSync(release, '');
    assert.equal((await running).exitCode, 0, 'the accepted command still completes');
    fs.rmSync(outside, { recursive: true, force: true });
  });
});
