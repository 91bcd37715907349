// OpenSandbox in a real VS Code, against the OpenSandbox SIMULATOR that run.ts starts: set up as a
// person does (the domain setting, the API key through "Set OpenSandbox API Key…", kept in secret
// storage), New Sandbox → OpenSandbox, files through the sandbox: file system (what an opened
// folder uses), saving a file in an editor, and a command in the Sandbox terminal; the sandbox is
// gone from the OpenSandbox server once the sandbox is closed with Drain. "Set OpenSandbox Credential…" answered
// through the real quick pick and password box (the runner types: runnerBridge.ts) puts the value into the next
// sandbox's Credential Vault and into no log or setting.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, newLocalSandbox, plain, until, whenClosed } from './helpers';
import { openSandboxVault, typeIntoQuickInput } from './runnerBridge';

const DOMAIN = process.env.SANDBOX_SESSIONS_IT_OPENSANDBOX_DOMAIN ?? '';
const KEY = process.env.SANDBOX_SESSIONS_IT_OPENSANDBOX_KEY ?? '';

/** Ids of the sandboxes the OpenSandbox server has, as its lifecycle API lists them. */
async function openSandboxIds(): Promise<string[]> {
  const res = await fetch(`${DOMAIN}/v1/sandboxes?pageSize=200`, { headers: { 'OPEN-SANDBOX-API-KEY': KEY } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { items: { id: string }[] }).items.map((s) => s.id);
}

/** Processes of this machine whose command line is `command` (the simulator's sandboxes run here). */
function running(command: string): string[] {
  return fs.readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ') === command;
    } catch {
      return false; // gone meanwhile
    }
  });
}

/** How many sandboxes the OpenSandbox server has. */
async function openSandboxCount(): Promise<number> {
  return (await openSandboxIds()).length;
}

describe('OpenSandbox sandboxes in VS Code (simulator)', () => {
  let sandbox: SandboxSummary;
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
  const read = async (u: vscode.Uri) => new TextDecoder().decode(await vscode.workspace.fs.readFile(u));

  before(function () {
    if (!DOMAIN) this.skip(); // run.ts always starts the simulator; this guards a hand-made run
  });
  after(async () => {
    await vscode.workspace.getConfiguration('sandboxSessions.opensandbox').update('domain', undefined, vscode.ConfigurationTarget.Global);
  });

  it('is offered once the domain and API key are set, and New Sandbox → OpenSandbox creates a Ready sandbox there', async () => {
    const { companion } = await api();
    const before = await openSandboxCount();
    await vscode.workspace.getConfiguration('sandboxSessions.opensandbox').update('domain', DOMAIN, vscode.ConfigurationTarget.Global);
    assert.equal(await vscode.commands.executeCommand('sandboxSessions.setOpenSandboxApiKey', KEY), true);
    await until(async () => {
      const { providers } = await companion.request('providers/list', {});
      return providers.find((p) => p.kind === 'local')?.runtimes.find((r) => r.name === 'opensandbox')?.available === true;
    }, 'the opensandbox backend to be available');
    const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', { provider: 'local', runtime: 'opensandbox', open: false });
    assert.ok(created, 'New Sandbox returned the sandbox');
    sandbox = created;
    assert.equal(sandbox.phase, 'Ready');
    assert.equal(sandbox.runtime, 'opensandbox');
    assert.equal(await openSandboxCount(), before + 1, 'one more sandbox on the OpenSandbox server');
  });

  it('writes, lists and saves files through the sandbox: file system', async () => {
    await vscode.workspace.fs.createDirectory(uri('src'));
    await vscode.workspace.fs.writeFile(uri('src/hello.txt'), new TextEncoder().encode('hello opensandbox\n'));
    assert.deepEqual(await vscode.workspace.fs.readDirectory(uri('src')), [['hello.txt', vscode.FileType.File]]);
    const doc = await vscode.workspace.openTextDocument(uri('src/hello.txt'));
    const editor = await vscode.window.showTextDocument(doc);
    try {
      assert.ok(await editor.edit((b) => b.insert(doc.lineAt(doc.lineCount - 1).range.end, 'saved from the editor\n')));
      assert.equal(await doc.save(), true, 'the save succeeded');
    } finally {
      await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
    }
    assert.equal(await read(uri('src/hello.txt')), 'hello opensandbox\nsaved from the editor\n');
  });

  it('runs commands in a Sandbox terminal, in the sandbox', async () => {
    const exported = await api();
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(terminal, 'a terminal was opened');
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    try {
      await until(() => screen().includes(`${sandbox.ref.name}:/$ `), 'the prompt');
      terminal.sendText('cat src/hello.txt; pwd; echo made > src/made.txt; sh -c "exit 5"', true);
      await until(() => /\[exit 5\]/.test(screen()), 'the command to finish', 30_000);
      assert.match(screen(), /hello opensandbox\r\nsaved from the editor\r\n\/workspace\r\n/);
      assert.equal(await read(uri('src/made.txt')), 'made\n');
    } finally {
      terminal.dispose();
    }
  });

  it('Open Interactive Terminal: a real tty in the sandbox, Ctrl+C as a byte, the exit code closes the terminal', async () => {
    const exported = await api();
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openInteractiveTerminal', sandbox.key);
    assert.ok(terminal, 'an interactive terminal was opened');
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    const closed = whenClosed(terminal);
    try {
      terminal.show();
      await until(() => /[$#] $/m.test(screen()), 'the shell prompt', 30_000);
      terminal.sendText('cat src/made.txt; tty', true);
      await until(() => /made\r\n\/dev\/pts\/\d+/.test(screen()), 'a real tty in the sandbox', 30_000);
      terminal.sendText(`sh -c 'printf "sl%sping\\n" ee; exec sleep 60'`, true);
      await until(() => /^sleeping$/m.test(screen()), 'sleep to start', 30_000);
      terminal.sendText('\x03', false);
      await until(() => /\^C/.test(screen()), 'Ctrl+C to reach the program', 15_000);
      terminal.sendText('echo "rc=$?"; exit 4', true);
      const ended = await closed;
      assert.equal(ended.exitStatus?.code, 4, screen());
      assert.match(screen(), /rc=130/);
    } finally {
      terminal.dispose();
    }
  });

  it('closing an interactive terminal ends its program (a reloading window only lets go of it: e2e openSandboxFlow)', async () => {
    const exported = await api();
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openInteractiveTerminal', sandbox.key);
    assert.ok(terminal, 'an interactive terminal was opened');
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    const marker = `sleep ${31_000 + Math.floor(Math.random() * 1000)}`;
    try {
      terminal.show();
      await until(() => /[$#] $/m.test(screen()), 'the shell prompt', 30_000);
      terminal.sendText(`exec ${marker}`, true);
      await until(() => running(marker).length > 0, `${marker} to run in the sandbox`, 30_000);
    } finally {
      terminal.dispose();
    }
    await until(() => running(marker).length === 0, `${marker} to end once its terminal is closed`, 30_000);
  });

  it('Open Interactive Terminal on a local process sandbox: a real tty there too, started in its workspace', async () => {
    const local = await newLocalSandbox();
    const exported = await api();
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | string | undefined>('sandboxSessions.openInteractiveTerminal', local.key);
    assert.ok(terminal && typeof terminal !== 'string', `an interactive terminal was opened: ${String(terminal)}`);
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    const closed = whenClosed(terminal);
    try {
      terminal.show();
      await until(() => /[$#] $/m.test(screen()), 'the shell prompt', 30_000);
      terminal.sendText('tty; pwd', true);
      await until(() => /\/dev\/pts\/\d+\r\n\S*\/runs\/[^/\r]+\/workspace\r\n/.test(screen()), 'a real tty, in the workspace', 30_000);
      terminal.sendText('exit 3', true);
      assert.equal((await closed).exitStatus?.code, 3, screen());
    } finally {
      terminal.dispose();
      await exported.companion.request('sandboxes/terminate', { ref: local.ref, mode: 'Immediate', wait: true });
    }
  });

  it('Close (Drain) ends the sandbox and deletes it on the OpenSandbox server', async () => {
    const { companion } = await api();
    const before = await openSandboxCount();
    const { sandbox: closed } = await companion.request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Drain', wait: true });
    assert.equal(closed.phase, 'Succeeded');
    assert.equal(await openSandboxCount(), before - 1);
  });
});

/** Every file under `root` (if it exists) holding `needle`, and how many files were read. */
function filesHolding(root: string, needle: string): { hits: string[]; files: string[] } {
  const hits: string[] = [];
  const files: string[] = [];
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        files.push(path.relative(root, p));
        if (fs.readFileSync(p).includes(needle)) hits.push(path.relative(root, p));
      }
    }
  };
  if (fs.existsSync(root)) visit(root);
  return { hits, files };
}

describe('Set OpenSandbox Credential… (simulator)', () => {
  const SECRET = 'IT_VAULT_TOKEN';
  const HOST = 'api.example.com';
  const config = () => vscode.workspace.getConfiguration('sandboxSessions.opensandbox');

  before(function () {
    if (!DOMAIN) this.skip(); // run.ts always starts the simulator; this guards a hand-made run
  });
  after(async () => {
    await vscode.commands.executeCommand('sandboxSessions.setOpenSandboxCredential', SECRET, ''); // forget it
    await config().update('credentialBindings', undefined, vscode.ConfigurationTarget.Global);
    await config().update('domain', undefined, vscode.ConfigurationTarget.Global);
  });

  it('Set OpenSandbox Credential… takes the secret a binding names and a value typed into a password box; the next OpenSandbox sandbox has it in its Credential Vault, and no log or setting holds it', async () => {
    const { companion } = await api();
    await config().update('domain', DOMAIN, vscode.ConfigurationTarget.Global);
    assert.equal(await vscode.commands.executeCommand('sandboxSessions.setOpenSandboxApiKey', KEY), true);
    await config().update('credentialBindings', [{ name: 'it-api', hosts: [HOST], auth: 'bearer', secret: SECRET }], vscode.ConfigurationTarget.Global);
    const canary = `it_vault_canary_${randomBytes(12).toString('hex')}`;

    // As a person: the command, its pick of the bound secret names (type to filter, Enter), then the value in a password box.
    const running = Promise.resolve(vscode.commands.executeCommand<boolean>('sandboxSessions.setOpenSandboxCredential'));
    await typeIntoQuickInput(SECRET, { password: false });
    await typeIntoQuickInput(canary, { password: true });
    assert.equal(await running, true, 'the command stored the credential');

    await until(async () => {
      const { providers } = await companion.request('providers/list', {});
      return providers.find((p) => p.kind === 'local')?.runtimes.find((r) => r.name === 'opensandbox')?.available === true;
    }, 'the opensandbox backend to be available');
    const before = new Set(await openSandboxIds());
    const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', { provider: 'local', runtime: 'opensandbox', open: false });
    assert.ok(created, 'New Sandbox returned the sandbox (a missing credential value would have refused it)');
    try {
      assert.equal(created.phase, 'Ready');
      const made = (await openSandboxIds()).filter((id) => !before.has(id));
      assert.equal(made.length, 1, 'one new sandbox on the OpenSandbox server');
      const vault = await openSandboxVault(made[0] as string, `https://${HOST}/user`);
      assert.deepEqual(vault.vaultSecrets, [{ name: SECRET, value: canary }], "the value typed is in the sandbox's Credential Vault (server side)");
      assert.deepEqual(vault.injectedHeaders, { Authorization: `Bearer ${canary}` }, 'its requests to the bound host would carry it');
    } finally {
      await companion.request('sandboxes/terminate', { ref: created.ref, mode: 'Immediate', wait: true });
    }

    // Not in any log (the extension's output channel, the extension host's, the companion's), setting or daemon file.
    const work = process.env.SANDBOX_SESSIONS_IT_WORK ?? '';
    const logs = filesHolding(path.join(work, 'user-data', 'logs'), canary);
    assert.ok(logs.files.some((f) => /Sandbox Sessions\.log$/.test(f)), `the extension's output channel is among the logs read: ${logs.files.join(', ')}`);
    assert.deepEqual(logs.hits, [], 'no log holds the value');
    for (const dir of [path.join(work, 'user-data', 'User'), path.join(work, 'user-data', 'Machine'), process.env.SANDBOX_SESSIONS_STATE_DIR ?? '']) {
      assert.deepEqual(filesHolding(dir, canary).hits, [], `no file under ${dir} holds the value`);
    }
    assert.ok(!JSON.stringify(config().get('credentialBindings')).includes(canary), 'the bindings setting names the secret only');
  });
});
