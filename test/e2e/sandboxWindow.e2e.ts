// A tour of a sandbox window as a new user takes it (issue 24), in a real VS Code (code-server, the
// packaged extension) driven in headless Chromium, with a screenshot of every step in
// test/e2e/screenshots/sandbox-window-*.png:
// the window `npm start` opens (a `.code-workspace` naming one sandbox) → a new terminal is a
// Sandbox shell, never a host shell → a window reload brings the Sandbox terminal back in the same
// working directory → New Sandbox from the Sandboxes view's **+** → Add to Workspace visibly
// finishes (the folder revealed in the Explorer) → Drain with an open editor makes it read-only
// with a message in words, and the terminal says the sandbox is closed → the local gateway daemon
// restarts under the window and the other sandbox's terminal keeps working.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../../server/gateway/localClient';
import { sandboxFolderName, sandboxWorkspaceFile } from '../../protocol/sandboxes';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { launchWorkbench, type Workbench } from './workbench';

describe('e2e: a sandbox window a person can trust', function () {
  this.timeout(300_000);
  let work: string;
  let stateDir: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;
  let api: LocalGatewayClient;
  let added = '';
  const gatewayCommand = () => [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'];

  /** Names of the terminals in the panel (the tabs list is always shown: see the settings below). */
  const terminalNames = async () => (await page.locator('.terminal-tabs-entry .label-name').allInnerTexts()).map((t) => t.trim());

  /**
   * Waits until the terminal tabs are exactly `expected`: a host shell VS Code started unasked is
   * replaced by the host-shell guard (extension/terminal/hostShellGuard.ts), and its tab goes a moment
   * after the Sandbox shell's prompt shows.
   */
  async function waitForTerminalNames(expected: string[], timeout = 30_000): Promise<void> {
    const deadline = Date.now() + timeout;
    for (let names = await terminalNames(); JSON.stringify(names) !== JSON.stringify(expected); names = await terminalNames()) {
      if (Date.now() > deadline) assert.deepEqual(names, expected, `the terminal tabs never became ${JSON.stringify(expected)}`);
      await page.waitForTimeout(200); // polling an observable condition
    }
  }

  /**
   * Waits until `label` (an editor tab or an Explorer row) shows VS Code's read-only mark: the lock
   * (codicon lock-small, U+EBE7) that VS Code's file decorations draw after the label of a file whose
   * file system reports it read-only.
   */
  async function waitForReadOnlyMark(label: Locator, timeout = 30_000): Promise<void> {
    const lock = '"\uebe7"';
    const deadline = Date.now() + timeout;
    for (;;) {
      const marks = await label
        .locator('.monaco-icon-label')
        .evaluateAll((els) => els.map((el) => el.ownerDocument.defaultView?.getComputedStyle(el, '::after').content ?? ''))
        .catch(() => [] as string[]);
      if (marks.includes(lock)) return;
      if (Date.now() > deadline) throw new Error(`no read-only lock on the label after ${timeout} ms (its ::after shows ${JSON.stringify(marks)})`);
      await page.waitForTimeout(200); // polling an observable condition
    }
  }

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-window-'));
    stateDir = path.join(work, 'state');
    const vsix = packageExtension();
    const gateway = await ensureGateway({ stateDir, command: gatewayCommand() });
    api = new LocalGatewayClient(gateway.url, gateway.token);
    const created = await api.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'tour-a', namespace: 'default' },
      spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 900 } } },
    });
    const run = await api.waitPhase('default', created.metadata.name!, ['Ready']);
    await api.execute(endpointPathOf(run), { command: { shell: 'printf "hello\\n" > hello.txt && mkdir -p src && printf "x\\n" > src/app.js && printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"' } });
    // The window `npm start` opens: a workspace file naming the sandbox (scripts/start.ts).
    const ref = { provider: 'local' as const, context: 'local', namespace: 'default', name: 'tour-a' };
    const workspaceFile = path.join(work, 'workspaces', `${sandboxFolderName(ref)}.code-workspace`);
    fs.mkdirSync(path.dirname(workspaceFile), { recursive: true });
    fs.writeFileSync(workspaceFile, sandboxWorkspaceFile(ref));

    server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
    // Show the terminal tabs even for one terminal, so their names can be read.
    const settingsFile = path.join(server.userDataDir, 'User', 'settings.json');
    const settings = JSON.parse(fs.readFileSync(settingsFile, 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(settingsFile, JSON.stringify({ ...settings, 'terminal.integrated.tabs.hideCondition': 'never' }));
    ({ browser, page, wb } = await launchWorkbench('sandbox-window'));
    await page.goto(`${server.url}/?workspace=${encodeURIComponent(workspaceFile)}`);
    await wb.waitForWorkbench();
    await wb.explorerItem('hello.txt').waitFor({ timeout: 60_000 });
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await server?.stop();
    await stopGateway({ stateDir });
  });

  it('names the folder `<name> · local`, and a new terminal (Ctrl+`) is a Sandbox shell', async () => {
    assert.ok(await wb.explorerItem('tour-a · local').isVisible());
    await wb.screenshot('window');
    await wb.runCommand('Terminal: Create New Terminal');
    await wb.waitForTerminalText(/tour-a:\/\$/);
    await waitForTerminalNames(['Sandbox: tour-a']);
    await wb.typeInTerminal('cd src');
    await wb.waitForTerminalText(/tour-a:\/src\$/);
    await wb.screenshot('new-terminal');
  });

  it('brings the Sandbox terminal back after a window reload, in the same directory, and opens no host shell', async () => {
    // VS Code saves the window's state first and reloads a moment later: until then the old page still
    // shows the workbench, the file and the prompt. So wait for the new page, and then for what only the
    // reloaded window shows: the terminal's reconnect line (extension/terminal/terminalRestore.ts), then the prompt.
    const reloaded = page.waitForEvent('load', { timeout: 120_000 });
    reloaded.catch(() => undefined); // awaited below; not an unhandled rejection should the command fail first
    await wb.runCommand('Developer: Reload Window');
    await reloaded;
    await wb.waitForWorkbench();
    await wb.explorerItem('hello.txt').waitFor({ timeout: 60_000 });
    await wb.waitForTerminalText(/Reconnected after the window reloaded[\s\S]*tour-a:\/src\$/, 60_000);
    await waitForTerminalNames(['Sandbox: tour-a']);
    await wb.typeInTerminal('ls');
    await wb.waitForTerminalText(/app\.js/);
    await wb.screenshot('after-reload');
  });

  it('creates a sandbox from the view’s + and adds it to the workspace, revealed in the Explorer', async () => {
    await page.locator('.activitybar [aria-label^="Sandboxes"]').first().click();
    // A view's title actions show while the pointer is over its header.
    const header = page.locator('.pane-header', { hasText: 'Sandboxes' }).first();
    await header.hover();
    await header.locator('[aria-label="New Sandbox…"]').click();
    await wb.pick('process');
    const offer = await wb.waitForNotification(/Open sandbox (sbx-[a-z0-9-]+) as a folder/);
    added = /Open sandbox (sbx-[a-z0-9-]+) as a folder/.exec(await offer.innerText())?.[1] ?? '';
    assert.ok(added, 'the offer names the new sandbox');
    for (const choice of ['Add to Workspace', 'Open Here', 'Open in New Window']) {
      assert.ok(await offer.getByRole('button', { name: choice }).isVisible(), `the offer has ${choice}`);
    }
    await wb.screenshot('new-sandbox-offer');
    await offer.getByRole('button', { name: 'Add to Workspace' }).click();
    // Visibly finished: the Explorer is shown with the new folder in it, selected.
    const row = wb.explorerItem(`${added} · local`);
    await row.waitFor({ timeout: 60_000 });
    await page.locator('.explorer-folders-view .monaco-list-row.selected', { hasText: `${added} · local` }).waitFor({ timeout: 30_000 });
    assert.doesNotMatch(await page.title(), /Untitled/);
    await wb.screenshot('added-to-workspace');
  });

  it('makes the files of a drained sandbox read-only, says why, and its terminal says it is closed', async () => {
    await wb.runCommand('View: Show Explorer');
    await wb.explorerItem('hello.txt').click();
    const editor = page.locator('.editor-instance .monaco-editor').first();
    await editor.waitFor();
    await wb.runCommand('Sandbox Sessions: Close Sandbox (Drain)');
    // Why, and what to do: the files are read-only now; download the artifacts or open a new sandbox.
    const notice = await wb.waitForNotification(/tour-a closed with 1 artifact\(s\)\. Its files are read-only now; open a new sandbox/);
    assert.ok(await notice.getByRole('button', { name: 'Download Artifacts…' }).isVisible());
    // The open editor turns read-only: its tab shows VS Code's lock (once VS Code has stat'ed the file
    // again through the extension host, a moment after the notice), and typing into it is refused.
    await waitForReadOnlyMark(page.locator('.tabs-container .tab', { hasText: 'hello.txt' }).first());
    await editor.click();
    await page.keyboard.type('more');
    await page.locator('.monaco-editor-overlaymessage', { hasText: /read-only/i }).waitFor({ timeout: 30_000 });
    assert.doesNotMatch(await editor.locator('.view-lines').innerText(), /more/, 'the typed text is not in the file');
    await wb.screenshot('drained-editor');
    // The terminal of the closed sandbox says so in words.
    await page.locator('.terminal-tabs-entry', { hasText: 'Sandbox: tour-a' }).first().click();
    await wb.typeInTerminal('ls');
    const text = await wb.waitForTerminalText(/tour-a is closed/);
    assert.doesNotMatch(text, /not ready|CompanionRequestError/i);
    await wb.screenshot('drained-terminal');
  });

  it('keeps working across a restart of the local gateway daemon', async () => {
    await wb.runCommand('Terminal: Create New Terminal');
    // A window of two folders asks where; the terminal goes to the Ready sandbox (tour-a is closed now).
    await wb.pick(`${added} · local`);
    await wb.waitForTerminalText(new RegExp(`${added}:/\\$`));
    await stopGateway({ stateDir });
    await ensureGateway({ stateDir, command: gatewayCommand() });
    await wb.typeInTerminal('echo after-restart');
    await wb.waitForTerminalText(/^after-restart$/m, 60_000);
    await wb.screenshot('daemon-restart');
  });
});
