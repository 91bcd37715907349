// Drives a person's actions in the VS Code workbench (code-server in headless Chromium): the
// command palette, quick picks, notifications, the explorer, editors and the terminal, and
// saves a screenshot of each step for a person to look at.
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { CHROMIUM_ARGS } from '../../scripts/vscodeHost';

export const SCREENSHOTS = path.resolve(__dirname, 'screenshots');

/** The text of every "Sandbox Sessions" log (one per extension host) of the code-server whose user data is `userDataDir`. */
export function extensionLogs(userDataDir: string): string {
  const logs = path.join(userDataDir, 'logs');
  if (!fs.existsSync(logs)) return '';
  return (fs.readdirSync(logs, { recursive: true }) as string[])
    .filter((f) => f.endsWith(path.join('sandbox-sessions.sandbox-sessions', 'Sandbox Sessions.log')))
    .map((f) => fs.readFileSync(path.join(logs, f), 'utf8'))
    .join('');
}

/** Headless Chromium with one page, and the Workbench that drives it (screenshots under `flow`). */
export async function launchWorkbench(flow: string): Promise<{ browser: Browser; page: Page; wb: Workbench }> {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const wb = new Workbench(page, flow);
  wb.recordConsole();
  return { browser, page, wb };
}

export class Workbench {
  private step = 0;
  private consolePrinted = false;
  constructor(
    readonly page: Page,
    private readonly flow: string,
  ) {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    // Each run replaces this flow's pictures.
    for (const f of fs.readdirSync(SCREENSHOTS)) if (f.startsWith(`${flow}-`)) fs.rmSync(path.join(SCREENSHOTS, f));
  }

  /**
   * Keeps the workbench's own console (its warnings and errors) and its navigations in
   * `<flow>-console.log` beside the pictures: what a failed step can be understood from when
   * only the CI log and these files are left.
   */
  recordConsole(): void {
    fs.writeFileSync(this.consoleLog, '');
    const record = (line: string) => fs.appendFileSync(this.consoleLog, `${new Date().toISOString()} ${line}\n`);
    this.page.on('console', (msg) => {
      if (['error', 'warning', 'info'].includes(msg.type())) record(`[${msg.type()}] ${msg.text()}`);
    });
    this.page.on('pageerror', (err) => record(`[pageerror] ${err.stack ?? err.message}`));
    this.page.on('framenavigated', (frame) => {
      if (frame === this.page.mainFrame()) record(`[navigated] ${frame.url()}`);
    });
  }

  private get consoleLog(): string {
    return path.join(SCREENSHOTS, `${this.flow}-console.log`);
  }

  /**
   * For a mocha afterEach: a picture of the screen when the test failed, and (once per flow) the
   * workbench's console warnings and errors printed with the failure, as the CI log keeps only that.
   */
  async screenshotIfFailed(test: { state?: string; title: string } | undefined): Promise<void> {
    if (test?.state !== 'failed') return;
    await this.screenshot(`failed-${test.title.replace(/\W+/g, '-')}`).catch(() => undefined);
    if (this.consolePrinted || !fs.existsSync(this.consoleLog)) return;
    this.consolePrinted = true;
    const lines = fs.readFileSync(this.consoleLog, 'utf8').split('\n').filter((l) => /\[(error|warning|pageerror|navigated)\]/.test(l));
    process.stderr.write(`--- workbench console of ${this.flow} (warnings, errors, navigations; last 40) ---\n${lines.slice(-40).map((l) => l.slice(0, 400)).join('\n')}\n---\n`);
  }

  async screenshot(name: string): Promise<void> {
    this.step += 1;
    const file = path.join(SCREENSHOTS, `${this.flow}-${String(this.step).padStart(2, '0')}-${name}.png`);
    await this.page.screenshot({ path: file });
  }

  async waitForWorkbench(): Promise<void> {
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    // The status bar appears once the workbench has restored its parts.
    await this.page.locator('#workbench\\.parts\\.statusbar').waitFor({ timeout: 60_000 });
  }

  /** Runs a command from the palette by its title, as a person would. */
  async runCommand(title: string): Promise<void> {
    // The palette lists the commands known when it opens; right after start-up the extension's
    // may not be there yet, so reopen it until they are.
    const deadline = Date.now() + 60_000;
    for (;;) {
      await this.page.keyboard.press('F1');
      const input = this.page.locator('.quick-input-widget input.input');
      await input.waitFor({ state: 'visible' });
      await input.fill(`>${title}`);
      // Fuzzy matching can rank another command first: click the row whose label is exactly the title.
      const exact = new RegExp(`^${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
      const row = this.page
        .locator('.quick-input-widget .monaco-list-row')
        .filter({ has: this.page.locator('.label-name', { hasText: exact }) })
        .first();
      try {
        await row.waitFor({ state: 'visible', timeout: 3000 });
        await row.click();
        return;
      } catch (err) {
        await this.page.keyboard.press('Escape');
        if (Date.now() > deadline) throw err;
      }
    }
  }

  /** Picks an item of an open quick pick by its label. */
  async pick(label: string | RegExp): Promise<void> {
    const row = this.page.locator('.quick-input-widget .monaco-list-row', { hasText: label }).first();
    await row.waitFor({ state: 'visible', timeout: 30_000 });
    await row.click();
  }

  /**
   * Chooses `item` of the open context menu with the keyboard: ArrowDown until it is the focused item, then Enter.
   * (A click that lands just after the menu opened may be taken as the release of the right click that opened it
   * and dropped — the menu stays open with the item highlighted; keys have no such moment.)
   */
  async chooseMenuItem(item: string): Promise<void> {
    const items = this.page.locator('.monaco-menu .action-item');
    const wanted = items.filter({ hasText: item }).first();
    await wanted.waitFor({ timeout: 15_000 });
    const count = await items.count();
    for (let i = 0; !(await wanted.evaluate((el) => el.classList.contains('focused'))); i++) {
      if (i > count) throw new Error(`"${item}" never got the focus in the context menu`);
      await this.page.keyboard.press('ArrowDown');
    }
    await this.page.keyboard.press('Enter');
    await wanted.waitFor({ state: 'hidden', timeout: 15_000 });
  }

  /** Clicks a button of the notification whose text matches. */
  async notificationButton(message: string | RegExp, button: string): Promise<void> {
    const toast = this.page.locator('.notification-toast', { hasText: message }).first();
    await toast.waitFor({ state: 'visible', timeout: 60_000 });
    await toast.getByRole('button', { name: button }).click();
  }

  async waitForNotification(message: string | RegExp, timeout = 60_000): Promise<Locator> {
    const toast = this.page.locator('.notification-toast', { hasText: message }).first();
    await toast.waitFor({ state: 'visible', timeout });
    return toast;
  }

  explorerItem(name: string): Locator {
    return this.page.locator('.explorer-folders-view .monaco-list-row', { hasText: name }).first();
  }

  /** The visible text of the active terminal (DOM renderer: gpuAcceleration is off; with several terminals, the shown one). */
  async terminalText(): Promise<string> {
    return (await this.page.locator('.terminal-wrapper.active .xterm-rows >> visible=true').first().innerText().catch(() => '')).replace(/\u00a0/g, ' ');
  }

  async waitForTerminalText(pattern: RegExp, timeout = 30_000): Promise<string> {
    const deadline = Date.now() + timeout;
    for (;;) {
      const text = await this.terminalText();
      if (pattern.test(text)) return text;
      if (Date.now() > deadline) throw new Error(`terminal never showed ${pattern}; it shows:\n${text}`);
      await this.page.waitForTimeout(200);
    }
  }

  /**
   * VS Code's simple folder dialog (code-server): once it has listed the folder it starts in (it
   * sets its path box to that folder then, which would overwrite ours), puts `folder` in its path
   * box as pasting a path does, and accepts it with `button` once the dialog has opened that folder.
   */
  async chooseFolderInDialog(folder: string, button: string, screenshot?: string): Promise<void> {
    const input = this.page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible', timeout: 30_000 });
    await this.folderDialogRows()
      .first()
      .waitFor({ state: 'visible', timeout: 30_000 })
      .catch(async () => {
        throw new Error(`the folder dialog listed no folder in 30 s; its path box shows ${await input.inputValue()}`);
      });
    await input.fill(`${folder}/`);
    await this.acceptFolderDialog(folder, button, screenshot);
  }

  /**
   * Waits (bounded) until the simple folder dialog has opened `folder`: its path box shows exactly
   * `folder/` and its list shows that folder's subfolders (and `..`), read from the disk here, as
   * the dialog runs on this machine. Before that, an accept only makes the dialog open the folder.
   */
  async waitForFolderDialogAt(folder: string, what = `the folder dialog to open ${folder}`, timeout = 30_000): Promise<void> {
    const input = this.page.locator('.quick-input-widget input.input');
    // A row keeps the hidden separator label of an earlier quick pick's row: only shown labels count.
    const labels = this.folderDialogRows().locator('.label-name').filter({ visible: true });
    const subfolders = fs
      .readdirSync(folder, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    const want = [...(path.dirname(folder) === folder ? [] : ['..']), ...subfolders].sort();
    const deadline = Date.now() + timeout;
    for (;;) {
      const value = await input.inputValue({ timeout });
      const listed = (await labels.allTextContents()).map((l) => l.trim()).sort();
      if (value === `${folder}/` && JSON.stringify(listed) === JSON.stringify(want)) return;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}: its path box shows ${value} (want ${folder}/), its list ${JSON.stringify(listed)} (want ${JSON.stringify(want)})`);
      await this.page.waitForTimeout(100); // polls the dialog, which gives no event to wait for
    }
  }

  /** The rows the open quick input shows (it keeps hidden rows of earlier quick picks too). */
  private folderDialogRows(): Locator {
    return this.page.locator('.quick-input-widget .monaco-list-row').filter({ visible: true });
  }

  /**
   * Accepts the simple folder dialog at `folder` with its `button`, once: after the dialog has
   * opened that folder (waitForFolderDialogAt), and fails unless the dialog then closes (bounded).
   */
  async acceptFolderDialog(folder: string, button: string, screenshot?: string): Promise<void> {
    await this.waitForFolderDialogAt(folder);
    if (screenshot) await this.screenshot(screenshot);
    const dialog = this.page.locator('.quick-input-widget');
    const input = dialog.locator('input.input');
    await dialog.getByRole('button', { name: button }).click({ timeout: 30_000 });
    await input.waitFor({ state: 'hidden', timeout: 30_000 }).catch(async () => {
      const message = (await dialog.locator('.quick-input-message').innerText({ timeout: 5000 }).catch(() => '')).trim();
      throw new Error(`the folder dialog did not close within 30 s of "${button}" at ${folder}/: its path box shows ${await input.inputValue({ timeout: 5000 }).catch(() => '?')}${message ? `, its message: ${message}` : ''}`);
    });
  }

  async typeInTerminal(line: string): Promise<void> {
    await this.page.locator('.terminal-wrapper.active .xterm >> visible=true').first().click();
    await this.page.keyboard.type(line, { delay: 5 });
    await this.page.keyboard.press('Enter');
  }
}
