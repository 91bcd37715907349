// The Ports section of the Sandboxes view: each sandbox with forwards, and under it its forwarded
// ports with the local address they answer on (inline: open in browser, copy address, stop).
import * as vscode from 'vscode';
import { hostPort, type PortForward } from '../../protocol/ports';
import type { PortForwards } from './portForwards';

export type PortsTreeNode = { kind: 'sandbox'; key: string; name: string; provider: string } | { kind: 'port'; forward: PortForward };

export function isPortNode(value: unknown): value is Extract<PortsTreeNode, { kind: 'port' }> {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'port' && 'forward' in value;
}

export class PortsTreeProvider implements vscode.TreeDataProvider<PortsTreeNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<PortsTreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly forwards: PortForwards) {
    this.subscription = forwards.onDidChange(() => this.emitter.fire(undefined));
  }

  getTreeItem(node: PortsTreeNode): vscode.TreeItem {
    if (node.kind === 'sandbox') {
      const item = new vscode.TreeItem(node.name, vscode.TreeItemCollapsibleState.Expanded);
      item.id = `ports:${node.key}`;
      item.description = node.provider;
      item.iconPath = new vscode.ThemeIcon('vm-running');
      item.contextValue = 'portsSandbox';
      return item;
    }
    const f = node.forward;
    const address = hostPort(f.localHost, f.localPort);
    const item = new vscode.TreeItem(`${f.sandboxPort}`, vscode.TreeItemCollapsibleState.None);
    item.id = `port:${f.id}`;
    item.description = f.localPort === f.sandboxPort && f.via === 'host' ? `${address} (listens here)` : address;
    item.iconPath = new vscode.ThemeIcon('plug');
    item.tooltip = new vscode.MarkdownString().appendText(`${f.message}\n\nSince ${new Date(f.startedAt).toLocaleString()}`);
    item.contextValue = 'forwardedPort';
    item.command = { command: 'sandboxSessions.openForwardedPort', title: 'Open in Browser', arguments: [node] };
    return item;
  }

  getChildren(node?: PortsTreeNode): PortsTreeNode[] {
    const all = this.forwards.all();
    if (!node) {
      const sandboxes = new Map<string, PortsTreeNode>();
      for (const f of all) sandboxes.set(f.key, { kind: 'sandbox', key: f.key, name: f.ref.name, provider: f.ref.provider });
      return [...sandboxes.values()];
    }
    if (node.kind === 'sandbox') {
      return all.filter((f) => f.key === node.key).sort((a, b) => a.sandboxPort - b.sandboxPort).map((forward) => ({ kind: 'port', forward }));
    }
    return [];
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }
}
