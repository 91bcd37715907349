// The kubeconfig link of the Sandboxes view in a real VS Code (code-server, the packaged extension)
// driven in headless Chromium (issue 24, defect 8): with no usable kubeconfig, the kruntimes
// provider says why, and a click on that line opens Settings where the machine-scoped
// `sandboxSessions.kubeconfig` setting is — the Remote tab in a browser-served VS Code — showing
// the setting, never "No Settings Found". Screenshots land in test/e2e/screenshots/kubeconfig-link-*.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { stopGateway } from '../../server/gateway/daemonClient';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { packageExtension } from '../../scripts/packageExtension';
import { launchWorkbench, type Workbench } from './workbench';

describe('e2e: the kubeconfig link opens the setting', function () {
  this.timeout(180_000);
  let work: string;
  let stateDir: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-kubeconfig-'));
    stateDir = path.join(work, 'state');
    const vsix = packageExtension();
    fs.mkdirSync(path.join(work, 'folder'));
    server = await startCodeServer({
      workDir: work,
      // No kubeconfig anywhere: the kruntimes provider is unavailable and says why.
      env: { SANDBOX_SESSIONS_STATE_DIR: stateDir, KUBECONFIG: path.join(work, 'no-such-kubeconfig') },
      installVsix: vsix,
    });
    ({ browser, page, wb } = await launchWorkbench('kubeconfig-link'));
    await page.goto(`${server.url}/?folder=${encodeURIComponent(path.join(work, 'folder'))}`);
    await wb.waitForWorkbench();
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await server?.stop();
    await stopGateway({ stateDir }).catch(() => false);
  });

  it('opens Settings on the tab that has sandboxSessions.kubeconfig, showing it', async () => {
    await page.locator('.activitybar [aria-label^="Sandboxes"]').first().click();
    const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Sandboxes' }) }).first();
    // The kruntimes provider's first child: why it cannot be used, a click away from the setting.
    const why = view.locator('.monaco-list-row', { has: page.locator('.codicon-warning') }).first();
    await why.waitFor({ timeout: 60_000 });
    await wb.screenshot('why-kruntimes-is-unavailable');
    await why.click();
    const editor = page.locator('.settings-editor').first();
    await editor.waitFor({ timeout: 30_000 });
    const setting = editor.locator('.setting-item-contents', { hasText: 'Kubeconfig' }).first();
    await Promise.race([
      setting.waitFor({ timeout: 30_000 }),
      editor
        .locator('.no-results-message', { hasText: 'No Settings Found' })
        .waitFor({ state: 'visible', timeout: 30_000 })
        .then(() => {
          throw new Error('the Settings editor says "No Settings Found"');
        }),
    ]);
    await wb.screenshot('kubeconfig-setting');
    assert.ok(await setting.isVisible(), 'the kubeconfig setting is shown');
    assert.match(await setting.innerText(), /sandboxSessions\.kubeconfig|KUBECONFIG/);
    // In a browser-served VS Code the machine setting is on the Remote tab.
    const selectedTab = (await editor.locator('.settings-tabs-widget .action-item .checked, .settings-tabs-widget .action-label.checked').first().innerText()).trim();
    assert.match(selectedTab, /^Remote/i, `selected tab: ${selectedTab}`);
  });
});
