// The Sandboxes view in a real VS Code: one item per sandbox with the icon, description and
// context value of its phase, for every phase a Run can be in.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { RunPhase } from '../../../protocol/kruntimes/run';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, contextMenu, newLocalSandbox, until } from './helpers';

const PHASES: RunPhase[] = ['Pending', 'Scheduled', 'Running', 'Ready', 'Finalizing', 'Succeeded', 'Failed', 'Timeout', 'Cancelled'];

describe('Sandboxes view', () => {
  it('shows a sandbox in each phase with its icon, reason and actions', async () => {
    const { tree } = await api();
    const base: SandboxSummary = {
      ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-view' },
      key: 'local.local.default.sbx-view',
      runtime: 'process',
    };
    const icons = new Set<string>();
    for (const phase of PHASES) {
      const item = tree.getTreeItem({ kind: 'sandbox', sandbox: { ...base, phase, reason: phase === 'Failed' ? 'ExecutionLost' : undefined } });
      assert.equal(item.label, 'sbx-view');
      assert.match(String(item.description), new RegExp(`^${phase}`));
      assert.equal(item.contextValue, `sandbox.${phase}.pty`);
      const menu = contextMenu('sandboxSessions.sandboxes', item.contextValue);
      // A Ready local sandbox offers both terminals; a sandbox in any other phase neither.
      assert.equal(menu.includes('sandboxSessions.openTerminal'), phase === 'Ready', `${phase}: Open Terminal`);
      assert.equal(menu.includes('sandboxSessions.openInteractiveTerminal'), phase === 'Ready', `${phase}: Open Interactive Terminal`);
      assert.equal(menu.includes('sandboxSessions.closeSandbox'), ['Pending', 'Scheduled', 'Running', 'Ready'].includes(phase), `${phase}: Close`);
      icons.add((item.iconPath as vscode.ThemeIcon).id);
      assert.match((item.tooltip as vscode.MarkdownString).value, new RegExp(phase));
      if (phase === 'Failed') assert.match(String(item.description), /ExecutionLost/);
      assert.equal(item.command !== undefined, phase === 'Ready', `${phase}: click opens only when Ready`);
    }
    assert.ok(icons.size >= 7, `distinct phase icons: ${[...icons].join(', ')}`);
    // The session revision it was opened from or saved as, by whichever client, is in its tooltip.
    const saved = tree.getTreeItem({ kind: 'sandbox', sandbox: { ...base, phase: 'Ready', sessionRevision: { sessionId: 'demo', revision: 'r3', at: new Date().toISOString(), how: 'saved' } } });
    assert.match((saved.tooltip as vscode.MarkdownString).value, /Session: demo@r3, saved /);
    assert.doesNotMatch((tree.getTreeItem({ kind: 'sandbox', sandbox: { ...base, phase: 'Ready' } }).tooltip as vscode.MarkdownString).value, /Session:/);
  });

  it('lists a new sandbox under Local → default', async () => {
    const created = await newLocalSandbox();
    const { tree } = await api();
    const roots = await tree.getChildren();
    const local = roots.find((n) => n.kind === 'provider' && n.provider.kind === 'local');
    assert.ok(local);
    const namespaces = await tree.getChildren(local);
    const ns = namespaces.find((n) => n.kind === 'namespace' && n.namespace === 'default');
    assert.ok(ns);
    const sandboxes = await tree.getChildren(ns);
    assert.ok(sandboxes.some((n) => n.kind === 'sandbox' && n.sandbox.key === created.key && n.sandbox.phase === 'Ready'));
  });

  it("the view's + creates a sandbox while a row is selected (VS Code passes the row)", async () => {
    const { registry } = await api();
    const row = { kind: 'sandbox' as const, sandbox: (await newLocalSandbox()) };
    const known = new Set(registry.all().map((s) => s.key));
    const running = Promise.resolve(vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', row));
    let result: SandboxSummary | undefined | 'pending' = 'pending';
    void running.then((r) => (result = r));
    // Each pick (provider, runtime) is answered with its first item, as a person pressing Enter.
    await until(async () => {
      await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
      return registry.all().some((s) => !known.has(s.key)) || result !== 'pending';
    }, 'the new sandbox', 60_000);
    await until(async () => {
      await vscode.commands.executeCommand('notifications.clearAll');
      return result !== 'pending';
    }, 'New Sandbox to finish', 60_000);
    const created = await running;
    assert.ok(created, 'New Sandbox returned a sandbox instead of refusing the selected row as its arguments');
    assert.ok(!known.has(created.key));
    await (await api()).companion.request('sandboxes/terminate', { ref: created.ref, mode: 'Immediate', wait: true });
  });
});
