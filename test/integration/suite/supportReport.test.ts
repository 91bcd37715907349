// Export Support Report… in a real VS Code: one Markdown file with the doctor's checks, the providers, the
// sandboxes this window knows (with their file system counters and gateway round trip) and the extension's log —
// and not the local gateway's bearer token, which every sandbox connection of this window uses. Check This Machine
// shows the same doctor's checks in a list.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import { api, newLocalSandbox, until } from './helpers';

describe('Export Support Report', () => {
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('writes the doctor, providers, sandboxes with their counters and the log, without the gateway token, and opens it', async () => {
    const sandbox = await newLocalSandbox();
    const uri = (p: string) => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
    await vscode.workspace.fs.writeFile(uri('report-probe.txt'), new TextEncoder().encode('x'));
    await vscode.workspace.fs.readDirectory(uri(''));
    // Worked in (an editor of it): the status bar measures its gateway's round trip (shown in the item with 0).
    const settings = vscode.workspace.getConfiguration('sandboxSessions');
    await settings.update('latencyWarningMs', 0, vscode.ConfigurationTarget.Global);
    await vscode.window.showTextDocument(uri('report-probe.txt'));
    const a = await api();
    await until(() => /\$\(pulse\) \d+ ms/.test(a.statusBarText() ?? ''), 'a measured round trip');
    await settings.update('latencyWarningMs', undefined, vscode.ConfigurationTarget.Global);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'support-report-'));
    const target = vscode.Uri.file(path.join(dir, 'report.md'));
    const written = await vscode.commands.executeCommand<vscode.Uri | undefined>('sandboxSessions.exportSupportReport', target);
    assert.equal(written?.fsPath, target.fsPath);
    const report = fs.readFileSync(target.fsPath, 'utf8');

    assert.match(report, /^# Sandbox Sessions support report\n/);
    assert.match(report, /## Doctor\n\n- ok — node: [\s\S]*\n- ok — state directory: /);
    assert.match(report, /- ok — local gateway: /);
    assert.match(report, /## Providers\n\n- Local \(local\): available/);
    assert.match(
      report,
      new RegExp(`- ${sandbox.key.replace(/\./g, '\\.')}: Ready[^\n]*; file system calls: listing pages [1-9]\\d*, reads \\d+, changes [1-9]\\d*; gateway round trip \\d+ ms \\(median of [1-9]\\d*\\)`),
    );
    assert.match(report, /## Log\n[\s\S]*\[info\] activated/);

    const gateway = JSON.parse(fs.readFileSync(path.join(process.env.SANDBOX_SESSIONS_STATE_DIR ?? '', 'gateway.json'), 'utf8')) as { token: string };
    assert.ok(gateway.token.length >= 16);
    assert.ok(!report.includes(gateway.token), 'the gateway token is not in the report');
    assert.equal(vscode.window.activeTextEditor?.document.uri.fsPath, target.fsPath, 'the report is open for reading');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('Check This Machine lists the doctor\'s checks, failed ones first, with their count in the title', async () => {
    type Shown = { report: { checks: { name: string; ok: boolean; detail: string }[] }; title: string; items: string[] };
    const shown = await vscode.commands.executeCommand<Shown>('sandboxSessions.checkMachine');
    await vscode.commands.executeCommand('workbench.action.closeQuickOpen');
    const { checks } = shown.report;
    assert.deepEqual(checks.map((c) => c.name).sort(), ['backend bubblewrap', 'backend opensandbox', 'backend process', 'kruntimes', 'local gateway', 'node', 'state directory']);
    for (const name of ['node', 'state directory', 'local gateway', 'backend process']) assert.equal(checks.find((c) => c.name === name)?.ok, true, name);
    const failed = checks.filter((c) => !c.ok);
    assert.equal(shown.title, failed.length === 0 ? `All ${checks.length} checks passed` : `${failed.length} of ${checks.length} checks failed`);
    assert.deepEqual(
      shown.items,
      [...failed, ...checks.filter((c) => c.ok)].map((c) => `${c.ok ? '$(pass)' : '$(error)'} ${c.name}`),
      'failed checks first, each marked',
    );
  });
});
