// A person's session flow in a real VS Code (code-server, the packaged extension) in headless
// Chromium: save a sandbox as a session revision → edit and save r2 → fork r1 → run an
// activation (the deterministic test agent stands in for `maka activate`) → a save from r2 asks first, the head being
// the activation's r3 → compare the sandbox's file with r1 in a diff editor → see in Source Control what the sandbox
// changed since it was opened, then since the last save → fork r1 again and open the fork in a new sandbox from the
// fork's notice. Screenshots of every step land in
// test/e2e/screenshots/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { sandboxKey } from '../../protocol/sandboxes';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { endpointPathOf, LocalGatewayClient } from '../../server/gateway/localClient';
import type { Run } from '../../protocol/kruntimes/run';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { launchWorkbench, type Workbench } from './workbench';
import { readGatewayFile } from './gatewayFiles';
import { openFileSessionRepository } from '../../server/repository/fileRepository';

describe('e2e: save → fork → activate → compare', function () {
  this.timeout(180_000);
  let work: string;
  let stateDir: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;
  let run: Run;
  let api: LocalGatewayClient;

  const readSandboxFile = (p: string): Promise<string> => readGatewayFile(stateDir, run, p);

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-sessions-'));
    stateDir = path.join(work, 'state');
    const vsix = packageExtension();
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
    api = new LocalGatewayClient(gateway.url, gateway.token);
    await api.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'e2e-work', namespace: 'default' },
      spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 900 } } },
    });
    run = await api.waitPhase('default', 'e2e-work', ['Ready']);
    await api.execute(endpointPathOf(run), { command: { shell: 'printf "first\\n" > README.md' } });
    server = await startCodeServer({
      workDir: work,
      installVsix: vsix,
      env: {
        SANDBOX_SESSIONS_STATE_DIR: stateDir,
        SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository'),
        SANDBOX_SESSIONS_ACTIVATION_COMMAND: JSON.stringify([process.execPath, path.join(REPO_ROOT, 'test/fixtures/agent/agent.mts'), 'activate']),
      },
    });
    ({ browser, page, wb } = await launchWorkbench('sessions'));
    const folder = `sandbox://${sandboxKey({ provider: 'local', context: 'local', namespace: 'default', name: 'e2e-work' })}/`;
    await page.goto(`${server.url}/?folder=${encodeURIComponent(folder)}`);
    await wb.waitForWorkbench();
    await wb.explorerItem('README.md').waitFor({ timeout: 60_000 });
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await server?.stop();
    await stopGateway({ stateDir });
  });

  const typeInInput = async (text: string) => {
    const input = page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    await input.fill(text);
    await input.press('Enter');
  };

  it('saves the sandbox as r1 of a new session', async () => {
    // Before any save, Source Control lists what the sandbox changed since it was opened (nothing yet); once that
    // is stopped, it offers to compare the sandbox with a revision.
    await page.locator('.activitybar [aria-label^="Source Control"]').first().click();
    await page.locator('.scm-view .monaco-list-row', { hasText: 'Changes since opened' }).waitFor({ timeout: 30_000 });
    await wb.screenshot('changes-since-opened');
    await wb.runCommand('Sandbox Sessions: Stop Comparing Sandbox');
    await page.locator('.welcome-view-content', { hasText: 'See what a sandbox changed since a session revision' }).waitFor({ timeout: 30_000 });
    await page.locator('.welcome-view-content .monaco-button', { hasText: 'Compare Sandbox with Revision…' }).first().waitFor({ timeout: 30_000 });
    await page.locator('.activitybar [aria-label^="Explorer"]').first().click();
    await wb.runCommand('Sandbox Sessions: Save Sandbox as Session Revision');
    await wb.pick('New session…');
    await typeInInput('e2e-session');
    await wb.waitForNotification(/Saved e2e-work as e2e-session@r1/);
    await wb.screenshot('saved-r1');
  });

  it('edits a file and saves r2 on top of r1', async () => {
    await wb.explorerItem('README.md').click();
    // The editor appears before the file is read through the sandbox file system; keys typed before its
    // text shows are lost.
    const text = page.locator('.editor-instance .view-lines', { hasText: 'first' }).first();
    await text.waitFor({ timeout: 30_000 });
    await text.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('second line');
    await page.keyboard.press('Control+S');
    // r2 is saved from the sandbox: only once the edit is there.
    const deadline = Date.now() + 30_000;
    while (!(await readSandboxFile('README.md')).includes('second line')) {
      if (Date.now() > deadline) throw new Error(`saved content never reached the sandbox: ${JSON.stringify(await readSandboxFile('README.md'))}`);
      await page.waitForTimeout(200); // polls the gateway
    }
    await wb.runCommand('Sandbox Sessions: Save Sandbox as Session Revision');
    await wb.pick('e2e-session');
    await wb.waitForNotification(/Saved e2e-work as e2e-session@r2/);
    await wb.screenshot('saved-r2');
  });

  it('forks r1 into a new session', async () => {
    await wb.runCommand('Sandbox Sessions: Fork Session at Revision…');
    await wb.pick('e2e-session');
    await wb.pick(/^r1/);
    await typeInInput('e2e-session-fork');
    await wb.waitForNotification(/Forked e2e-session@r1 as e2e-session-fork@r1/);
    await wb.screenshot('forked');
  });

  it('runs an activation that commits r3', async () => {
    await wb.runCommand('Sandbox Sessions: Run Activation…');
    await wb.pick('e2e-session');
    await typeInInput('hello from the e2e test');
    await wb.waitForNotification(/Activation committed as e2e-session@r3 \(completed\)/, 90_000);
    await wb.screenshot('activated');
  });

  it("asks before saving on top of a revision committed since the sandbox's own (the activation's r3); Cancel saves nothing", async () => {
    await wb.runCommand('Sandbox Sessions: Save Sandbox as Session Revision');
    // The sandbox was saved as r2; the activation committed r3 since: the pick says so.
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'this sandbox is from r2; the head moved on to r3' }).waitFor({ timeout: 30_000 });
    await wb.pick('e2e-session');
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.waitFor({ timeout: 30_000 });
    assert.match(await dialog.innerText(), /e2e-session moved on to r3 since e2e-work's r2\. Saving on top of r3 replaces what r3 changed/);
    await wb.screenshot('save-behind-head');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden', timeout: 10_000 });
    const repository = await openFileSessionRepository({ storageRoot: path.join(work, 'repository') });
    try {
      assert.deepEqual((await repository.listRevisions('e2e-session')).map((r) => r.ref.revision), ['r3', 'r2', 'r1'], 'nothing was saved');
    } finally {
      await repository.close();
    }
  });

  it('compares the sandbox file with r1 in a diff editor', async () => {
    await wb.explorerItem('README.md').click();
    await wb.runCommand('Sandbox Sessions: Compare with Revision…');
    await wb.pick('e2e-session');
    await wb.pick(/^r1/);
    // The diff editor appears before both sides have loaded (r1 is read through the revision file
    // system): wait for each side's text.
    const diff = page.locator('.monaco-diff-editor').first();
    const modified = diff.locator('.editor.modified .view-lines', { hasText: 'second line' });
    await modified.waitFor({ timeout: 30_000 });
    const original = diff.locator('.editor.original .view-lines', { hasText: 'first' });
    await original.waitFor({ timeout: 30_000 });
    assert.doesNotMatch((await original.innerText()).replace(/\u00a0/g, ' '), /second line/, 'the original side is r1, without the r2 edit');
    await wb.screenshot('compare');
  });

  it('lists what the sandbox changed since the last save in Source Control, and opens a change as a diff', async () => {
    // Another client changes the sandbox (the window hears it from the sandbox's log); the last save was r2.
    await api.execute(endpointPathOf(run), { command: { shell: 'echo "# notes" > notes.txt && printf "\\nthird line\\n" >> README.md' } });
    // The Explorer marks them as VS Code marks git changes (a badge drawn by CSS: read from the style).
    const badge = (name: string) =>
      wb.explorerItem(name).evaluate((row) =>
        [...row.querySelectorAll('*')].map((el) => el.ownerDocument.defaultView?.getComputedStyle(el, '::after').content ?? '').find((c) => /^"[AM]"$/.test(c)) ?? '',
      );
    const deadline = Date.now() + 60_000;
    while ((await badge('notes.txt')) !== '"A"' || (await badge('README.md')) !== '"M"') {
      if (Date.now() > deadline) throw new Error(`the Explorer shows no change marks: ${await badge('notes.txt')} ${await badge('README.md')}`);
      await page.waitForTimeout(200); // polls the rendered rows
    }
    await page.locator('.activitybar [aria-label^="Source Control"]').first().click();
    const scm = page.locator('.scm-view');
    await scm.locator('.monaco-list-row', { hasText: 'Changes since e2e-session@r2' }).waitFor({ timeout: 60_000 });
    await scm.locator('.monaco-list-row', { hasText: 'notes.txt' }).waitFor({ timeout: 60_000 });
    const readme = scm.locator('.monaco-list-row', { hasText: 'README.md' });
    await readme.waitFor({ timeout: 60_000 });
    await readme.click();
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.locator('.editor.modified .view-lines', { hasText: 'third line' }).waitFor({ timeout: 30_000 });
    const original = diff.locator('.editor.original .view-lines', { hasText: 'second line' });
    await original.waitFor({ timeout: 30_000 });
    assert.doesNotMatch((await original.innerText()).replace(/\u00a0/g, ' '), /third line/, 'the original side is r2');
    await wb.screenshot('sandbox-changes');
    // The file's own editor marks the lines added since r2 in the gutter (quick diff against the revision).
    await page.locator('.tabs-container .tab', { hasText: 'README.md', hasNotText: '↔' }).first().click();
    await page.locator('.editor-instance .dirty-diff-added').first().waitFor({ timeout: 30_000 });
  });

  it("opens a fork in a new sandbox from the fork's notice", async () => {
    await wb.runCommand('Sandbox Sessions: Fork Session at Revision…');
    await wb.pick('e2e-session');
    await wb.pick(/^r1/);
    await typeInInput('e2e-session-beside');
    await wb.notificationButton(/Forked e2e-session@r1 as e2e-session-beside@r1/, 'Open in New Sandbox');
    const offer = await wb.waitForNotification(/Open sandbox (sbx-[a-z0-9-]+) as a folder/, 90_000);
    const name = /Open sandbox (sbx-[a-z0-9-]+) as a folder/.exec(await offer.innerText())?.[1] ?? '';
    assert.ok(name, 'the offer names the sandbox the fork was opened in');
    // Add to Workspace (beside the source) is the other choice; Sandboxes view e2e (sandboxWindow.e2e.ts) drives it.
    await offer.getByRole('button', { name: 'Open Here' }).click();
    await wb.explorerItem(`${name} · local`).waitFor({ timeout: 60_000 });
    // The fork is r1: README.md without the r2 edit, in its own sandbox; the source's is unchanged.
    const fork = await api.waitPhase('default', name, ['Ready']);
    assert.equal(await readGatewayFile(stateDir, fork, 'README.md'), 'first\n');
    assert.match(await readSandboxFile('README.md'), /second line/);
    await wb.explorerItem('README.md').waitFor({ timeout: 30_000 });
    await wb.screenshot('fork-opened');
  });
});
