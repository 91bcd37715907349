// README's main command exactly as a new user runs it: a fresh HOME, no XDG_* or SANDBOX_SESSIONS_*
// variables, no project tools on PATH, the real `npm start` process. Then, in headless Chromium:
// log in with the printed password, see the sandbox's README.md under a folder named after the
// sandbox, run a command in the Sandbox terminal and check its effect from outside the browser
// with the CLI (same HOME, so the same state root), Ctrl+C `npm start` as a terminal does, and
// check that no editor process is left while the sandbox keeps running.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { REPO_ROOT } from '../../scripts/packageExtension';
import { newUserEnv } from './newUser';
import { launchWorkbench, type Workbench } from './workbench';

/** Live processes whose command line mentions `needle` (read from /proc, no tool needed). */
function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmdline.includes(needle)) found.push(`${pid}: ${cmdline.trim()}`);
    } catch {
      // exited while we looked
    }
  }
  return found;
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('e2e: `npm start` as a new user runs it', function () {
  this.timeout(300_000);
  let home: string;
  let env: NodeJS.ProcessEnv;
  let start: ChildProcess;
  let output = '';
  let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;
  let sandbox: string;
  let url: string;

  /** The CLI as README documents it (`bin/sandbox-sessions`), run with the user's environment. */
  const cli = (...args: string[]) =>
    execFileSync(path.join(REPO_ROOT, 'bin/sandbox-sessions'), args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });

  before(async () => {
    ({ home, env } = newUserEnv('new-user'));
    // Its own process group, as a terminal's foreground job: Ctrl+C signals the whole group.
    start = spawn('npm', ['start'], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    start.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    start.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    // 'close', not 'exit': the process may exit before its last output has been read from the pipes.
    let closed = false;
    exited = new Promise((resolve) =>
      start.once('close', (code, signal) => {
        closed = true;
        resolve({ code, signal });
      }),
    );
    const printed = await waitFor(
      '`npm start` to print the URL and password',
      () => {
        if (closed) throw new Error(`npm start exited (${start.exitCode ?? start.signalCode}):\n${output}`);
        const m = /open (http:\/\/127\.0\.0\.1:\d+\/\S+)\npassword: (\S+)/.exec(output);
        return m ? { url: m[1]!, password: m[2]! } : undefined;
      },
      240_000,
    );
    url = printed.url;
    sandbox = /sandbox (\S+) is Ready/.exec(output)?.[1] ?? assert.fail(`no sandbox name in:\n${output}`);
    ({ browser, page, wb } = await launchWorkbench('npm-start'));
    await page.goto(url);
    await page.locator('input[type=password]').fill(printed.password);
    await page.keyboard.press('Enter');
    await wb.waitForWorkbench();
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    if (start?.pid !== undefined && start.exitCode === null) {
      try {
        process.kill(-start.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    try {
      cli('gateway', '--stop');
    } catch {
      // not running
    }
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  it('used the state root of the user HOME: the sandbox lives there, and no second one was made', () => {
    assert.match(output, new RegExp(`state root: ${home}/\\.local/state/sandbox-sessions`));
    assert.ok(fs.existsSync(path.join(home, '.local/state/sandbox-sessions/gateway.json')));
    const list = JSON.parse(cli('sandbox', 'list', '--json')) as { name: string; phase: string }[];
    assert.deepEqual(
      list.map((r) => [r.name, r.phase]),
      [[sandbox, 'Ready']],
    );
  });

  it("shows the sandbox's README.md under a folder named after the sandbox", async () => {
    await wb.explorerItem('README.md').waitFor({ timeout: 90_000 });
    const folderName = `${sandbox} · local`;
    await wb.explorerItem(folderName).waitFor({ timeout: 30_000 });
    await waitFor('the window title to name the sandbox', async () => ((await page.title()).includes(folderName) ? true : undefined), 30_000);
    await wb.screenshot('explorer');
    // The window's companion server used the same state root: it did not start a daemon of its own.
    const editorHome = path.join(home, '.local/share/sandbox-sessions/code-server/home');
    assert.equal(fs.existsSync(path.join(editorHome, '.local/state/sandbox-sessions')), false, 'a second state root appeared under the editor HOME');
  });

  it('Open Terminal runs a command in the sandbox (checked with the CLI)', async () => {
    await wb.runCommand('Sandbox Sessions: Open Terminal');
    await wb.waitForTerminalText(new RegExp(`${sandbox}:/\\$`), 60_000);
    await wb.typeInTerminal('echo written-in-the-terminal > from-terminal.txt');
    const seen = await waitFor(
      'the file written in the terminal',
      () => {
        try {
          return cli('sandbox', 'exec', sandbox, '--', 'cat', 'from-terminal.txt');
        } catch {
          return undefined;
        }
      },
      60_000,
    );
    assert.equal(seen, 'written-in-the-terminal\n');
    await wb.screenshot('terminal');
  });

  it('Ctrl+C stops code-server and leaves no editor process; the sandbox keeps running', async () => {
    const editorRoot = path.join(home, '.local/share/sandbox-sessions/code-server');
    assert.notDeepEqual(processesMentioning(editorRoot), [], 'code-server should be running before Ctrl+C');
    await browser.close();
    process.kill(-start.pid!, 'SIGINT');
    // npm ends itself with the signal its script ended on, as a shell expects of Ctrl+C.
    const { code, signal } = await exited;
    assert.ok(code === 0 || signal === 'SIGINT', `npm start ended with code ${code}, signal ${signal}:\n${output}`);
    await waitFor('every editor process to exit', () => (processesMentioning(editorRoot).length === 0 ? true : undefined), 20_000).catch(() => {
      throw new Error(`editor processes left after Ctrl+C:\n${processesMentioning(editorRoot).join('\n')}`);
    });
    const printed = /code-server stopped; sandbox \S+ keeps running \((.+) ends it\)/.exec(output);
    assert.ok(printed, output);
    const list = JSON.parse(cli('sandbox', 'list', '--json')) as { name: string; phase: string }[];
    assert.deepEqual(
      list.map((r) => [r.name, r.phase]),
      [[sandbox, 'Ready']],
    );
    // The command it prints to end the sandbox works as printed, in the folder `npm start` ran in.
    execFileSync('bash', ['-c', printed[1] as string], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    const after = JSON.parse(cli('sandbox', 'list', '--json')) as { name: string; phase: string }[];
    assert.deepEqual(
      after.map((r) => [r.name, r.phase]),
      [[sandbox, 'Succeeded']],
    );
  });
});
