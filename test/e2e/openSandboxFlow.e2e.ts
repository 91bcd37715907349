// A person's flow with an OpenSandbox sandbox in a real VS Code (code-server, the packaged
// extension installed) driven in headless Chromium, against the OpenSandbox SIMULATOR
// (test/fixtures/opensandbox): open the sandbox as a workspace folder → edit and save a file →
// `ls` and a failing command in the Sandbox terminal → Ctrl+C a `sleep` (execd interrupts it) →
// Open Interactive Terminal: a PTY in the sandbox runs vi, which writes an artifact → a window
// reload brings that terminal back on the same shell, its output replayed → Close
// Sandbox (Drain) → the artifacts are downloaded, verified against their digests, and the
// sandbox is gone from the OpenSandbox server. The local gateway daemon holds the OpenSandbox
// connection (the file the companion writes, 0600 in its state root); the window only ever talks
// to the daemon. Screenshots of every step land in test/e2e/screenshots/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { Run } from '../../protocol/kruntimes/run';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../../server/gateway/localClient';
import type { ExecRecord } from '../../server/local/execRecord';
import { writeConnectionFile } from '../../server/sandboxes/opensandbox/connectionFile';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { startOpenSandboxSimulator, type OpenSandboxSimulator } from '../fixtures/opensandbox/simulator';
import { launchWorkbench, type Workbench } from './workbench';
import { readGatewayFile } from './gatewayFiles';

const NAME = 'osb-e2e';

describe('e2e: an OpenSandbox sandbox from open to Drain, with an interactive terminal (simulator)', function () {
  this.timeout(180_000);
  let work: string;
  let stateDir: string;
  let simulator: OpenSandboxSimulator;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;
  let api: LocalGatewayClient;
  let run: Run;

  const readSandboxFile = (p: string): Promise<string> => readGatewayFile(stateDir, run, p);

  /** The daemon's record of the one command whose text includes `text`, once `ready` holds for it (bounded). */
  const operation = async (text: string, ready: (r: ExecRecord) => boolean, timeoutMs = 20_000): Promise<ExecRecord> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = (await api.operations('default', NAME)).filter((r) => r.summary.includes(text));
      if (found[0] && ready(found[0])) return found[0];
      if (Date.now() > deadline) throw new Error(`the command "${text}" never got there: ${JSON.stringify(found[0] ?? 'no record')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  /** Sandboxes the OpenSandbox server has, as its lifecycle API lists them. */
  const openSandboxCount = async (): Promise<number> => {
    const res = await fetch(`${simulator.url}/v1/sandboxes?pageSize=200`, { headers: { 'OPEN-SANDBOX-API-KEY': simulator.apiKey ?? '' } });
    return ((await res.json()) as { items: unknown[] }).items.length;
  };

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-osb-'));
    stateDir = path.join(work, 'state');
    const vsix = packageExtension();
    simulator = await startOpenSandboxSimulator();
    // What "Set OpenSandbox API Key…" makes the companion hand the daemon (covered by the integration suite).
    await writeConnectionFile(stateDir, { domain: simulator.url, apiKey: simulator.apiKey ?? '' });
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
    api = new LocalGatewayClient(gateway.url, gateway.token);
    const created = await api.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: NAME, namespace: 'default' },
      spec: { runtime: 'opensandbox', mode: { session: { idleTimeoutSeconds: 900 } } },
    });
    run = await api.waitPhase('default', created.metadata.name ?? NAME, ['Ready']);
    assert.equal(await openSandboxCount(), 1, 'the Run has its sandbox on the OpenSandbox server');
    await api.execute(endpointPathOf(run), { command: { shell: 'printf "hello\\n" > hello.txt && mkdir -p src && printf "console.log(1)\\n" > src/app.js' } });

    server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
    ({ browser, page, wb } = await launchWorkbench('opensandbox'));
    await page.goto(server.url);
    await wb.waitForWorkbench();
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await server?.stop();
    await stopGateway({ stateDir });
    await simulator?.close();
  });

  it('opens the OpenSandbox sandbox as the workspace folder from the palette', async () => {
    await wb.runCommand('Sandbox Sessions: Open Sandbox');
    await wb.pick(NAME);
    await wb.notificationButton(new RegExp(`Open sandbox ${NAME} as a folder`), 'Open Here');
    await page.waitForURL(new RegExp(`workspace=.*${NAME}`), { timeout: 60_000 });
    await wb.waitForWorkbench();
    await wb.explorerItem('hello.txt').waitFor({ timeout: 60_000 });
    await wb.screenshot('explorer');
    assert.ok(await wb.explorerItem('src').isVisible());
  });

  it('edits and saves a file; the sandbox has the new content', async () => {
    await wb.explorerItem('hello.txt').click();
    // The editor appears before the file is read through the sandbox file system; keys typed before its
    // text shows are lost.
    const text = page.locator('.editor-instance .view-lines', { hasText: 'hello' }).first();
    await text.waitFor({ timeout: 30_000 });
    await text.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('edited in VS Code');
    await page.keyboard.press('Control+S');
    const deadline = Date.now() + 20_000;
    while (!(await readSandboxFile('hello.txt')).includes('edited in VS Code')) {
      if (Date.now() > deadline) throw new Error(`saved content never reached the sandbox: ${await readSandboxFile('hello.txt')}`);
      await page.waitForTimeout(200);
    }
    await wb.screenshot('saved');
  });

  it('does not save over a change made in the sandbox meanwhile at the same size; Compare, then Overwrite', async () => {
    await page.keyboard.type(' twice');
    // Another client rewrites the file while the editor has unsaved edits: same size, so VS Code's own check (which
    // compares sizes) lets the save through to the file system.
    const saved = await readSandboxFile('hello.txt');
    const theirs = 'x'.repeat(saved.length - 1);
    await api.execute(endpointPathOf(run), { command: { shell: `printf '%s\\n' '${theirs}' > hello.txt` } });
    await page.keyboard.press('Control+S');
    const notice = /hello\.txt was changed in osb-e2e after this window read it, so your version was not saved\. Your edits are still in the editor/;
    await wb.notificationButton(notice, 'Compare');
    // The diff editor: the sandbox's version on the left, the unsaved one on the right.
    await page.locator('.monaco-diff-editor .editor.original .view-lines', { hasText: theirs }).waitFor({ timeout: 30_000 });
    await page.locator('.monaco-diff-editor .editor.modified .view-lines', { hasText: 'edited in VS Code twice' }).waitFor({ timeout: 30_000 });
    // The choice is now in the diff's title bar, as in VS Code's own conflict editor.
    const overwrite = page.locator(`.editor-actions a.action-label[aria-label^="Overwrite the Sandbox's Version with Yours"]`);
    await overwrite.waitFor({ timeout: 30_000 });
    assert.ok(await page.locator(`.editor-actions a.action-label[aria-label^="Take the Sandbox's Version"]`).isVisible());
    await wb.screenshot('save-conflict-compare');
    // Meanwhile code-server's auto save (on by default in a browser) has tried again, and was refused too.
    assert.equal(await readSandboxFile('hello.txt'), `${theirs}\n`, "the other client's version is still there");
    await overwrite.click();
    const deadline = Date.now() + 20_000;
    while (!(await readSandboxFile('hello.txt')).includes('edited in VS Code twice')) {
      if (Date.now() > deadline) throw new Error(`Overwrite never reached the sandbox: ${await readSandboxFile('hello.txt')}`);
      await page.waitForTimeout(200);
    }
    // The diff closed, and with the save through, VS Code's "Failed to save" toast went too.
    await page.locator('.monaco-diff-editor').waitFor({ state: 'detached', timeout: 30_000 });
    await page.locator('.notification-toast', { hasText: /Failed to save 'hello\.txt'/ }).waitFor({ state: 'detached', timeout: 30_000 });
    await wb.runCommand('View: Close All Editors');
  });

  it('runs ls and a failing command in the Sandbox terminal', async () => {
    await wb.runCommand('Sandbox Sessions: Open Terminal');
    await wb.waitForTerminalText(new RegExp(`${NAME}:/\\$`));
    await wb.typeInTerminal('ls');
    // The next line is typed once the prompt is back (typing while a command runs is its input).
    await wb.waitForTerminalText(new RegExp(`hello\\.txt\\s+src\\s+${NAME}:/\\$ *$`, 'm'));
    await wb.typeInTerminal("sh -c 'exit 7'");
    await wb.waitForTerminalText(/\[exit 7\]/);
    await wb.screenshot('terminal');
  });

  it('stops a sleep with Ctrl+C: execd interrupts it and the daemon records it cancelled', async () => {
    const sleep = `sleep 60.${Date.now() % 100_000}`;
    await wb.typeInTerminal(sleep);
    await operation(sleep, (r) => r.state === 'running');
    // Timed from the keypress: typing and starting the command are not what Ctrl+C is about.
    const pressed = Date.now();
    await page.keyboard.press('Control+C');
    await wb.waitForTerminalText(/\[cancelled\]/, 15_000);
    const ended = await operation(sleep, (r) => r.state !== 'running');
    assert.equal(ended.outcome, 'cancelled', JSON.stringify(ended));
    const cancelMs = Date.now() - pressed;
    assert.ok(cancelMs < 30_000, `Ctrl+C took ${cancelMs} ms to end the command and show [cancelled]`);
    await wb.typeInTerminal('printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"');
    assert.equal((await operation('printf report', (r) => r.state !== 'running')).outcome, 'succeeded');
    await wb.screenshot('ctrl-c');
  });

  it('Open Interactive Terminal: vi runs full-screen in the sandbox’s PTY and writes an artifact', async () => {
    await wb.runCommand('Sandbox Sessions: Open Interactive Terminal');
    await wb.waitForTerminalText(/Interactive terminal of osb-e2e[\s\S]*[$#] *$/m);
    await wb.typeInTerminal('tty; stty size');
    await wb.waitForTerminalText(/\/dev\/pts\/\d+\s+\d+ \d+/);
    await wb.typeInTerminal('vi -u NONE /artifacts/vi-notes.txt');
    // Full screen: vi's empty-line markers fill the terminal. (Not its "[New]" message on the last line: vi
    // clears it when it redraws, e.g. on the resize VS Code sends as the terminal panel settles.)
    await wb.waitForTerminalText(/(~\s+){10}/);
    await page.keyboard.type('iwritten in vi', { delay: 10 });
    await wb.screenshot('pty-vi');
    await page.keyboard.press('Escape');
    await page.keyboard.type(':wq', { delay: 10 });
    await page.keyboard.press('Enter');
    await wb.waitForTerminalText(/vi-notes\.txt[\s\S]*[$#] *$/m);
    await wb.typeInTerminal('cat /artifacts/vi-notes.txt');
    await wb.waitForTerminalText(/cat \/artifacts\/vi-notes\.txt\s+written in vi/);
    await wb.screenshot('pty-after-vi');
  });

  it('the interactive terminal survives a window reload: the same shell, its earlier output replayed', async () => {
    await wb.typeInTerminal('KEPT=across-reload-$((6*7))');
    await wb.typeInTerminal('echo "set:$KEPT"');
    await wb.waitForTerminalText(/set:across-reload-42/);
    // As in sandboxWindow.e2e.ts: wait for the new page, then for what only the reloaded window shows.
    const reloaded = page.waitForEvent('load', { timeout: 120_000 });
    reloaded.catch(() => undefined);
    await wb.runCommand('Developer: Reload Window');
    await reloaded;
    await wb.waitForWorkbench();
    // The banner, then the replay: output written before the reload (the vi step's `cat`) comes back.
    await wb.waitForTerminalText(/reattaching to the same program[\s\S]*written in vi[\s\S]*set:across-reload-42/, 60_000);
    await wb.typeInTerminal('echo "still:$KEPT"');
    await wb.waitForTerminalText(/still:across-reload-42/);
    await wb.screenshot('pty-after-reload');
  });

  it('closes the sandbox with Drain, downloads and verifies its artifacts; the OpenSandbox sandbox is deleted', async () => {
    const downloads = path.join(work, 'downloads');
    fs.mkdirSync(downloads, { recursive: true });
    await wb.runCommand('Sandbox Sessions: Close Sandbox (Drain)');
    await wb.notificationButton(new RegExp(`${NAME} closed with 2 artifact`), 'Download Artifacts…');
    await wb.chooseFolderInDialog(downloads, 'Download Here', 'download-dialog');
    await wb.waitForNotification(/Downloaded 2 verified artifact/);
    await wb.screenshot('downloaded');
    assert.equal(fs.readFileSync(path.join(downloads, NAME, 'report.txt'), 'utf8'), 'report');
    assert.equal(fs.readFileSync(path.join(downloads, NAME, 'vi-notes.txt'), 'utf8'), 'written in vi\n');
    const final = await api.getRun('default', NAME);
    assert.equal(final.status?.phase, 'Succeeded');
    assert.equal(await openSandboxCount(), 0, 'no sandbox is left on the OpenSandbox server');
  });
});
