// The Sandboxes view: providers → contexts → namespaces → session Runs, with a phase icon and a
// tooltip that says why a sandbox is in its phase (reason, message, timeouts, runtime, age); a
// sandbox an agent created (a robot) or granted to agents says so in its description. A sandbox
// closed with Drain opens to its Drain report: each exported artifact with its size, type and
// sha256, opened or saved from its row (commands/sandbox/artifactActions.ts).
// kruntimes shows kubeconfig's contexts (the current one first, marked and open) and, when it
// cannot be used, why — as the provider's first child, a click away from the kubeconfig setting.
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import type { ArtifactRef, RunPhase } from '../../protocol/kruntimes/run';
import type { ProviderInfo, SandboxSummary } from '../../protocol/sandboxes';
import type { CompanionClient } from '../companion/companionClient';
import type { SandboxRegistry } from '../sandboxes/registry';
import { machineSettingLink } from '../commands/settingLink';
import { formatTimeAndAge } from './dateText';

/** The kubeconfig setting, on the Settings tab that has it (Remote in a remote window). */
const KUBECONFIG_LINK = machineSettingLink('sandboxSessions.kubeconfig');

type ContextInfo = ProviderInfo['contexts'][number];

export type SandboxTreeNode =
  | { kind: 'provider'; provider: ProviderInfo }
  | { kind: 'context'; provider: ProviderInfo; context: string; namespaces: string[]; info?: ContextInfo }
  | { kind: 'namespace'; provider: ProviderInfo; context: string; namespace: string; info?: ContextInfo }
  | { kind: 'sandbox'; sandbox: SandboxSummary }
  | { kind: 'artifact'; sandbox: SandboxSummary; artifact: ArtifactRef }
  | { kind: 'message'; text: string; tooltip?: string; icon?: string; command?: vscode.Command };

const NODE_KINDS: ReadonlySet<unknown> = new Set<SandboxTreeNode['kind']>(['provider', 'context', 'namespace', 'sandbox', 'artifact', 'message']);

/** `812 B`, `1.4 KB`, `3.2 MB`. */
export function sizeText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`;
}

function artifactItem(sandbox: SandboxSummary, a: ArtifactRef): vscode.TreeItem {
  const item = new vscode.TreeItem(a.name, vscode.TreeItemCollapsibleState.None);
  item.id = `${sandbox.key}/artifact/${a.name}`;
  const kind = a.type === 'directory' ? 'folder, as .tar.gz' : a.type;
  item.description = `${sizeText(a.sizeBytes)} · ${kind} · ${a.digest.slice('sha256:'.length, 'sha256:'.length + 12)}`;
  item.iconPath = new vscode.ThemeIcon(a.type === 'directory' ? 'folder' : a.type === 'archive' ? 'file-zip' : 'file');
  const md = new vscode.MarkdownString();
  md.appendText(`${a.name} — exported by Close Sandbox (Drain) of ${sandbox.ref.name}\n`);
  md.appendText(`Size: ${a.sizeBytes} bytes (${kind})\nsha256: ${a.digest.slice('sha256:'.length)}\n`);
  if (a.contentType) md.appendText(`Content type: ${a.contentType}\n`);
  if (a.createdAt) md.appendText(`Exported: ${formatTimeAndAge(a.createdAt)}\n`);
  md.appendText(a.type === 'file' ? 'Click to open it (downloaded and verified against its sha256); Save Artifact… keeps a copy.' : 'Save Artifact… downloads it, verified against its sha256, and unpacks a folder.');
  item.tooltip = md;
  item.contextValue = `artifact.${a.type}`;
  if (a.type === 'file') item.command = { command: 'sandboxSessions.openArtifact', title: 'Open Artifact', arguments: [{ kind: 'artifact', sandbox, artifact: a }] };
  return item;
}

/** True for a row of this tree (VS Code passes the selected row to the view's title actions). */
export function isSandboxTreeNode(value: unknown): value is SandboxTreeNode {
  return typeof value === 'object' && value !== null && NODE_KINDS.has((value as { kind?: unknown }).kind);
}

/** kubeconfig's current context first, then kubeconfig's order. */
function contextsInOrder(provider: ProviderInfo): ContextInfo[] {
  return [...provider.contexts].sort((a, b) => Number(b.current === true) - Number(a.current === true));
}

/** A context's namespaces with the one it names first. */
function namespacesInOrder(info: ContextInfo): string[] {
  const own = info.namespace;
  return own && info.namespaces.includes(own) ? [own, ...info.namespaces.filter((n) => n !== own)] : info.namespaces;
}

function providerTooltip(provider: ProviderInfo): vscode.MarkdownString {
  const md = new vscode.MarkdownString();
  md.appendText(provider.label);
  md.appendMarkdown('\n\n');
  if (provider.kind === 'kruntimes') {
    md.appendText('kruntimes session Runs on Kubernetes, through the kubeconfig the companion server sees (setting sandboxSessions.kubeconfig, else KUBECONFIG, else ~/.kube/config).');
    md.appendMarkdown('\n\n');
    const current = provider.contexts.find((c) => c.current);
    if (current) {
      const runtimes = provider.runtimes.map((r) => r.name).join(', ');
      md.appendText(`Runtimes in ${current.name}/${current.namespace ?? 'default'}: ${runtimes || 'none listed'}`);
      md.appendMarkdown('\n\n');
    }
  } else {
    for (const r of provider.runtimes) {
      md.appendText(`${r.name}: ${r.isolation}${r.available ? '' : ` — unavailable: ${r.reason ?? 'unknown reason'}`}`);
      md.appendMarkdown('  \n');
    }
  }
  if (!provider.available) md.appendText(`Not available: ${provider.reason ?? 'unknown reason'}`);
  return md;
}

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

/** A sandbox an agent created shows a robot (in its phase's colour) once it is no longer starting or closing. */
export function sandboxIcon(s: SandboxSummary): vscode.ThemeIcon {
  const [id, color] = PHASE_ICONS[s.phase ?? 'Pending'];
  if (!s.createdByAgent || id.includes('~spin')) return phaseIcon(s.phase);
  return new vscode.ThemeIcon('robot', color ? new vscode.ThemeColor(color) : undefined);
}

/** What agents (the MCP server) have to do with a sandbox, in words; undefined for none. */
export function agentText(s: SandboxSummary): string | undefined {
  const parts = [s.createdByAgent ? 'created by an agent' : undefined, s.grantedToAgents ? 'granted to agents' : undefined].filter((p) => p !== undefined);
  return parts.length ? parts.join(', ') : undefined;
}

/** The same, short, at the start of the row's description (a narrow side bar cuts its end). */
function agentMark(s: SandboxSummary): string | undefined {
  const parts = [s.createdByAgent ? 'by agent' : undefined, s.grantedToAgents ? 'granted to agents' : undefined].filter((p) => p !== undefined);
  return parts.length ? parts.join(', ') : undefined;
}

/** The session revision the sandbox was opened from or last saved as, and when: `demo@r3, saved 12:04 (5 min ago)`. */
export function revisionText(s: SandboxSummary): string | undefined {
  const r = s.sessionRevision;
  return r && `${r.sessionId}@${r.revision}, ${r.how} ${formatTimeAndAge(r.at)}`;
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
    ['Created', s.createdAt ? formatTimeAndAge(s.createdAt) : undefined],
    ['Artifacts', s.artifacts?.length ? s.artifacts.map((a) => a.name).join(', ') : undefined],
    ['Agents', agentText(s)],
    ['Session', revisionText(s)],
  ];
  for (const [k, v] of rows) if (v) md.appendMarkdown(`${k}: ${v.replace(/[\\`*_{}[\]()#+\-.!|]/g, '\\$&')}  \n`);
  return md;
}

/**
 * A sandbox row's context value, which picks its context menu (package.json's `view/item/context`):
 * `sandbox.<phase>[.pty][.agents][.artifacts]`. `.pty`: its provider serves interactive terminals (the local
 * runtime does; a kruntimes gateway's API has none), so Open Interactive Terminal is offered only there.
 * `.agents` (granted) picks Grant or Revoke; `.artifacts` stays last (menus match /\.artifacts$/).
 */
export function sandboxContextValue(s: SandboxSummary): string {
  const pty = s.ref.provider === 'local' ? '.pty' : '';
  return `sandbox.${s.phase ?? 'Pending'}${pty}${s.grantedToAgents ? '.agents' : ''}${s.artifacts?.length ? '.artifacts' : ''}`;
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
        // "kruntimes (/home/me/.kube/config)": the kubeconfig files go to the description, home as ~.
        const m = /^(.+?) \((.+)\)$/.exec(node.provider.label);
        const item = new vscode.TreeItem(m?.[1] ?? node.provider.label, vscode.TreeItemCollapsibleState.Expanded);
        if (m?.[2]) item.description = m[2].split(path.delimiter).map((f) => (f.startsWith(`${os.homedir()}${path.sep}`) ? `~${f.slice(os.homedir().length)}` : f)).join(path.delimiter);
        item.id = `provider:${node.provider.kind}`;
        item.iconPath = new vscode.ThemeIcon(node.provider.kind === 'local' ? 'device-desktop' : 'cloud', node.provider.available ? undefined : new vscode.ThemeColor('disabledForeground'));
        item.contextValue = `provider.${node.provider.kind}`;
        if (!node.provider.available) item.description = item.description ? `unavailable · ${String(item.description)}` : 'unavailable';
        item.tooltip = providerTooltip(node.provider);
        return item;
      }
      case 'context': {
        const current = node.info?.current === true;
        // The current context opens by itself; others are listed only when opened (each may be a slow or unreachable cluster).
        const item = new vscode.TreeItem(node.context, current ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `context:${node.provider.kind}:${node.context}`;
        item.iconPath = new vscode.ThemeIcon('server-environment', current ? new vscode.ThemeColor('charts.green') : undefined);
        item.contextValue = current ? 'context.current' : 'context';
        item.description = current ? 'current' : undefined;
        item.tooltip = `kubeconfig context ${node.context}${current ? ' (current)' : ''}\nNamespace: ${node.info?.namespace ?? 'default'}\nNamespaces listed: ${node.namespaces.length}`;
        return item;
      }
      case 'namespace': {
        const own = node.info !== undefined && node.info.namespace === node.namespace;
        // Local namespaces and a context's own namespace open by themselves; a cluster may have many others.
        const expanded = node.provider.kind === 'local' || own;
        const item = new vscode.TreeItem(node.namespace, expanded ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `namespace:${node.provider.kind}:${node.context}:${node.namespace}`;
        item.iconPath = new vscode.ThemeIcon('symbol-namespace');
        item.contextValue = `namespace.${node.provider.kind}`;
        item.tooltip =
          node.provider.kind === 'local'
            ? `Local namespace ${node.namespace}`
            : `Namespace ${node.namespace} in context ${node.context}${own ? " (the context's namespace)" : ''}`;
        return item;
      }
      case 'sandbox': {
        const s = node.sandbox;
        // A sandbox closed with Drain opens to its Drain report: the artifacts it exported.
        const item = new vscode.TreeItem(s.ref.name, s.artifacts?.length ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
        item.id = s.key;
        const agents = agentMark(s);
        item.description = `${agents ? `${agents} · ` : ''}${s.phase ?? 'Pending'}${s.reason && s.phase !== 'Ready' ? ` · ${s.reason}` : ''} · ${s.runtime}`;
        item.iconPath = sandboxIcon(s);
        item.tooltip = sandboxTooltip(s);
        item.contextValue = sandboxContextValue(s);
        if (s.phase === 'Ready') {
          item.command = { command: 'sandboxSessions.openSandbox', title: 'Open Sandbox', arguments: [node] };
        }
        return item;
      }
      case 'artifact':
        return artifactItem(node.sandbox, node.artifact);
      case 'message': {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon(node.icon ?? 'info');
        item.contextValue = 'message';
        item.tooltip = node.tooltip ?? node.text;
        if (node.command) item.command = node.command;
        return item;
      }
    }
  }

  async getChildren(node?: SandboxTreeNode): Promise<SandboxTreeNode[]> {
    try {
      if (!node) {
        const providers = (this.providers ??= this.companion.request('providers/list', {}).then((r) => r.providers));
        // A failed listing is not kept: the next expand or Refresh asks again.
        providers.catch(() => {
          if (this.providers === providers) this.providers = undefined;
        });
        return (await providers).map((provider) => ({ kind: 'provider', provider }));
      }
      if (node.kind === 'provider') {
        const provider = node.provider;
        const unavailable: SandboxTreeNode[] = provider.available
          ? []
          : [
              {
                kind: 'message',
                text: provider.reason ?? 'not available here',
                icon: 'warning',
                ...(provider.kind === 'kruntimes'
                  ? {
                      tooltip: `${provider.reason ?? 'not available here'}\n\nClick to set sandboxSessions.kubeconfig.`,
                      command: { command: KUBECONFIG_LINK.command, title: 'Open Settings', arguments: KUBECONFIG_LINK.args },
                    }
                  : {}),
              },
            ];
        if (provider.kind === 'local') {
          const ctx = provider.contexts[0];
          if (!provider.available && !ctx) return unavailable;
          return [
            ...unavailable,
            ...(ctx?.namespaces ?? ['default']).map((namespace): SandboxTreeNode => ({ kind: 'namespace', provider, context: ctx?.name ?? 'local', namespace })),
          ];
        }
        return [
          ...unavailable,
          ...contextsInOrder(provider).map((info): SandboxTreeNode => ({ kind: 'context', provider, context: info.name, namespaces: namespacesInOrder(info), info })),
        ];
      }
      if (node.kind === 'context') {
        return node.namespaces.map((namespace) => ({ kind: 'namespace', provider: node.provider, context: node.context, namespace, ...(node.info ? { info: node.info } : {}) }));
      }
      if (node.kind === 'namespace') {
        let list: SandboxSummary[];
        try {
          list = await this.registry.list(node.provider.kind, { context: node.context, namespace: node.namespace });
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          return [{ kind: 'message', text: `Cannot list sandboxes: ${message}`, tooltip: message, icon: 'warning' }];
        }
        if (list.length === 0) return [{ kind: 'message', text: 'No sandboxes yet', tooltip: 'New Sandbox Here (+ on the namespace) creates one in this namespace.' }];
        return list
          .sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || a.ref.name.localeCompare(b.ref.name))
          .map((sandbox) => ({ kind: 'sandbox', sandbox: this.registry.summary(sandbox.key) ?? sandbox }));
      }
      if (node.kind === 'sandbox') {
        const s = this.registry.summary(node.sandbox.key) ?? node.sandbox;
        return [...(s.artifacts ?? [])].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((artifact) => ({ kind: 'artifact', sandbox: s, artifact }));
      }
      return [];
    } catch (err) {
      return [{ kind: 'message', text: `Cannot list sandboxes: ${err instanceof Error ? err.message : String(err)}`, icon: 'warning' }];
    }
  }

  dispose(): void {
    this.subscription.dispose();
    this.emitter.dispose();
  }
}
