// Before the sandbox you are working in stops for want of use, the window warns, and Keep Working keeps it: the
// warning comes within the last quarter of its idle timeout (here 20 s: the last 5 s), and Keep Working runs a
// command in it, which the idle clock counts — so it is still Ready past the stop the warning announced.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, until } from './helpers';

const IDLE_SECONDS = 20;

describe('the idle warning and Keep Working', () => {
  it('warns shortly before an idle stop, and Keep Working keeps the sandbox past it', async function () {
    this.timeout(90_000);
    const exported = await api();
    const { sandbox } = await exported.companion.request('sandboxes/create', {
      spec: { provider: 'local', runtime: 'process', namespace: 'default', idleTimeoutSeconds: IDLE_SECONDS },
      waitForReady: true,
    });
    const summaryOf = async (): Promise<SandboxSummary> => (await exported.companion.request('sandboxes/get', { ref: sandbox.ref })).sandbox;
    const file = vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: '/notes.txt' });
    await vscode.workspace.fs.writeFile(file, new TextEncoder().encode('reading, not running\n'));
    const wrote = Date.now();
    const editor = await vscode.window.showTextDocument(file); // the sandbox the user is working in: the status bar's
    try {
      const warning = new RegExp(`^${sandbox.ref.name} stops in \\d+s for want of use: its idle timeout is ${IDLE_SECONDS}s, and only commands and file changes count as use\\.$`);
      await until(() => warning.test(exported.idleWarning() ?? ''), 'the idle warning', (IDLE_SECONDS + 5) * 1000);
      const warnedAfter = Date.now() - wrote;
      assert.ok(warnedAfter >= (IDLE_SECONDS * 3000) / 4 - 1000, `warned ${warnedAfter} ms after the last change: too early`);
      assert.equal((await summaryOf()).phase, 'Ready');

      assert.equal(await vscode.commands.executeCommand('sandboxSessions.keepSandboxWorking', sandbox.key), true);
      // Past the stop the warning announced (counted from the write, the last use before Keep Working).
      const pastStop = wrote + IDLE_SECONDS * 1000 + 3000 - Date.now();
      await new Promise((r) => setTimeout(r, Math.max(0, pastStop)));
      assert.equal((await summaryOf()).phase, 'Ready', 'Keep Working kept it');
    } finally {
      await vscode.commands.executeCommand('notifications.clearAll');
      await vscode.window.showTextDocument(editor.document).then(() => vscode.commands.executeCommand('workbench.action.closeActiveEditor'));
    }
    // Left alone, it still stops for want of use, as before.
    await until(async () => (await summaryOf()).phase === 'Timeout', 'the idle stop', (IDLE_SECONDS + 10) * 1000);
    assert.equal((await summaryOf()).message, 'session idle timeout exceeded');
  });
});
