// kruntimes sandboxes in a real VS Code, against the kruntimes cluster SIMULATOR that run.ts
// starts (test/fixtures/cluster; not Kubernetes) and hands to code-server as KUBECONFIG: the
// provider and its contexts in the Sandboxes view, New Sandbox with everything preselected and
// from a namespace's "New Sandbox Here", the `sandbox:` file system, a command in the Sandbox
// terminal, and Close Sandbox (Drain) to Succeeded with its artifact downloaded.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { DownloadedArtifact, ProviderInfo, SandboxSummary } from '../../../protocol/sandboxes';
import { kubeconfigFromSetting } from '../../../extension/companion/kubeconfigSetting';
import type { SandboxTreeNode } from '../../../extension/views/sandboxTree';
import { api, plain, until } from './helpers';

const CONTEXT = 'simulator';
const NAMESPACE = 'default';
const RUNTIME = 'bash';

const text = (s: string) => new TextEncoder().encode(s);
const read = async (uri: vscode.Uri) => new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));

async function kruntimesProvider(): Promise<ProviderInfo> {
  const { providers } = await (await api()).companion.request('providers/list', {});
  const provider = providers.find((p) => p.kind === 'kruntimes');
  assert.ok(provider, `providers: ${providers.map((p) => p.kind).join(', ')}`);
  return provider;
}

async function kruntimesSandboxes(): Promise<SandboxSummary[]> {
  return (await api()).registry.list('kruntimes', { context: CONTEXT, namespace: NAMESPACE });
}

/** The Sandboxes view's node for the simulator's `default` namespace. */
async function namespaceNode(): Promise<SandboxTreeNode & { kind: 'namespace' }> {
  const { tree } = await api();
  tree.refresh();
  const provider = (await tree.getChildren()).find((n) => n.kind === 'provider' && n.provider.kind === 'kruntimes');
  assert.ok(provider, 'a kruntimes provider node');
  const context = (await tree.getChildren(provider)).find((n) => n.kind === 'context' && n.context === CONTEXT);
  assert.ok(context, 'the simulator context node');
  const ns = (await tree.getChildren(context)).find((n) => n.kind === 'namespace' && n.namespace === NAMESPACE);
  assert.ok(ns && ns.kind === 'namespace', 'the default namespace node');
  return ns;
}

describe('kruntimes sandboxes (cluster simulator)', () => {
  let sandbox: SandboxSummary;
  const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });

  it('lists the kruntimes provider, available, with the simulator as the current context', async () => {
    const provider = await kruntimesProvider();
    assert.equal(provider.available, true, provider.reason);
    const context = provider.contexts.find((c) => c.name === CONTEXT);
    assert.ok(context, `contexts: ${provider.contexts.map((c) => c.name).join(', ')}`);
    assert.equal(context.current, true);
    assert.equal(context.namespace, NAMESPACE);
    assert.ok(context.namespaces.includes(NAMESPACE));
    assert.ok(provider.runtimes.some((r) => r.name === RUNTIME), `runtimes: ${provider.runtimes.map((r) => r.name).join(', ')}`);
  });

  it('shows kubeconfig contexts in the Sandboxes view, the current one marked and first', async () => {
    const { tree } = await api();
    tree.refresh();
    const providerNode = (await tree.getChildren()).find((n) => n.kind === 'provider' && n.provider.kind === 'kruntimes');
    assert.ok(providerNode);
    const providerItem = tree.getTreeItem(providerNode);
    assert.equal(providerItem.label, 'kruntimes');
    assert.ok(!String(providerItem.description).includes('unavailable'), 'no "unavailable" mark');
    assert.match(String(providerItem.description), /kubeconfig/, 'the kubeconfig file');
    const contexts = await tree.getChildren(providerNode);
    assert.ok(contexts.every((n) => n.kind === 'context'), 'only contexts under an available provider');
    const [first] = contexts;
    assert.ok(first && first.kind === 'context' && first.context === CONTEXT, 'the current context first');
    const item = tree.getTreeItem(first);
    assert.equal(item.description, 'current');
    assert.equal(item.contextValue, 'context.current');
    assert.equal(item.collapsibleState, vscode.TreeItemCollapsibleState.Expanded);
    const other = contexts.find((n) => n.kind === 'context' && n.context !== CONTEXT);
    assert.ok(other, 'the other contexts of the kubeconfig');
    assert.equal(tree.getTreeItem(other).description, undefined);
    assert.equal(tree.getTreeItem(other).collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
    const namespaces = await tree.getChildren(first);
    assert.ok(namespaces[0]?.kind === 'namespace' && namespaces[0].namespace === NAMESPACE, "the context's namespace first");
    const nsItem = tree.getTreeItem(namespaces[0]);
    assert.equal(nsItem.contextValue, 'namespace.kruntimes', 'the "New Sandbox Here" menu matches it');
    assert.equal(nsItem.collapsibleState, vscode.TreeItemCollapsibleState.Expanded);
  });

  it('shows why a provider is unavailable as its first child, a click away from the setting', async () => {
    const { tree } = await api();
    const unavailable: ProviderInfo = { kind: 'kruntimes', label: 'kruntimes', available: false, reason: 'no kubeconfig found: set KUBECONFIG', contexts: [], runtimes: [] };
    const item = tree.getTreeItem({ kind: 'provider', provider: unavailable });
    assert.equal(item.description, 'unavailable');
    const children = await tree.getChildren({ kind: 'provider', provider: unavailable });
    assert.equal(children.length, 1);
    const [message] = children;
    assert.ok(message?.kind === 'message');
    assert.match(message.text, /no kubeconfig found/);
    assert.deepEqual(tree.getTreeItem(message).command?.arguments, ['sandboxSessions.kubeconfig']);
  });

  it('refuses a Runtime name or a context that cannot exist, creating nothing', async () => {
    const before = (await kruntimesSandboxes()).length;
    for (const args of [
      { runtime: '-bash' },
      { runtime: 'bash!' },
      { context: 'no-such-context' },
      { namespace: 'Not_A_Namespace' },
    ]) {
      const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
        provider: 'kruntimes',
        context: CONTEXT,
        namespace: NAMESPACE,
        runtime: RUNTIME,
        open: false,
        ...args,
      });
      assert.equal(created, undefined, JSON.stringify(args));
    }
    assert.equal((await kruntimesSandboxes()).length, before);
  });

  it('creates a Ready sandbox with New Sandbox and everything preselected', async () => {
    const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
      provider: 'kruntimes',
      context: CONTEXT,
      namespace: NAMESPACE,
      runtime: RUNTIME,
      open: false,
    });
    assert.ok(created, 'New Sandbox returned the sandbox');
    sandbox = created;
    assert.equal(sandbox.phase, 'Ready');
    assert.deepEqual({ ...sandbox.ref, name: '' }, { provider: 'kruntimes', context: CONTEXT, namespace: NAMESPACE, name: '' });
    assert.equal(sandbox.runtime, RUNTIME);
    const { tree } = await api();
    const listed = await tree.getChildren(await namespaceNode());
    assert.ok(listed.some((n) => n.kind === 'sandbox' && n.sandbox.key === sandbox.key), 'listed under simulator → default');
  });

  it('writes, reads and lists files through the sandbox: file system', async () => {
    await vscode.workspace.fs.createDirectory(uri('src'));
    await vscode.workspace.fs.writeFile(uri('src/hello.txt'), text('hello kruntimes\n'));
    assert.equal(await read(uri('src/hello.txt')), 'hello kruntimes\n');
    const stat = await vscode.workspace.fs.stat(uri('src/hello.txt'));
    assert.equal(stat.type, vscode.FileType.File);
    assert.equal(stat.size, 16);
    assert.deepEqual(await vscode.workspace.fs.readDirectory(uri('src')), [['hello.txt', vscode.FileType.File]]);
  });

  it('runs commands in a Sandbox terminal', async () => {
    const exported = await api();
    const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
    assert.ok(terminal, 'a terminal was opened');
    const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
    const prompts = () => screen().split(`\n${sandbox.ref.name}:`).length - 1;
    try {
      await until(() => screen().includes(`${sandbox.ref.name}:/$ `), 'the prompt');
      let seen = prompts();
      terminal.sendText('cat src/hello.txt && echo made-by-terminal > src/made.txt', true);
      await until(() => prompts() > seen, 'the next prompt');
      assert.match(screen(), /hello kruntimes\r\n/);
      // The file system sees what the command made.
      assert.equal(await read(uri('src/made.txt')), 'made-by-terminal\n');
      seen = prompts();
      terminal.sendText('printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"; sh -c "exit 4"', true);
      await until(() => prompts() > seen, 'the next prompt');
      assert.match(screen(), /\[exit 4\]/);
    } finally {
      terminal.dispose();
    }
  });

  it('closes the sandbox with Drain: Succeeded, and its artifact downloads verified', async () => {
    const closed = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.closeSandbox', sandbox.key);
    assert.ok(closed, 'Close Sandbox returned the closed sandbox');
    assert.equal(closed.phase, 'Succeeded', `${closed.phase} ${closed.reason ?? ''} ${closed.message ?? ''}`);
    assert.deepEqual(closed.artifacts?.map((a) => a.name), ['report.txt']);
    const { registry } = await api();
    assert.equal((await registry.refresh(sandbox.ref)).phase, 'Succeeded');
    const destination = fs.mkdtempSync(path.join(process.env.SANDBOX_SESSIONS_IT_WORK ?? os.tmpdir(), 'kruntimes-artifacts-'));
    const artifacts = await vscode.commands.executeCommand<DownloadedArtifact[] | undefined>('sandboxSessions.downloadArtifacts', sandbox.key, destination);
    assert.equal(artifacts?.length, 1);
    assert.equal(fs.readFileSync(path.join(destination, 'report.txt'), 'utf8'), 'report');
  });

  it('creates a sandbox from "New Sandbox Here" on a namespace, picking a listed Runtime', async () => {
    const { registry } = await api();
    const known = new Set((await kruntimesSandboxes()).map((s) => s.key));
    const node = await namespaceNode();
    const running = Promise.resolve(vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandboxHere', node));
    let result: SandboxSummary | undefined | 'pending' = 'pending';
    void running.then((r) => (result = r));
    // The Runtime pick lists `bash` first: accept it as a person pressing Enter would.
    await until(async () => {
      await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
      return registry.all().some((s) => s.ref.provider === 'kruntimes' && !known.has(s.key)) || result !== 'pending';
    }, 'the new sandbox', 60_000);
    // Then it offers to open the folder: dismiss the offer (the test keeps its window as it is).
    await until(async () => {
      await vscode.commands.executeCommand('notifications.clearAll');
      return result !== 'pending';
    }, 'New Sandbox Here to finish', 60_000);
    const created = await running;
    assert.ok(created, 'New Sandbox Here returned the sandbox');
    assert.equal(created.ref.context, CONTEXT);
    assert.equal(created.ref.namespace, NAMESPACE);
    assert.equal(created.runtime, RUNTIME);
    assert.equal(created.phase, 'Ready');
    await (await api()).companion.request('sandboxes/terminate', { ref: created.ref, mode: 'Immediate', wait: true });
  });

  it('turns the kubeconfig setting into the KUBECONFIG path list the server gets', () => {
    assert.equal(kubeconfigFromSetting(''), undefined, 'empty: inherit');
    assert.equal(kubeconfigFromSetting('  '), undefined);
    assert.equal(kubeconfigFromSetting('~/.kube/a: /etc/b :', '/home/me', ':'), '/home/me/.kube/a:/etc/b');
    assert.equal(kubeconfigFromSetting('~', '/home/me', ':'), '/home/me');
  });
});
