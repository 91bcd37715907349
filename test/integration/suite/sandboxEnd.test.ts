// The end of a sandbox as the window shows it, and the names it uses (issue 24, defects 4 and 9),
// in a real VS Code: after Drain an open editor refuses typing, changes are refused and reads fail
// in words (never a class name), the Sandbox terminal says the sandbox is closed; a deleted
// sandbox's folder says it was deleted; messages name sandbox paths from the sandbox's root, never
// the host folder of a local sandbox; a revision opened read-only is named after its session and
// revision.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, until } from './helpers';

const text = (s: string) => new TextEncoder().encode(s);
const sandboxUri = (key: string, p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: key, path: `/${p}` });

/** The message of a rejected promise (VS Code hands FileSystemErrors back to extensions as Errors). */
async function failure(p: Thenable<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  }
  throw new Error('expected a failure');
}

describe('the end of a sandbox, and its names', () => {
  after(() => vscode.workspace.getConfiguration('files').update('autoSave', undefined, vscode.ConfigurationTarget.Global));

  it('after Drain: the open editor refuses typing, a save is refused in words, the terminal says the sandbox is closed', async () => {
    const sandbox = await newLocalSandbox();
    const file = sandboxUri(sandbox.key, 'notes.txt');
    await vscode.workspace.fs.writeFile(file, text('kept\n'));
    const doc = await vscode.workspace.openTextDocument(file);
    await vscode.window.showTextDocument(doc);
    const terminal = await vscode.commands.executeCommand<vscode.Terminal>('sandboxSessions.openTerminal', sandbox.key);
    const screen = async () => plain((await api()).terminalTranscript(terminal) ?? '');
    await until(async () => (await screen()).includes(`${sandbox.ref.name}:/$ `), 'the prompt');
    const client = await (await api()).registry.connection(sandbox.key)!.client();
    await client.runCommand({ shell: 'printf never > never-read.txt' });

    const closed = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.closeSandbox', sandbox.key);
    assert.equal(closed?.phase, 'Succeeded');

    // The file system says read-only; VS Code applies it to the open editor: typing changes nothing.
    assert.equal((await vscode.workspace.fs.stat(file)).permissions, vscode.FilePermission.Readonly);
    await vscode.window.showTextDocument(doc);
    await until(async () => {
      await vscode.commands.executeCommand('type', { text: 'x' });
      const refused = doc.getText() === 'kept\n';
      if (!refused) await vscode.commands.executeCommand('undo');
      return refused;
    }, 'the editor of the closed sandbox to refuse typing');
    assert.equal(doc.isDirty, false);

    // A change is refused, and a read fails, in words that say why and what to do.
    const write = await failure(vscode.workspace.fs.writeFile(file, text('changed\n')));
    assert.match(write, new RegExp(`${sandbox.ref.name} is closed \\(Succeeded\\): its files are read-only`));
    assert.match(write, /Download its artifacts, or open a new sandbox/);
    // The open file reads as this window last had it; one it never read cannot be read any more.
    assert.equal(new TextDecoder().decode(await vscode.workspace.fs.readFile(file)), 'kept\n');
    const read = await failure(vscode.workspace.fs.readFile(sandboxUri(sandbox.key, 'never-read.txt')));
    assert.match(read, new RegExp(`${sandbox.ref.name} is closed \\(Succeeded\\)`));
    for (const message of [write, read]) assert.doesNotMatch(message, /CompanionRequestError|GatewayError|not ready|\{"/);

    const before = (await screen()).length;
    terminal.sendText('ls', true);
    // The next prompt: on a line after the command's (the typed line is redrawn with the prompt first).
    await until(async () => (await screen()).slice(before).split('\n').slice(1).join('\n').includes(`${sandbox.ref.name}:/$ `), 'the next prompt');
    const said = (await screen()).slice(before);
    assert.match(said, new RegExp(`${sandbox.ref.name} is closed \\(Succeeded\\): its files are read-only and it runs no commands`));
    assert.doesNotMatch(said, /not ready/i);
    terminal.dispose();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('File: Revert of an editor with unsaved edits of a drained sandbox restores its saved text, read-only', async () => {
    // The browser-served VS Code saves after 1 s by default (files.autoSave: afterDelay); the edit must
    // still be unsaved when the sandbox closes, as with the desktop's default (off).
    await vscode.workspace.getConfiguration('files').update('autoSave', 'off', vscode.ConfigurationTarget.Global);
    const sandbox = await newLocalSandbox();
    const file = sandboxUri(sandbox.key, 'revert-me.txt');
    await vscode.workspace.fs.writeFile(file, text('saved\n'));
    const doc = await vscode.workspace.openTextDocument(file);
    const editor = await vscode.window.showTextDocument(doc);
    assert.ok(await editor.edit((e) => e.insert(new vscode.Position(1, 0), 'unsaved\n')), 'the edit applies while the sandbox is Ready');
    assert.equal(doc.isDirty, true);

    const closed = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.closeSandbox', sandbox.key);
    assert.equal(closed?.phase, 'Succeeded');
    assert.equal((await vscode.workspace.fs.stat(file)).permissions, vscode.FilePermission.Readonly);

    // VS Code re-reads the file; a failing read ended in "Illegal state: service accessor is only valid…".
    await vscode.window.showTextDocument(doc);
    assert.equal(vscode.window.activeTextEditor?.document, doc);
    await vscode.commands.executeCommand('workbench.action.files.revert');
    assert.equal(doc.getText(), 'saved\n');
    assert.equal(doc.isDirty, false);
    // Still read-only: typing changes nothing.
    await until(async () => {
      await vscode.commands.executeCommand('type', { text: 'x' });
      const refused = doc.getText() === 'saved\n';
      if (!refused) await vscode.commands.executeCommand('undo');
      return refused;
    }, 'the reverted editor to refuse typing');
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('says a deleted sandbox was deleted when its folder is read', async () => {
    const sandbox = await newLocalSandbox();
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, 'a.txt'), text('a'));
    const { companion } = await api();
    await companion.request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Immediate', wait: true });
    await companion.request('sandboxes/delete', { ref: sandbox.ref });
    const { registry } = await api();
    await until(() => registry.summary(sandbox.key) === undefined, 'the window to hear that the sandbox was deleted');
    const message = await failure(vscode.workspace.fs.readDirectory(sandboxUri(sandbox.key, 'sub')));
    assert.match(message, new RegExp(`${sandbox.ref.name} was deleted: its files and terminal are gone\\. Remove its folder from the workspace`));
    assert.doesNotMatch(message, /CompanionRequestError|not_found|\{"/);
  });

  it('names paths from the sandbox root in messages, never the host folder of a local sandbox', async () => {
    const sandbox = await newLocalSandbox();
    await vscode.workspace.fs.createDirectory(sandboxUri(sandbox.key, 'gone'));
    // What the window's gateway client is told (the words the terminal, tasks and errors pass on).
    const client = await (await api()).registry.connection(sandbox.key)!.client();
    const messages = [
      await failure(client.read('gone/x.txt')),
      await failure(client.deleteFile('gone/x.txt')),
      await failure(client.writeFile('missing/deeper/x.txt', text('x'), { createParents: false })),
    ];
    const stateDir = process.env.SANDBOX_SESSIONS_STATE_DIR ?? '';
    assert.ok(stateDir !== '');
    for (const message of messages) {
      assert.ok(!message.includes(stateDir), `the message names the host folder: ${message}`);
      assert.doesNotMatch(message, /\/runs\/[^/]+\/workspace/);
    }
    assert.match(messages[0]!, /open \/gone\/x\.txt: no such file or directory/);
    assert.match(messages[2]!, /lstat \/missing: no such file or directory/);
  });

  it('names a revision opened read-only `<session> @ <revision> (read-only)`', async () => {
    const sandbox = await newLocalSandbox();
    await vscode.workspace.fs.writeFile(sandboxUri(sandbox.key, 'README.md'), text('r1\n'));
    await vscode.commands.executeCommand('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-names' });
    const file = await vscode.commands.executeCommand<vscode.Uri>('sandboxSessions.browseRevision', { sessionId: 'it-names', revision: 'r1' }, { open: false });
    assert.ok(file, 'a workspace file for the window');
    // VS Code titles a window after its workspace file, and names the folder as the file says.
    assert.equal(file.path.split('/').pop(), 'it-names @ r1 (read-only).code-workspace');
    const workspace = JSON.parse(new TextDecoder().decode(await vscode.workspace.fs.readFile(file))) as { folders: { uri: string; name: string }[] };
    assert.deepEqual(workspace.folders.map((f) => f.name), ['it-names @ r1 (read-only)']);
    assert.match(workspace.folders[0]!.uri, /^sandbox-revision:\/\//);
  });
});
