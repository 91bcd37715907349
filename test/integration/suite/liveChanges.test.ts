// Live changes (issue 22): while a sandbox is shown in this window, what another client changes
// there — here the CLI (`sandbox exec`, a separate process on the window's state root, as an agent's
// MCP server would be) — reaches the Explorer and open editors as file events, without Refresh:
// VS Code never re-reads a file system by itself, so without them the new file and the changed
// contents would not appear at all. The same for a kruntimes sandbox, whose log is its Runtime Pod's. The window's own writes re-check nothing, and closing the
// sandbox's last editor stops following its log.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, EXTENSION_ID, newLocalSandbox, until } from './helpers';

const run = promisify(execFile);

describe('live changes of a sandbox made outside the window', () => {
  let sandbox: SandboxSummary;
  let watcher: vscode.FileSystemWatcher | undefined;
  const created: string[] = [];
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
  const names = async (p = '') => (await vscode.workspace.fs.readDirectory(uri(p))).map(([n]) => n).sort();
  after(async () => {
    watcher?.dispose();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('shows a file the CLI created and the contents it changed in an open editor, live', async () => {
    const a = await api();
    sandbox = await newLocalSandbox();
    const text = (s: string) => new TextEncoder().encode(s);
    await vscode.workspace.fs.createDirectory(uri('sub'));
    await vscode.workspace.fs.writeFile(uri('opened.txt'), text('original\n'));
    // What the Explorer does when it shows the folder and expands `sub`.
    assert.deepEqual(await names(), ['opened.txt', 'sub']);
    assert.deepEqual(await names('sub'), []);
    watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(uri(), '**'));
    watcher.onDidCreate((u) => u.authority === sandbox.key && created.push(u.path));

    const editor = await vscode.window.showTextDocument(uri('opened.txt'));
    assert.equal(editor.document.getText(), 'original\n');
    await until(() => a.live.followed().includes(sandbox.key), 'the window to follow the sandbox of the open editor');
    const feed = a.live.feed(sandbox.key);
    assert.ok(feed);

    // The window's own write is its own: its audit line is heard and skipped.
    const own = feed.counters.own;
    const foreign = feed.counters.foreign;
    await vscode.workspace.fs.writeFile(uri('own.txt'), text('mine\n'));
    await until(() => feed.counters.own > own, "the audit line of the window's own write");
    assert.equal(feed.counters.foreign, foreign, 'no re-check for its own write');

    // Another process changes the sandbox: the CLI, on the window's state root.
    const extension = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(extension);
    const cli = path.join(extension.extensionPath, 'dist', 'server.js');
    const result = await run(process.execPath, [cli, 'sandbox', 'exec', sandbox.ref.name, '--', 'sh', '-c', 'echo x > sub/new.txt; echo changed > opened.txt'], {
      env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
    });
    const changedAt = Date.now();
    assert.equal(result.stderr, '');

    // No Refresh, no re-open: the events alone bring them (within ~2 s; generous for a loaded machine).
    await until(() => created.includes('/sub/new.txt'), 'a created event for /sub/new.txt', 5000);
    await until(() => editor.document.getText() === 'changed\n', 'the open editor to show the changed contents', 5000);
    const latency = Date.now() - changedAt;
    console.log(`live changes: the editor showed the CLI's change ${latency} ms after the command returned`);
    assert.deepEqual(await names('sub'), ['new.txt']);
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(uri('sub/new.txt'))), 'x\n');
    assert.ok(feed.counters.foreign > foreign, "the CLI's command was heard as another client's");
    assert.equal(editor.document.isDirty, false);

    // The sandbox's last editor closes: the window stops following its log.
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await until(() => !a.live.followed().includes(sandbox.key), 'the window to stop following once no editor shows the sandbox');
    assert.equal(feed.active, false);
  });

  it('shows what a command still running writes in a local sandbox (its listed folders are watched), without Refresh', async function () {
    this.timeout(60_000);
    const a = await api();
    const local = await newLocalSandbox();
    const at = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: local.key, path: `/${p}` });
    await vscode.workspace.fs.createDirectory(at('out'));
    await vscode.workspace.fs.writeFile(at('build.log'), new TextEncoder().encode('started\n'));
    // What the Explorer lists: the root and the expanded `out`.
    await vscode.workspace.fs.readDirectory(at());
    assert.deepEqual((await vscode.workspace.fs.readDirectory(at('out'))).map(([n]) => n), []);
    const seen: string[] = [];
    const events = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(at(), '**'));
    events.onDidCreate((u) => u.authority === local.key && seen.push(u.path));
    const editor = await vscode.window.showTextDocument(at('build.log'));
    await until(() => a.live.followed().includes(local.key), 'the window to follow the sandbox of the open editor');

    // A command that writes and goes on running (as a build or a dev server does): no audit line until it ends.
    const extension = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(extension);
    const cli = path.join(extension.extensionPath, 'dist', 'server.js');
    const script = 'sleep 1; echo built > out/app.js; echo done >> build.log; exec sleep 40';
    const running = spawn(process.execPath, [cli, 'sandbox', 'exec', local.ref.name, '--', 'sh', '-c', script], { env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' }, stdio: 'ignore' });
    let exited = false;
    running.once('exit', () => (exited = true));
    try {
      await until(() => seen.includes('/out/app.js'), 'a created event for /out/app.js', 15_000);
      await until(() => editor.document.getText() === 'started\ndone\n', 'the open editor to show the appended line', 15_000);
      assert.equal(exited, false, 'the command is still running: no operation had announced these changes');
      assert.deepEqual((await vscode.workspace.fs.readDirectory(at('out'))).map(([n]) => n), ['app.js']);
    } finally {
      events.dispose();
      running.kill('SIGINT');
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    }
  });

  it('shows live what another client changes in a kruntimes sandbox (its Runtime Pod log, through the Kubernetes API)', async () => {
    const a = await api();
    const made = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
      provider: 'kruntimes',
      context: 'simulator',
      namespace: 'default',
      runtime: 'bash',
      open: false,
    });
    assert.ok(made);
    sandbox = made;
    await vscode.workspace.fs.createDirectory(uri('sub'));
    await vscode.workspace.fs.writeFile(uri('opened.txt'), new TextEncoder().encode('original\n'));
    assert.deepEqual(await names(), ['opened.txt', 'sub']);
    assert.deepEqual(await names('sub'), []);
    created.length = 0;
    watcher?.dispose();
    watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(uri(), '**'));
    watcher.onDidCreate((u) => u.authority === sandbox.key && created.push(u.path));
    const editor = await vscode.window.showTextDocument(uri('opened.txt'));
    await until(() => a.live.followed().includes(sandbox.key), 'the window to follow the kruntimes sandbox of the open editor');

    // Another client of the gateway (not this window's connection): what an agent's MCP server does.
    const c = await a.companion.request('sandboxes/open', { ref: sandbox.ref });
    const other = new GatewayClient({ endpoint: c.endpoint, token: c.token, tls: c.tls });
    try {
      const out = await other.runCommand({ argv: ['sh', '-c', 'echo x > sub/new.txt; echo changed > opened.txt'] });
      assert.equal(out.exitCode, 0);
    } finally {
      await other.close();
    }
    const changedAt = Date.now();
    await until(() => created.includes('/sub/new.txt'), 'a created event for /sub/new.txt', 5000);
    await until(() => editor.document.getText() === 'changed\n', 'the open editor to show the changed contents', 5000);
    console.log(`live changes (kruntimes): the editor showed the change ${Date.now() - changedAt} ms after the command returned`);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await until(() => !a.live.followed().includes(sandbox.key), 'the window to stop following');
  });
});
