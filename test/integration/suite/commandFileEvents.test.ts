// Files that Sandbox terminal commands create or delete reach VS Code as file events, so the
// Explorer shows them without Refresh (issue 24, defect 6). The Explorer adds a row only for a
// "created" event of a file in a folder it shows and drops one only for "deleted"; a watcher
// over the sandbox sees the same events the Explorer does.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, until } from './helpers';

describe('file events after Sandbox terminal commands', () => {
  let sandbox: SandboxSummary;
  let terminal: vscode.Terminal;
  let watcher: vscode.FileSystemWatcher;
  const created: string[] = [];
  const deleted: string[] = [];
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
  const transcript = async () => plain((await api()).terminalTranscript(terminal) ?? '');
  const names = async (p = '') => (await vscode.workspace.fs.readDirectory(uri(p))).map(([n]) => n).sort();
  /** Types a command and waits for the prompt after it (in `cwd`). */
  const run = async (line: string, cwd = '') => {
    const before = (await transcript()).length;
    terminal.sendText(line, true);
    await until(async () => (await transcript()).slice(before).endsWith(`${sandbox.ref.name}:/${cwd}$ `), `the prompt after ${line}`);
  };

  before(async () => {
    sandbox = await newLocalSandbox();
    await vscode.workspace.fs.createDirectory(uri('sub'));
    await vscode.workspace.fs.writeFile(uri('old.txt'), new TextEncoder().encode('old'));
    // What the Explorer does when it shows the folder and expands `sub`.
    assert.deepEqual(await names(), ['old.txt', 'sub']);
    assert.deepEqual(await names('sub'), []);
    watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(uri(), '**'));
    watcher.onDidCreate((u) => u.authority === sandbox.key && created.push(u.path));
    watcher.onDidDelete((u) => u.authority === sandbox.key && deleted.push(u.path));
    const t = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(t);
    terminal = t;
    await until(async () => (await transcript()).endsWith(`${sandbox.ref.name}:/$ `), 'the prompt');
  });
  after(() => {
    watcher?.dispose();
    terminal?.dispose();
  });

  it('announces a file a command created at the workspace root, and lists it at once', async () => {
    await run('touch made-by-terminal.txt');
    await until(() => created.includes('/made-by-terminal.txt'), 'a created event for /made-by-terminal.txt', 5000);
    assert.deepEqual(await names(), ['made-by-terminal.txt', 'old.txt', 'sub']);
  });

  it('announces files created in the working directory and deleted elsewhere', async () => {
    await run('cd sub', 'sub');
    await run('mkdir -p nested && touch here.txt && rm ../old.txt', 'sub');
    await until(() => created.includes('/sub/here.txt') && created.includes('/sub/nested'), 'created events in sub', 5000);
    await until(() => deleted.includes('/old.txt'), 'a deleted event for /old.txt', 5000);
    assert.deepEqual(await names('sub'), ['here.txt', 'nested']);
    assert.deepEqual(await names(), ['made-by-terminal.txt', 'sub']);
    // Only what changed is announced as created: the files that were already there are not.
    assert.equal(created.filter((p) => p === '/made-by-terminal.txt').length, 1);
  });
});
