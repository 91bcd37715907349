// A stopped local gateway daemon in a real VS Code (issue 24, defect 5): the window notices within
// a couple of seconds (the status bar says the gateway stopped), and the next terminal command
// starts the daemon again and runs — it does not wait on a dead port nor fail with the internal
// URL. Runs as a person would meet it: a Sandbox terminal and an editor open on the sandbox.
import assert from 'node:assert/strict';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { api, newLocalSandbox, plain, until } from './helpers';

describe('local gateway outage', () => {
  let sandbox: SandboxSummary;
  let terminal: vscode.Terminal;
  const transcript = async () => plain((await api()).terminalTranscript(terminal) ?? '');
  const statusText = async () => (await api()).statusBarText();
  const stateDir = () => {
    const dir = process.env.SANDBOX_SESSIONS_STATE_DIR;
    if (!dir) throw new Error('SANDBOX_SESSIONS_STATE_DIR is not set for the extension host');
    return dir;
  };

  before(async () => {
    sandbox = await newLocalSandbox();
    const uri = vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: '/notes.txt' });
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode('notes\n'));
    await vscode.window.showTextDocument(uri);
    const t = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(t);
    terminal = t;
    await until(async () => (await transcript()).endsWith(`${sandbox.ref.name}:/$ `), 'the prompt');
    const before = (await transcript()).length;
    terminal.sendText('echo warm', true);
    await until(async () => (await transcript()).slice(before).includes('\nwarm\r\n'), 'a first command');
    await until(async () => /: Ready/.test((await statusText()) ?? ''), 'the status bar saying Ready');
  });
  after(() => terminal?.dispose());

  it('shows the stopped daemon in the status bar within 2 s, and the next command starts it again and runs', async () => {
    assert.ok(path.isAbsolute(stateDir()));
    assert.ok(await stopGateway({ stateDir: stateDir() }), 'the daemon was running');
    const stoppedAt = Date.now();
    await until(async () => /gateway stopped/i.test((await statusText()) ?? ''), 'the status bar saying the gateway stopped', 2000);
    const noticedMs = Date.now() - stoppedAt;
    const before = (await transcript()).length;
    const started = Date.now();
    terminal.sendText('echo after-outage', true);
    await until(async () => (await transcript()).slice(before).includes('\nafter-outage\r\n'), 'the command after the outage', 10_000).catch(async (err: unknown) => {
      throw new Error(`${(err as Error).message}; the terminal shows:\n${(await transcript()).slice(before)}`);
    });
    const tookMs = Date.now() - started;
    const shown = (await transcript()).slice(before);
    assert.doesNotMatch(shown, /ECONNREFUSED|127\.0\.0\.1|http:\/\//, `no internal URL or socket error on the screen:\n${shown}`);
    await until(async () => /: Ready/.test((await statusText()) ?? ''), 'the status bar saying Ready again', 5000);
    console.log(`gateway outage: noticed after ${noticedMs} ms; the next command ran after ${tookMs} ms`);
  });
});
