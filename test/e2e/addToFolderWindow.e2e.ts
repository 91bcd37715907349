// Add to Workspace from a window of one local folder (no workspace file), in a real VS Code
// (code-server, the packaged extension) in headless Chromium: the most common way a person meets a
// sandbox — their project open, then a sandbox beside it. VS Code's own add turns such a window into
// an untitled multi-root workspace, which code-server reloads with its first folder only (the sandbox
// was lost). So the extension opens a workspace
// file of both instead (extension/sandboxes/workspaceFile.ts): the sandbox's folder is shown beside the
// project, and its files read through the new host. Screenshots in
// test/e2e/screenshots/add-to-folder-*.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../../server/gateway/localClient';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { launchWorkbench, type Workbench } from './workbench';

describe('e2e: Add to Workspace from a window of one local folder', function () {
  this.timeout(300_000);
  let work: string;
  let stateDir: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-add-'));
    stateDir = path.join(work, 'state');
    const project = path.join(work, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'notes.md'), '# my project\n');
    const vsix = packageExtension();
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
    const api = new LocalGatewayClient(gateway.url, gateway.token);
    const created = await api.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'beside', namespace: 'default' },
      spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 900 } } },
    });
    const run = await api.waitPhase('default', created.metadata.name!, ['Ready']);
    await api.execute(endpointPathOf(run), { command: { shell: 'printf "from the sandbox\\n" > inside.txt' } });

    server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
    ({ browser, page, wb } = await launchWorkbench('add-to-folder'));
    await page.goto(`${server.url}/?folder=${encodeURIComponent(project)}`);
    await wb.waitForWorkbench();
    await wb.explorerItem('notes.md').waitFor({ timeout: 60_000 });
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await server?.stop();
    await stopGateway({ stateDir });
  });

  it('shows the sandbox beside the project, in a window titled after both', async () => {
    await wb.runCommand('Sandbox Sessions: Open Sandbox');
    await wb.pick(/beside/);
    const offer = await wb.waitForNotification(/Open sandbox beside as a folder/);
    await wb.screenshot('offer');
    await offer.getByRole('button', { name: 'Add to Workspace' }).click();
    // The reloaded window shows both folders (before the fix it came back with the project alone).
    await wb.explorerItem('beside · local').waitFor({ timeout: 120_000 });
    assert.match(await page.title(), /project \+ beside · local \(Workspace\)/);
    // The project is still in the window, and the sandbox's file reads through the new host.
    assert.ok(await wb.explorerItem('project').isVisible(), 'the local folder stays in the window');
    await wb.explorerItem('inside.txt').waitFor({ timeout: 30_000 });
    // Visibly finished by the reloaded window: the new folder is selected.
    await page.locator('.explorer-folders-view .monaco-list-row.selected', { hasText: 'beside · local' }).waitFor({ timeout: 30_000 });
    await wb.screenshot('added');
  });
});
