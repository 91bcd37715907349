// Issue 22's flow end to end: an agent and a person in the same sandbox. An MCP client (the official
// SDK's Client over stdio, spawning `node dist/server.js mcp` with the same state root as the
// code-server window) creates a sandbox and writes a file; the same sandbox, opened in code-server
// (the packaged extension, headless Chromium), shows the file, and its Sandbox terminal runs a
// command whose file the agent then reads; what the agent changes next shows up live in the open editor and
// the Explorer; once it saves the sandbox as a session revision, Source Control lists what it changed since. The
// Sandboxes view marks the agent's sandbox, and a
// person's sandbox granted with Grant to Agents from its context menu becomes usable by the agent,
// which was refused it before. Screenshots in test/e2e/screenshots/mcp-agent-*.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Browser, Page } from 'playwright-core';
import { ensureGateway, stopGateway } from '../../server/gateway/daemonClient';
import { LocalGatewayClient } from '../../server/gateway/localClient';
import { sessionRunBody } from '../../server/sandboxes/sessionRunBody';
import { type SandboxRef, sandboxFolderName, sandboxWorkspaceFile } from '../../protocol/sandboxes';
import { type CodeServer, startCodeServer } from '../../scripts/vscodeHost';
import { packageExtension, REPO_ROOT } from '../../scripts/packageExtension';
import { launchWorkbench, type Workbench } from './workbench';

/** The JSON a tool answered, asserting it was not a tool error. */
function ok<T>(result: unknown): T {
  const r = result as CallToolResult;
  assert.notEqual(r.isError, true, JSON.stringify(r.content));
  return r.structuredContent as T;
}

describe('e2e: an agent (MCP) and a person in the same sandbox', function () {
  this.timeout(300_000);
  let work: string;
  let stateDir: string;
  let server: CodeServer;
  let browser: Browser;
  let page: Page;
  let wb: Workbench;
  let agent: Client;
  let agentLog = '';
  let vsix: string;
  let sandbox: { sandbox: string; name: string };
  const personal = 'person-box';

  const call = (name: string, args: Record<string, unknown>) => agent.callTool({ name, arguments: args });

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-sessions-e2e-mcp-'));
    stateDir = path.join(work, 'state');
    vsix = packageExtension(); // also builds dist/server.js, which the agent's MCP server runs
    fs.mkdirSync(path.join(work, 'home')); // the window's HOME (startCodeServer's workDir layout)

    // The agent's MCP server, as an MCP client configuration starts it (docs/mcp.md): node dist/server.js mcp — as the
    // same user as the window (code-server's HOME, so one session repository), not this test process's user.
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(REPO_ROOT, 'dist/server.js'), 'mcp'],
      cwd: work,
      env: { ...(process.env as Record<string, string>), HOME: path.join(work, 'home'), SANDBOX_SESSIONS_STATE_DIR: stateDir },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (d: Buffer) => (agentLog += d.toString()));
    agent = new Client({ name: 'e2e-agent', version: '0.0.0' });
    await agent.connect(transport);

    // A sandbox of the person's own (not the agent's), made before the window opens.
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, path.join(REPO_ROOT, 'dist/server.js'), 'gateway'] });
    const api = new LocalGatewayClient(gateway.url, gateway.token);
    await api.createRun('default', sessionRunBody({ provider: 'local', namespace: 'default', runtime: 'bubblewrap', name: personal }));
    await api.waitPhase('default', personal, ['Ready']);
  });

  afterEach(async function () {
    await wb?.screenshotIfFailed(this.currentTest);
    if (this.currentTest?.state === 'failed') process.stderr.write(`MCP server log:\n${agentLog.slice(-4000)}\n`);
  });

  after(async () => {
    await agent?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await server?.stop();
    if (stateDir) await stopGateway({ stateDir });
  });

  it('the agent creates a sandbox and writes a file in it', async () => {
    sandbox = ok<{ sandbox: string; name: string; phase: string }>(await call('sandbox_create', {}));
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'agent-notes.md', contents: '# Notes\nwritten by the agent\n' }));
    const read = ok<{ contents: string }>(await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'agent-notes.md' }));
    assert.equal(read.contents, '# Notes\nwritten by the agent\n');
  });

  it('the same sandbox, opened in code-server, shows the file and runs a terminal command the agent sees', async () => {
    const ref: SandboxRef = { provider: 'local', context: 'local', namespace: 'default', name: sandbox.name };
    const workspaceFile = path.join(work, 'workspaces', `${sandboxFolderName(ref)}.code-workspace`);
    fs.mkdirSync(path.dirname(workspaceFile), { recursive: true });
    fs.writeFileSync(workspaceFile, sandboxWorkspaceFile(ref));
    server = await startCodeServer({ workDir: work, env: { SANDBOX_SESSIONS_STATE_DIR: stateDir }, installVsix: vsix });
    ({ browser, page, wb } = await launchWorkbench('mcp-agent'));
    await page.goto(`${server.url}/?workspace=${encodeURIComponent(workspaceFile)}`);
    await wb.waitForWorkbench();

    await wb.explorerItem('agent-notes.md').waitFor({ timeout: 60_000 });
    await wb.explorerItem('agent-notes.md').click();
    await page.locator('.editor-instance .view-lines', { hasText: 'written by the agent' }).waitFor({ timeout: 30_000 });
    await wb.screenshot('agent-file-in-explorer');

    await wb.runCommand('Terminal: Create New Terminal');
    await wb.waitForTerminalText(new RegExp(`${sandbox.name}:/\\$`));
    await wb.typeInTerminal('wc -l agent-notes.md && echo "from the terminal" > person.txt && echo done-$((6*7))');
    await wb.waitForTerminalText(/^2 agent-notes\.md$/m);
    await wb.waitForTerminalText(/^done-42$/m);
    await wb.screenshot('terminal-command');
    const read = ok<{ contents: string }>(await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'person.txt' }));
    assert.equal(read.contents, 'from the terminal\n', "the agent reads the person's file: one sandbox");

    // The agent keeps working while the person watches: its changes show up live (the window follows the
    // sandbox's log), in the open editor and the Explorer, with no Refresh.
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'agent-notes.md', contents: '# Notes\nupdated live by the agent\n' }));
    ok(await call('sandbox_exec', { sandbox: sandbox.sandbox, argv: ['sh', '-c', 'echo live > agent-live.txt'] }));
    await page.locator('.editor-instance .view-lines', { hasText: 'updated live by the agent' }).waitFor({ timeout: 10_000 });
    await wb.explorerItem('agent-live.txt').waitFor({ timeout: 10_000 });
    await wb.screenshot('agent-changes-live');

    // The agent saves its work as a session revision, then goes on: the person's Source Control lists what it changed
    // since that save, with nothing to do in this window (the sandbox's Run says which revision it was saved as).
    const saved = ok<{ revision: string }>(await call('session_save', { sandbox: sandbox.sandbox, sessionId: 'agent-work' }));
    assert.equal(saved.revision, 'r1');
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'after-save.md', contents: 'written after the save\n' }));
    await page.locator('.activitybar [aria-label^="Source Control"]').first().click();
    const scm = page.locator('.scm-view');
    await scm.locator('.monaco-list-row', { hasText: 'Changes since agent-work@r1' }).waitFor({ timeout: 60_000 });
    await scm.locator('.monaco-list-row', { hasText: 'after-save.md' }).waitFor({ timeout: 30_000 });
    assert.equal(await scm.locator('.monaco-list-row', { hasText: 'agent-notes.md' }).count(), 0, 'what the save kept is not a change');
    await wb.screenshot('agent-save-changes');
    await page.locator('.activitybar [aria-label^="Explorer"]').first().click();
  });

  it("the Sandboxes view marks the agent's sandbox, and Grant to Agents from a person's sandbox menu lets the agent in", async () => {
    const refused = (await call('sandbox_exec', { sandbox: `local.local.default.${personal}`, argv: ['true'] })) as CallToolResult;
    assert.equal(refused.isError, true);
    assert.match(JSON.stringify(refused.content), /not_granted/);

    await page.locator('.activitybar [aria-label^="Sandboxes"]').first().click();
    const row = (name: string) => page.locator('.pane-body .monaco-list-row', { hasText: name }).first();
    await row(sandbox.name).waitFor({ timeout: 30_000 });
    assert.match(await row(sandbox.name).innerText(), /by agent · Ready/);
    assert.equal(await row(sandbox.name).locator('.codicon-robot').count(), 1, 'a robot icon');
    assert.doesNotMatch(await row(personal).innerText(), /agent/);
    await wb.screenshot('view-marks-agent-sandbox');

    await row(personal).click({ button: 'right' });
    await page.locator('.monaco-menu .action-item', { hasText: 'Grant to Agents' }).first().waitFor({ timeout: 15_000 });
    await wb.screenshot('context-menu-grant');
    await wb.chooseMenuItem('Grant to Agents');
    await wb.waitForNotification(`Agents may now use ${personal}`);
    await page.locator('.pane-body .monaco-list-row', { hasText: 'granted to agents' }).filter({ hasText: personal }).waitFor({ timeout: 30_000 });
    await wb.screenshot('granted');

    const used = ok<{ stdout: string }>(await call('sandbox_exec', { sandbox: `local.local.default.${personal}`, argv: ['echo', 'agent-in-person-box'] }));
    assert.equal(used.stdout, 'agent-in-person-box\n');
    const listed = ok<{ sandboxes: { sandbox: string; grantedToAgents: boolean }[] }>(await call('sandbox_list', { provider: 'local' }));
    assert.equal(listed.sandboxes.find((s) => s.sandbox === `local.local.default.${personal}`)?.grantedToAgents, true);

    // The menu now offers the way back.
    await row(personal).click({ button: 'right' });
    const revoke = page.locator('.monaco-menu .action-item', { hasText: 'Revoke from Agents' }).first();
    await revoke.waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('.monaco-menu .action-item', { hasText: 'Grant to Agents' }).count(), 0, 'Grant is not offered twice');
    await wb.screenshot('context-menu-revoke');
    await wb.chooseMenuItem('Revoke from Agents');
    await wb.waitForNotification(`Agents may no longer use ${personal}`);
    assert.match(JSON.stringify(((await call('sandbox_exec', { sandbox: `local.local.default.${personal}`, argv: ['true'] })) as CallToolResult).content), /not_granted/);
  });
});
