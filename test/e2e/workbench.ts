// Drives a person's actions in the VS Code workbench (code-server in headless Chromium): the
// command palette, quick picks, notifications, the explorer, editors and the terminal, and
// saves a screenshot of each step for a person to look at.
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { CHROMIUM_ARGS } from '../../scripts/vscodeHost';

export const SCREENSHOTS = path.resolve(__dirname, 'screenshots');

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
   * VS Code's simple folder dialog (code-server): types `folder` as a person does (select all,
   * type; the dialog completes paths as you type, so re-typed until it shows exactly that), then
   * accepts it with `button` (or Enter, while the dialog first settles on the folder).
   */
  async chooseFolderInDialog(folder: string, button: string, screenshot?: string): Promise<void> {
    const input = this.page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    // The dialog fills in its default folder once it has read it: type ours only after that.
    for (let i = 0; i < 100 && !(await input.inputValue()).startsWith('/'); i++) await this.page.waitForTimeout(100);
    for (let attempt = 0; attempt < 5 && (await input.inputValue()) !== `${folder}/`; attempt++) {
      await input.click();
      await this.page.keyboard.press('Control+A');
      await this.page.keyboard.type(`${folder}/`, { delay: 10 });
      await this.page.waitForTimeout(700);
    }
    if ((await input.inputValue()) !== `${folder}/`) throw new Error(`the folder dialog shows ${await input.inputValue()}, not ${folder}/`);
    if (screenshot) await this.screenshot(screenshot);
    const dialog = this.page.locator('.quick-input-widget');
    for (let attempt = 0; attempt < 6 && (await input.isVisible()); attempt++) {
      if (attempt % 2 === 0) await dialog.getByRole('button', { name: button }).click().catch(() => undefined);
      else await input.press('Enter').catch(() => undefined);
      await this.page.waitForTimeout(1000);
    }
  }

  async typeInTerminal(line: string): Promise<void> {
    await this.page.locator('.terminal-wrapper.active .xterm >> visible=true').first().click();
    await this.page.keyboard.type(line, { delay: 5 });
    await this.page.keyboard.press('Enter');
  }
}
