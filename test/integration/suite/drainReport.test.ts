// The Drain report: a sandbox closed with Drain opens, in the Sandboxes view, to the artifacts it exported — each with
// its size, type and sha256 — and a row opens a file artifact in an editor or saves any artifact to a folder, each
// downloaded and verified against its digest (extension/commands/sandbox/artifactActions.ts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import type { SandboxTreeNode } from '../../../extension/views/sandboxTree';
import { api, newLocalSandbox } from './helpers';

describe('the Drain report of a closed sandbox (Sandboxes view)', () => {
  let closed: SandboxSummary;
  let rows: SandboxTreeNode[];

  before(async function () {
    this.timeout(60_000);
    const exported = await api();
    const sandbox = await newLocalSandbox();
    const client = await exported.registry.connection(sandbox.key)!.client();
    const made = await client.runCommand({ shell: 'cd "$KRUNTIME_ARTIFACTS_DIR" && printf "all green\\n" > report.txt && mkdir logs && printf "line\\n" > logs/run.log' });
    assert.equal(made.exitCode, 0, made.stderr.toString());
    const result = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.closeSandbox', sandbox.key);
    assert.equal(result?.phase, 'Succeeded');
    closed = result;
    rows = await exported.tree.getChildren({ kind: 'sandbox', sandbox: closed });
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('a closed sandbox opens to its artifacts: name, size, type and the start of its sha256', async () => {
    const { tree } = await api();
    const sandboxItem = tree.getTreeItem({ kind: 'sandbox', sandbox: closed });
    assert.equal(sandboxItem.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
    assert.deepEqual(rows.map((r) => (r.kind === 'artifact' ? r.artifact.name : r.kind)), ['logs', 'report.txt']);
    const report = rows.find((r) => r.kind === 'artifact' && r.artifact.name === 'report.txt');
    assert.ok(report && report.kind === 'artifact');
    const item = tree.getTreeItem(report);
    assert.equal(item.description, `10 B · file · ${report.artifact.digest.slice(7, 19)}`);
    assert.equal(item.contextValue, 'artifact.file');
    assert.equal(item.command?.command, 'sandboxSessions.openArtifact');
    const logs = tree.getTreeItem(rows.find((r) => r.kind === 'artifact' && r.artifact.name === 'logs') as SandboxTreeNode);
    assert.match(String(logs.description), / · folder, as \.tar\.gz · /);
    assert.equal(logs.command, undefined, 'a folder is saved, not opened');
  });

  it('Open Artifact opens the file artifact in an editor, downloaded and verified', async () => {
    const report = rows.find((r) => r.kind === 'artifact' && r.artifact.name === 'report.txt');
    const file = await vscode.commands.executeCommand<string | undefined>('sandboxSessions.openArtifact', report);
    assert.ok(file);
    assert.equal(vscode.window.activeTextEditor?.document.uri.fsPath, file);
    assert.equal(vscode.window.activeTextEditor?.document.getText(), 'all green\n');
    // Opened again: the same verified file, not a second download beside it.
    assert.equal(await vscode.commands.executeCommand<string | undefined>('sandboxSessions.openArtifact', report), file);
  });

  it('Save Artifact… saves one artifact (a folder unpacked), verified against its sha256', async () => {
    const destination = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-it-artifact-'));
    const logs = rows.find((r) => r.kind === 'artifact' && r.artifact.name === 'logs');
    const saved = await vscode.commands.executeCommand<{ name: string; path: string; digest: string; unpackedTo?: string } | undefined>('sandboxSessions.saveArtifact', logs, destination);
    assert.ok(saved && logs?.kind === 'artifact');
    assert.equal(saved.digest, logs.artifact.digest);
    assert.equal(fs.readFileSync(path.join(saved.unpackedTo ?? '', 'run.log'), 'utf8'), 'line\n');
    assert.deepEqual(fs.readdirSync(destination), ['logs'], 'only the artifact asked for (report.txt is not there)');
  });
});
