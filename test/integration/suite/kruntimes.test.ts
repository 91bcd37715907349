// kruntimes sandboxes in a real VS Code, against the kruntimes cluster SIMULATORS that run.ts
// starts (test/fixtures/cluster; not Kubernetes) and hands to code-server as KUBECONFIG: the
// provider and its contexts in the Sandboxes view, New Sandbox from a namespace's "New Sandbox
// Here", and — once per upstream era (context `simulator`: era D, today's kruntimes, whose
// gateway serves commands and file changes only over `operations:ws`; context `simulator-era-c`:
// era C, HTTP `operations:execute`/`operations:stream`) — a person's flow: New Sandbox with
// everything preselected (with the lifetime the era allows), the `sandbox:` file system, a file
// edited and saved in an editor, commands in the Sandbox terminal, Ctrl+C of a running command
// (its process gone from the machine, not just from the screen), and Close Sandbox (Drain) to
// Succeeded with its artifact downloaded.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { DownloadedArtifact, ProviderInfo, SandboxSummary } from '../../../protocol/sandboxes';
import { kubeconfigFromSetting } from '../../../extension/companion/kubeconfigSetting';
import type { SandboxTreeNode } from '../../../extension/views/sandboxTree';
import { api, contextMenu, plain, until } from './helpers';

/** The current context: the era-D simulator. */
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

/** The simulator of each era and its context (run.ts). */
const ERAS = [
  { era: 'D', context: 'simulator' },
  { era: 'C', context: 'simulator-era-c' },
] as const;

async function kruntimesSandboxes(context: string = CONTEXT): Promise<SandboxSummary[]> {
  return (await api()).registry.list('kruntimes', { context, namespace: NAMESPACE });
}

interface ProcessInfo {
  pid: number;
  pgid: number;
  /** `Z` for a zombie: it runs nothing (one reparented to a pid 1 that does not reap may linger). */
  state: string;
  argv: string[];
}

/** Every process of this machine (the simulator runs sandbox commands here, with the process backend). */
function processes(): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // /proc/<pid>/stat: "pid (comm) state ppid pgrp …"; comm may hold spaces, so split after the last ')'.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state = '', , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').slice(0, -1);
      found.push({ pid: Number(entry), pgid: Number(pgrp), state, argv });
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** The running (non-zombie) processes whose command line is exactly `argv`. */
const running = (argv: string[]) => processes().filter((p) => p.state !== 'Z' && p.argv.join('\0') === argv.join('\0'));
/** The running (non-zombie) processes of group `pgid`. */
const liveGroupMembers = (pgid: number) => processes().filter((p) => p.state !== 'Z' && p.pgid === pgid);

/** The Sandboxes view's node for the `default` namespace of a simulator's context. */
async function namespaceNode(context: string = CONTEXT): Promise<SandboxTreeNode & { kind: 'namespace' }> {
  const { tree } = await api();
  tree.refresh();
  const provider = (await tree.getChildren()).find((n) => n.kind === 'provider' && n.provider.kind === 'kruntimes');
  assert.ok(provider, 'a kruntimes provider node');
  const contextNode = (await tree.getChildren(provider)).find((n) => n.kind === 'context' && n.context === context);
  assert.ok(contextNode, `the ${context} context node`);
  const ns = (await tree.getChildren(contextNode)).find((n) => n.kind === 'namespace' && n.namespace === NAMESPACE);
  assert.ok(ns && ns.kind === 'namespace', 'the default namespace node');
  return ns;
}

describe('kruntimes sandboxes (cluster simulator)', () => {
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
    // code-server is a remote window: the machine-scoped setting is on the Settings editor's Remote tab.
    const command = tree.getTreeItem(message).command;
    assert.equal(command?.command, vscode.env.remoteName ? 'workbench.action.openRemoteSettings' : 'workbench.action.openSettings');
    assert.deepEqual(command?.arguments, [{ query: '@id:sandboxSessions.kubeconfig' }]);
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

for (const { era, context } of ERAS) {
  describe(`a kruntimes sandbox from New Sandbox to Drain (simulator era ${era})`, () => {
    let sandbox: SandboxSummary;
    const uri = (p = '') => vscode.Uri.from({ scheme: 'sandbox', authority: sandbox.key, path: `/${p}` });
    const openTerminal = async () => {
      const exported = await api();
      const terminal = await vscode.commands.executeCommand<vscode.Terminal | undefined>('sandboxSessions.openTerminal', sandbox.key);
      assert.ok(terminal, 'a terminal was opened');
      const screen = () => plain(exported.terminalTranscript(terminal) ?? '');
      const prompts = () => screen().split(`\n${sandbox.ref.name}:`).length - 1;
      await until(() => screen().includes(`${sandbox.ref.name}:/$ `), 'the prompt');
      /** Types a line and waits for the prompt after it. */
      const run = async (line: string) => {
        const seen = prompts();
        terminal.sendText(line, true);
        await until(() => prompts() > seen, `the prompt after ${line}`, 30_000);
      };
      return { terminal, screen, run };
    };

    it(`creates a Ready sandbox with New Sandbox and everything preselected, with era ${era}'s lifetime`, async () => {
      const created = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.newSandbox', {
        provider: 'kruntimes',
        context,
        namespace: NAMESPACE,
        runtime: RUNTIME,
        open: false,
      });
      assert.ok(created, 'New Sandbox returned the sandbox');
      sandbox = created;
      assert.equal(sandbox.phase, 'Ready');
      assert.deepEqual({ ...sandbox.ref, name: '' }, { provider: 'kruntimes', context, namespace: NAMESPACE, name: '' });
      assert.equal(sandbox.runtime, RUNTIME);
      if (era === 'D') {
        // No idle timeout on today's kruntimes: a lease the window holds, and a total timeout.
        assert.equal(sandbox.idleTimeoutSeconds, undefined);
        assert.equal(sandbox.leaseTimeoutSeconds, 300);
        assert.equal(sandbox.timeout, '8h');
      } else {
        assert.equal(sandbox.idleTimeoutSeconds, 3600);
        assert.equal(sandbox.leaseTimeoutSeconds, undefined);
      }
      const listed = await (await api()).tree.getChildren(await namespaceNode(context));
      assert.ok(listed.some((n) => n.kind === 'sandbox' && n.sandbox.key === sandbox.key), `listed under ${context} → default`);
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

    it('edits and saves a file in an editor; the sandbox has the new content', async () => {
      const doc = await vscode.workspace.openTextDocument(uri('src/hello.txt'));
      const editor = await vscode.window.showTextDocument(doc);
      try {
        assert.ok(await editor.edit((b) => b.insert(doc.lineAt(doc.lineCount - 1).range.end, `edited in era ${era}\n`)));
        assert.equal(await doc.save(), true, 'the save succeeded');
        assert.equal(doc.isDirty, false);
      } finally {
        await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
      }
      // Read back by the sandbox itself (not the editor's copy): see the terminal test, which cats it.
      assert.equal(await read(uri('src/hello.txt')), `hello kruntimes\nedited in era ${era}\n`);
    });

    it('runs commands in a Sandbox terminal', async () => {
      const { terminal, screen, run } = await openTerminal();
      try {
        await run('cat src/hello.txt && echo made-by-terminal > src/made.txt');
        assert.match(screen(), new RegExp(`hello kruntimes\\r\\nedited in era ${era}\\r\\n`));
        // The file system sees what the command made.
        assert.equal(await read(uri('src/made.txt')), 'made-by-terminal\n');
        await run('printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"; sh -c "exit 4"');
        assert.match(screen(), /\[exit 4\]/);
      } finally {
        terminal.dispose();
      }
    });

    it('Open Interactive Terminal is not in a kruntimes sandbox\'s menu; asked for anyway, it says why and opens nothing', async () => {
      const { tree } = await api();
      const row = (await tree.getChildren(await namespaceNode(context))).find((n) => n.kind === 'sandbox' && n.sandbox.key === sandbox.key);
      assert.ok(row, 'the sandbox is listed');
      const menu = contextMenu('sandboxSessions.sandboxes', tree.getTreeItem(row).contextValue);
      assert.ok(menu.includes('sandboxSessions.openTerminal'), `the line-based terminal is offered: ${menu.join(', ')}`);
      assert.ok(!menu.includes('sandboxSessions.openInteractiveTerminal'), 'the interactive one is not');
      const before = vscode.window.terminals.length;
      const answer = await vscode.commands.executeCommand<vscode.Terminal | string | undefined>('sandboxSessions.openInteractiveTerminal', sandbox.key);
      assert.equal(typeof answer, 'string', 'the command answers with the reason it shows');
      assert.match(answer as string, /has no interactive terminal: .*served by a kruntimes gateway, whose API has no PTY/);
      assert.match(answer as string, /line-based Sandbox terminal/);
      assert.equal(vscode.window.terminals.length, before, 'no terminal was opened');
    });

    it('stops a running command with Ctrl+C: its process ends in the sandbox, and the terminal goes on', async () => {
      const { terminal, screen, run } = await openTerminal();
      // A duration no other process on this machine has, so we can find exactly this sleep.
      const sleep = ['sleep', `60.${Date.now() % 100_000}`];
      try {
        terminal.sendText(sleep.join(' '), true);
        let found: ProcessInfo[] = [];
        await until(() => (found = running(sleep)).length === 1, `${sleep.join(' ')} to run`, 30_000);
        const [{ pgid }] = found as [ProcessInfo];
        assert.notEqual(pgid, process.pid, 'the command runs in its own process group');
        terminal.sendText('\x03', false);
        await until(() => /\^C\r\n\[cancelled\]/.test(screen()), 'the terminal to show the cancel', 15_000);
        // Not just the screen: the sandbox ended the command and every process of its group (era D
        // acknowledges a cancel before the process is gone, so this waits, bounded).
        await until(() => liveGroupMembers(pgid).length === 0, `process group ${pgid} of ${sleep.join(' ')} to end`, 15_000);
        assert.deepEqual(running(sleep), []);
        // The terminal (and on era D its shared connection) takes the next command.
        await run('echo after-ctrl-c');
        assert.match(screen(), /after-ctrl-c\r\n/);
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
      const destination = fs.mkdtempSync(path.join(process.env.SANDBOX_SESSIONS_IT_WORK ?? os.tmpdir(), `kruntimes-artifacts-${era}-`));
      const artifacts = await vscode.commands.executeCommand<DownloadedArtifact[] | undefined>('sandboxSessions.downloadArtifacts', sandbox.key, destination);
      assert.equal(artifacts?.length, 1);
      assert.equal(fs.readFileSync(path.join(destination, 'report.txt'), 'utf8'), 'report');
    });
  });
}
