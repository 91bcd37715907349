// The Sandboxes view: providers → contexts → namespaces → session Runs, with a phase icon and a
// tooltip that says why a sandbox is in its phase (reason, message, timeouts, runtime, age).
import * as vscode from 'vscode';
import type { RunPhase } from '../../protocol/kruntimes/run';
import type { ProviderInfo, SandboxSummary } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';
import type { SandboxRegistry } from '../sandboxes/registry';

export type SandboxTreeNode =
  | { kind: 'provider'; provider: ProviderInfo }
  | { kind: 'context'; provider: ProviderInfo; context: string; namespaces: string[] }
  | { kind: 'namespace'; provider: ProviderInfo; context: string; namespace: string }
  | { kind: 'sandbox'; sandbox: SandboxSummary }
  | { kind: 'message'; text: string; tooltip?: string };

const PHASE_ICONS: Record<RunPhase, [string, string?]> = {
  Pending: ['loading~spin'],
  Scheduled: ['loading~spin'],
  Running: ['loading~spin'],
  Ready: ['vm-running', 'testing.iconPassed'],
  Finalizing: ['sync~spin', 'charts.yellow'],
  Succeeded: ['pass', 'testing.iconPassed'],
  Failed: ['error', 'testing.iconFailed'],
  Timeout: ['watch', 'charts.orange'],
  Cancelled: ['circle-slash', 'disabledForeground'],
};

export function phaseIcon(phase: RunPhase | undefined): vscode.ThemeIcon {
  const [id, color] = PHASE_ICONS[phase ?? 'Pending'];
  return new vscode.ThemeIcon(id, color ? new vscode.ThemeColor(color) : undefined);
}

function age(iso: string | undefined): string | undefined {
  if (!iso) return undefined;
  const ms = Date.now() - Date.parse(iso);
  if (!Number.isFinite(ms)) return undefined;
  const m = Math.floor(ms / 60_000);
  if (m < 1) return 'just now';
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  return h < 48 ? `${h} h ago` : `${Math.floor(h / 24)} days ago`;
}

export function sandboxTooltip(s: SandboxSummary): vscode.MarkdownString {
  const md = new vscode.MarkdownString(undefined, true);
  md.appendMarkdown(`**${s.ref.name}** — ${s.phase ?? 'Pending'}\n\n`);
  const rows: [string, string | undefined][] = [
    ['Reason', s.reason],
    ['Message', s.message],
    ['Runtime', s.runtime],
    ['Namespace', `${s.ref.namespace} (${s.ref.provider === 'local' ? 'local' : s.ref.context})`],
    ['Idle timeout', s.idleTimeoutSeconds !== undefined ? `${s.idleTimeoutSeconds} s (only commands and changes count as activity)` : undefined],
    ['Total timeout', s.timeout],
    ['Termination', s.terminationMode],
    ['Created', age(s.createdAt)],
    ['Artifacts', s.artifacts?.length ? s.artifacts.map((a) => a.name).join(', ') : undefined],
  ];
  for (const [k, v] of rows) if (v) md.appendMarkdown(`${k}: ${v.replace(/[\\`*_{}[\]()#+\-.!|]/g, '\\$&')}  \n`);
  return md;
}

export class SandboxTreeProvider implements vscode.TreeDataProvider<SandboxTreeNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<SandboxTreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private readonly subscription: vscode.Disposable;
  private providers: Promise<ProviderInfo[]> | undefined;

  constructor(
    private readonly companion: CompanionClient,
    private readonly registry: SandboxRegistry,
  ) {
    this.subscription = registry.onDidChange(() => this.emitter.fire(undefined));
  }

  refresh(): void {
    this.providers = undefined;
    this.emitter.fire(undefined);
  }

  getTreeItem(node: SandboxTreeNode): vscode.TreeItem {
    switch (node.kind) {
      case 'provider': {
        const item = new vscode.TreeItem(node.provider.label, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon(node.provider.kind === 'local' ? 'device-desktop' : 'cloud');
        item.contextValue = `provider.${node.provider.kind}`;
        if (!node.provider.available) item.description = node.provider.reason ?? 'not available';
        item.tooltip = node.provider.runtimes
          .map((r) => `${r.name}: ${r.isolation}${r.available ? '' : ` — unavailable: ${r.reason ?? 'unknown reason'}`}`)
          .join('\n');
        return item;
      }
      case 'context': {
        const item = new vscode.TreeItem(node.context, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon('server-environment');
        item.contextValue = 'context';
        return item;
      }
      case 'namespace': {
        const item = new vscode.TreeItem(node.namespace, vscode.TreeItemCollapsibleState.Expanded);
        item.iconPath = new vscode.ThemeIcon('symbol-namespace');
        item.contextValue = 'namespace';
        return item;
      }
      case 'sandbox': {
        const s = node.sandbox;
        const item = new vscode.TreeItem(s.ref.name, vscode.TreeItemCollapsibleState.None);
        item.id = s.key;
        item.description = `${s.phase ?? 'Pending'}${s.reason && s.phase !== 'Ready' ? ` · ${s.reason}` : ''} · ${s.runtime}`;
        item.iconPath = phaseIcon(s.phase);
        item.tooltip = sandboxTooltip(s);
        item.contextValue = `sandbox.${s.phase ?? 'Pending'}${s.artifacts?.length ? '.artifacts' : ''}`;
        if (s.phase === 'Ready') {
          item.command = { command: 'sandboxSessions.openSandbox', title: 'Open Sandbox', arguments: [node] };
        }
        return item;
      }
      case 'message': {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon('info');
        if (node.tooltip) item.tooltip = node.tooltip;
        return item;
      }
    }
  }

  async getChildren(node?: SandboxTreeNode): Promise<SandboxTreeNode[]> {
    try {
      if (!node) {
        this.providers ??= this.companion.request('providers/list', {}).then((r) => r.providers);
        return (await this.providers).map((provider) => ({ kind: 'provider', provider }));
      }
      if (node.kind === 'provider') {
        if (!node.provider.available && node.provider.contexts.length === 0) {
          return [{ kind: 'message', text: node.provider.reason ?? 'not available here' }];
        }
        if (node.provider.kind === 'local') {
          const ctx = node.provider.contexts[0];
          return (ctx?.namespaces ?? ['default']).map((namespace) => ({ kind: 'namespace', provider: node.provider, context: ctx?.name ?? 'local', namespace }));
        }
        return node.provider.contexts.map((c) => ({ kind: 'context', provider: node.provider, context: c.name, namespaces: c.namespaces }));
      }
      if (node.kind === 'context') {
        return node.namespaces.map((namespace) => ({ kind: 'namespace', provider: node.provider, context: node.context, namespace }));
      }
      if (node.kind === 'namespace') {
        const list = await this.registry.list(node.provider.kind, { context: node.context, namespace: node.namespace });
        if (list.length === 0) return [{ kind: 'message', text: 'No sandboxes yet — use New Sandbox…' }];
        return list
          .sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || a.ref.name.localeCompare(b.ref.name))
          .map((sandbox) => ({ kind: 'sandbox', sandbox: this.registry.summary(sandbox.key) ?? sandbox }));
      }
      return [];
    } catch (err) {
      return [{ kind: 'message', text: `Cannot list sandboxes: ${err instanceof Error ? err.message : String(err)}` }];
    }
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }
}
