// A person's flow in a real VS Code (code-server, the packaged extension installed) driven in
// headless Chromium: open a local sandbox as a workspace folder → the explorer shows its files
// → edit and save a file → run `ls` and a failing command in the Sandbox terminal → Ctrl+C a
// `sleep 60` (its process group is gone from the machine afterwards) → Close Sandbox (Drain) →
// download the artifacts to a local folder. Twice: against a local gateway daemon of each
// access API era — era C (the default: `operations:execute`/`operations:stream`) and
// `--api era-d` (only `operations:ws`, as today's kruntimes) — with the same steps; the request
// counters show which transport the window used.
// Screenshots of every step land in test/e2e/screenshots/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { GatewayApi } from '../../server/gateway/apiEra';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { LocalGatewayClient, endpointPathOf } from '../../server/gateway/localClient';
import type { ExecRecord } from '../../server/local/execRecord';
import type { Run } from '../../protocol/kruntimes/run';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { extensionLogs, launchWorkbench, type Workbench } from './workbench';
import { readGatewayFile } from './gatewayFiles';

/**
 * The processes of group `pgid` that still run: /proc entries in that group that are not zombies
 * (a zombie runs nothing; one reparented to a pid 1 that does not reap may linger).
 */
function liveGroupMembers(pgid: number): number[] {
  const live: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // /proc/<pid>/stat: "pid (comm) state ppid pgrp …"; comm may hold spaces, so split after the last ')'.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) === pgid && state !== 'Z') live.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return live;
}

/** Companion servers (`dist/server.js server --stdio`) of the extension installed under `work` that run now. */
function companionServers(work: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.startsWith(path.join(work, 'extensions')) && a.endsWith('server.js')) && argv.includes('--stdio')) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** Built and packaged once for both flows. */
let packaged: string | undefined;

const MODES: Array<{ api: GatewayApi; flow: string }> = [
  { api: 'era-c', flow: 'local-sandbox' },
  { api: 'era-d', flow: 'local-sandbox-era-d' },
];

for (const { api: gatewayApi, flow } of MODES) {
  describe(`e2e: a local sandbox from open to Drain (gateway ${gatewayApi})`, function () {
    this.timeout(180_000);
    let work: string;
    let stateDir: string;
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
        const found = (await api.operations('default', 'e2e-sbx')).filter((r) => r.summary.includes(text));
        if (found.length > 1) throw new Error(`more than one command includes ${text}`);
        if (found[0] && ready(found[0])) return found[0];
        if (Date.now() > deadline) throw new Error(`the command "${text}" never got there: ${JSON.stringify(found[0] ?? 'no record')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };

    before(async () => {
      work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-'));
      stateDir = path.join(work, 'state');
      const vsix = (packaged ??= packageExtension());
      // The sandbox a person would have created earlier (New Sandbox… is covered by the integration suite).
      const gateway = await ensureGateway({ stateDir, api: gatewayApi, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
      assert.equal(gateway.api, gatewayApi);
      api = new LocalGatewayClient(gateway.url, gateway.token);
      const created = await api.createRun('default', {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name: 'e2e-sbx', namespace: 'default' },
        spec: { runtime: 'process', mode: { session: { idleTimeoutSeconds: 900 } } },
      });
      run = await api.waitPhase('default', created.metadata.name!, ['Ready']);
      await api.execute(endpointPathOf(run), { command: { shell: 'printf "hello\\n" > hello.txt && mkdir -p src && printf "console.log(1)\\n" > src/app.js' } });

      server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
      ({ browser, page, wb } = await launchWorkbench(flow));
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
    });

    it('activates in a window without a sandbox and starts no companion server there', async () => {
      // The extension activates once start-up has finished in every window (so that it can give a
      // sandbox window VS Code opened without its folder the folder back); the server waits for a request.
      const deadline = Date.now() + 60_000;
      while (!/\] activated$/m.test(extensionLogs(server.userDataDir))) {
        if (Date.now() > deadline) throw new Error(`the extension did not activate on its own:\n${extensionLogs(server.userDataDir)}`);
        await new Promise((r) => setTimeout(r, 200)); // polls the log file
      }
      assert.deepEqual(companionServers(work), [], extensionLogs(server.userDataDir));
      assert.doesNotMatch(extensionLogs(server.userDataDir), /companion server listening/);
    });

    it('opens the sandbox as the workspace folder from the palette', async () => {
      await wb.runCommand('Sandbox Sessions: Open Sandbox');
      await wb.pick('e2e-sbx');
      await wb.notificationButton(/Open sandbox e2e-sbx as a folder/, 'Open Here');
      // The window reloads with the sandbox as its folder (a workspace file that names it).
      await page.waitForURL(/workspace=.*e2e-sbx/, { timeout: 60_000 });
      await wb.waitForWorkbench();
      await wb.explorerItem('hello.txt').waitFor({ timeout: 60_000 });
      await wb.explorerItem('e2e-sbx · local').waitFor();
      assert.match(await page.title(), /e2e-sbx · local/);
      await wb.screenshot('explorer');
      assert.ok(await wb.explorerItem('src').isVisible());
    });

    it('opens, edits and saves a file; the sandbox has the new content', async () => {
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

    it('runs ls and a failing command in the Sandbox terminal', async () => {
      await wb.runCommand('Sandbox Sessions: Open Terminal');
      await wb.waitForTerminalText(/e2e-sbx:\/\$/);
      await wb.typeInTerminal('ls');
      await wb.waitForTerminalText(/hello\.txt[\s\S]*src/);
      await wb.typeInTerminal("sh -c 'exit 7'");
      await wb.waitForTerminalText(/\[exit 7\]/);
      await wb.screenshot('terminal');
    });

    it('stops sleep 60 with Ctrl+C: the command and every process of it end in the sandbox', async () => {
      // A duration no other command on this machine has, so the daemon's record names this one.
      const sleep = `sleep 60.${Date.now() % 100_000}`;
      await wb.typeInTerminal(sleep);
      const running = await operation(sleep, (r) => r.state === 'running');
      const pgid = running.kill?.pgid;
      assert.ok(pgid !== undefined, 'a local command records its process group');
      assert.ok(liveGroupMembers(pgid).length > 0, 'the sleep runs in the sandbox');
      // Timed from the keypress: typing and starting the command are not what Ctrl+C is about.
      const pressed = Date.now();
      await page.keyboard.press('Control+C');
      await wb.waitForTerminalText(/\[cancelled\]/, 15_000);
      // Not just the screen: the sandbox cancelled the command, and nothing of it is left.
      const ended = await operation(sleep, (r) => r.state !== 'running');
      assert.equal(ended.outcome, 'cancelled', JSON.stringify(ended));
      // The daemon reports a cancelled command only once nothing of its process group runs.
      assert.deepEqual(liveGroupMembers(pgid), [], `processes of group ${pgid} (${sleep}) still run`);
      const cancelMs = Date.now() - pressed;
      assert.ok(cancelMs < 20_000, `Ctrl+C took ${cancelMs} ms to end the command and show [cancelled]`);
      await wb.typeInTerminal('printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"');
      assert.equal((await operation('printf report', (r) => r.state !== 'running')).outcome, 'succeeded');
      await wb.screenshot('ctrl-c');
    });

    it(gatewayApi === 'era-d' ? 'sent every command and file change over operations:ws' : 'sent commands and file changes over HTTP', async () => {
      const requests = await api.requests('default', 'e2e-sbx');
      if (gatewayApi === 'era-d') {
        assert.ok((requests.ws ?? 0) >= 1, JSON.stringify(requests));
        assert.equal(requests.execute ?? 0, 0, JSON.stringify(requests));
        assert.equal(requests.stream ?? 0, 0, JSON.stringify(requests));
      } else {
        assert.ok((requests.stream ?? 0) >= 3, `the terminal's commands: ${JSON.stringify(requests)}`);
        assert.equal(requests.ws ?? 0, 0, JSON.stringify(requests));
      }
    });

    it('closes the sandbox with Drain and downloads its artifacts', async () => {
      const downloads = path.join(work, 'downloads');
      fs.mkdirSync(downloads, { recursive: true });
      await wb.runCommand('Sandbox Sessions: Close Sandbox (Drain)');
      await wb.notificationButton(/e2e-sbx closed with 1 artifact/, 'Download Artifacts…');
      await wb.chooseFolderInDialog(downloads, 'Download Here', 'download-dialog');
      await wb.waitForNotification(/Downloaded 1 verified artifact/);
      await wb.screenshot('downloaded');
      const file = path.join(downloads, 'e2e-sbx', 'report.txt');
      assert.equal(fs.readFileSync(file, 'utf8'), 'report');
      const final = await api.getRun('default', 'e2e-sbx');
      assert.equal(final.status?.phase, 'Succeeded');
    });
  });
}
