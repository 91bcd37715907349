// The Sessions and Sandboxes views in a real VS Code (issue 24, defect 10): a revision's context
// menu has Compare, which diffs the active editor's file with that revision (the menu passes the
// tree item), and every time in the views is shown one way (`YYYY-MM-DD HH:MM`).
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { sandboxTooltip } from '../../../extension/views/sandboxTree';
import type { SessionTreeNode } from '../../../extension/views/sessionTree';
import { api, EXTENSION_ID, newLocalSandbox } from './helpers';

const text = (s: string) => new TextEncoder().encode(s);
const TIME = /\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b/;

describe('Sessions view: Compare on a revision, one date format', () => {
  let sandbox: SandboxSummary;
  let revision: SessionTreeNode;
  let session: SessionTreeNode;
  const readme = () => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: '/README.md' });

  before(async () => {
    sandbox = await newLocalSandbox();
    await vscode.workspace.fs.writeFile(readme(), text('first\n'));
    await vscode.commands.executeCommand('sandboxSessions.saveSandboxAsRevision', sandbox.key, { sessionId: 'it-compare' });
    await vscode.workspace.fs.writeFile(readme(), text('second\n'));
    const { sessions } = await api();
    const [repository] = await sessions.getChildren();
    const found = (await sessions.getChildren(repository)).find((n) => n.kind === 'session' && n.session.sessionId === 'it-compare');
    assert.ok(found, 'the session is listed');
    session = found;
    const r1 = (await sessions.getChildren(session)).find((n) => n.kind === 'revision');
    assert.ok(r1, 'its revision is listed');
    revision = r1;
  });

  it('offers Compare in a revision’s context menu, and it diffs the active file with that revision', async () => {
    const menus = (vscode.extensions.getExtension(EXTENSION_ID)?.packageJSON as { contributes: { menus: Record<string, { command: string; when?: string }[]> } }).contributes.menus;
    const entry = menus['view/item/context']?.find((m) => m.command === 'sandboxSessions.compareWithRevision');
    assert.ok(entry, 'the command is in the Sessions view’s item context menu');
    assert.match(entry.when ?? '', /view == sandboxSessions\.sessions/);
    assert.match(entry.when ?? '', /viewItem == revision/);
    // What the context menu does: run the command with the revision's tree item.
    await vscode.window.showTextDocument(readme());
    await vscode.commands.executeCommand('sandboxSessions.compareWithRevision', revision);
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    assert.ok(input instanceof vscode.TabInputTextDiff, 'a diff editor is open');
    assert.equal(input.original.toString(), vscode.Uri.from({ scheme: 'sandbox-revision', authority: 'r1.it-compare', path: '/workspace/README.md' }).toString());
    assert.equal(input.modified.toString(), readme().toString());
    await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
  });

  it('shows every time in the views as YYYY-MM-DD HH:MM', async () => {
    const { sessions, registry } = await api();
    const revisionItem = sessions.getTreeItem(revision);
    assert.match(String(revisionItem.description), TIME);
    assert.match((revisionItem.tooltip as vscode.MarkdownString).value, new RegExp(`committed ${TIME.source}`));
    assert.match((sessions.getTreeItem(session).tooltip as vscode.MarkdownString).value, new RegExp(`updated ${TIME.source}`));
    const summary = registry.summary(sandbox.key) ?? sandbox;
    assert.ok(summary.createdAt, 'the sandbox has a creation time');
    assert.match(sandboxTooltip(summary).value, new RegExp(`Created: ${TIME.source.replace(/-/g, '\\\\-')}`));
    // No other shape of date anywhere in them (ISO with a T, or a locale's slashes).
    const all = [String(revisionItem.description), (revisionItem.tooltip as vscode.MarkdownString).value, (sessions.getTreeItem(session).tooltip as vscode.MarkdownString).value, sandboxTooltip(summary).value];
    for (const t of all) assert.doesNotMatch(t, /\d{4}-\d{2}-\d{2}T\d|\d{1,2}\/\d{1,2}\/\d{2,4}/, t);
  });
});
