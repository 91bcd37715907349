// Drain → Download Artifacts… as a person does it in a window with a local folder (issue 24,
// defect 10), in a real VS Code (code-server, the packaged extension) in headless Chromium, with a
// screenshot of each step in test/e2e/screenshots/drain-download-*.png:
// - the progress notification of the work (with its Cancel button) is gone when the outcome is
//   shown — VS Code keeps a progress notification at least 800 ms, so a short Drain or download
//   used to report "closed"/"downloaded" beside a progress that was over;
// - the download dialog starts in the window's local folder, not in the editor's own HOME;
// - a folder artifact arrives once, as the folder (not also as `<name>.tar.gz`), with its files.
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

describe('e2e: Drain → Download Artifacts… in a window with a local folder', function () {
  this.timeout(300_000);
  let work: string;
  let stateDir: string;
  let project: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;

  /** Notifications on screen whose text matches a progress title (only the progress notification has it). */
  const progressToasts = (title: RegExp) => page.locator('.notification-toast', { hasText: title });

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-download-'));
    stateDir = path.join(work, 'state');
    project = path.join(work, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'notes.md'), '# a local folder\n');
    const vsix = packageExtension();
    const gatewayCommand = [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'];
    const gateway = await ensureGateway({ stateDir, command: gatewayCommand });
    const api = new LocalGatewayClient(gateway.url, gateway.token);
    const created = await api.createRun('default', {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: 'dl-a', namespace: 'default' },
      spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 900 } } },
    });
    const run = await api.waitPhase('default', created.metadata.name!, ['Ready']);
    // One folder artifact: logs/ with a file and a nested one.
    await api.execute(endpointPathOf(run), {
      command: { shell: 'mkdir -p "$KRUNTIME_ARTIFACTS_DIR/logs/deep" && printf "run 1\\n" > "$KRUNTIME_ARTIFACTS_DIR/logs/run.log" && printf nested > "$KRUNTIME_ARTIFACTS_DIR/logs/deep/n.txt"' },
    });
    server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
    ({ browser, page, wb } = await launchWorkbench('drain-download'));
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

  it('Drain: the progress notification is gone when "closed" is shown', async () => {
    await wb.runCommand('Sandbox Sessions: Close Sandbox (Drain)');
    await wb.pick('dl-a');
    // The progress was on screen while the work ran …
    await progressToasts(/Closing dl-a \(Drain\)/).first().waitFor({ state: 'visible', timeout: 60_000 });
    await wb.waitForNotification(/dl-a closed with 1 artifact/);
    // … and is gone the moment the outcome is shown: checked once, at that moment.
    assert.equal(await progressToasts(/Closing dl-a/).count(), 0, 'no progress notification beside "closed"');
    await wb.screenshot('closed');
  });

  it('Download Artifacts…: starts in the local folder; the folder artifact arrives once, as the folder; no progress is left', async () => {
    await wb.notificationButton(/dl-a closed with 1 artifact/, 'Download Artifacts…');
    // VS Code's simple file dialog (code-server): it shows the folder it starts in, once it has read
    // it (its parent first, while it loads); nothing is typed, so it must be the window's local folder.
    await page.locator('.quick-input-widget input.input').waitFor({ state: 'visible', timeout: 30_000 });
    await wb.waitForFolderDialogAt(project, 'the dialog to start in the window’s local folder');
    // Accepted as it starts: one click on its button, and the dialog must close.
    await wb.acceptFolderDialog(project, 'Download Here', 'download-dialog');
    await wb.waitForNotification(/Downloaded 1 verified artifact\(s\) to/);
    assert.equal(await progressToasts(/Downloading artifacts of dl-a/).count(), 0, 'no progress notification beside "Downloaded"');
    await wb.screenshot('downloaded');
    const dest = path.join(project, 'dl-a');
    assert.deepEqual(fs.readdirSync(dest).sort(), ['logs'], 'the folder artifact arrives once, as the folder');
    assert.equal(fs.readFileSync(path.join(dest, 'logs', 'run.log'), 'utf8'), 'run 1\n');
    assert.equal(fs.readFileSync(path.join(dest, 'logs', 'deep', 'n.txt'), 'utf8'), 'nested');
  });
});
