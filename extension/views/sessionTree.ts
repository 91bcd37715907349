// The Sessions view: the repository → sessions → retained revisions (time, bundle size, last
// activation, commit id) → lineage (forked from). Refreshed after every save or open.
import * as vscode from 'vscode';
import type { RevisionSummary, SessionSummary } from '../../protocol/repository';
import type { CompanionClient } from '../companion/companionClient';
import { formatTime, formatTimeAndAge } from './dateText';

export type SessionTreeNode =
  | { kind: 'repository'; location: string; repositoryKind: 'file' | 'postgres' }
  | { kind: 'session'; session: SessionSummary }
  | { kind: 'revision'; session: SessionSummary; revision: RevisionSummary }
  | { kind: 'lineage'; text: string; tooltip: string }
  | { kind: 'message'; text: string };

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export class SessionTreeProvider implements vscode.TreeDataProvider<SessionTreeNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<SessionTreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private listing: Promise<{ repository: { kind: 'file' | 'postgres'; location: string }; sessions: SessionSummary[] }> | undefined;

  constructor(private readonly companion: CompanionClient) {}

  refresh(): void {
    this.listing = undefined;
    this.emitter.fire(undefined);
  }

  getTreeItem(node: SessionTreeNode): vscode.TreeItem {
    switch (node.kind) {
      case 'repository': {
        const item = new vscode.TreeItem(node.repositoryKind === 'file' ? 'Local repository' : 'PostgreSQL repository', vscode.TreeItemCollapsibleState.Expanded);
        item.description = node.location;
        item.tooltip = node.location;
        item.iconPath = new vscode.ThemeIcon(node.repositoryKind === 'file' ? 'database' : 'server');
        item.contextValue = 'repository';
        return item;
      }
      case 'session': {
        const s = node.session;
        const item = new vscode.TreeItem(s.sessionId, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `session:${s.sessionId}`;
        item.description = `${s.head.revision}${s.forkedFrom ? ` · forked from ${s.forkedFrom.sessionId}@${s.forkedFrom.revision}` : ''}`;
        item.tooltip = new vscode.MarkdownString(
          `**${s.sessionId}**  \nhead ${s.head.revision}, oldest retained ${s.oldestRetained}  \nagent ${s.agentId}  \nupdated ${formatTimeAndAge(s.updatedAt)}`,
        );
        item.iconPath = new vscode.ThemeIcon('history');
        item.contextValue = 'session';
        return item;
      }
      case 'revision': {
        const r = node.revision;
        const item = new vscode.TreeItem(r.ref.revision, vscode.TreeItemCollapsibleState.None);
        item.id = `revision:${r.ref.sessionId}@${r.ref.revision}`;
        const bundle = r.checkpoint.value.compatibilityBundle;
        item.description = `${formatTime(r.committedAt)} · ${formatBytes(bundle.bytes)}${r.isHead ? ' · head' : ''}`;
        item.tooltip = new vscode.MarkdownString(
          [
            `**${r.ref.sessionId}@${r.ref.revision}**${r.isHead ? ' (head)' : ''}`,
            `committed ${formatTimeAndAge(r.committedAt)}`,
            `bundle ${formatBytes(bundle.bytes)}, \`${bundle.digest}\``,
            r.lastCommittedActivationId ? `last activation ${r.lastCommittedActivationId}` : 'saved from a sandbox (no activation)',
            r.commitId ? `commit id ${r.commitId}` : '',
          ]
            .filter(Boolean)
            .join('  \n'),
        );
        item.iconPath = new vscode.ThemeIcon(r.isHead ? 'git-commit' : 'circle-outline');
        item.contextValue = 'revision';
        return item;
      }
      case 'lineage': {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.tooltip = node.tooltip;
        item.iconPath = new vscode.ThemeIcon('git-branch');
        item.contextValue = 'lineage';
        return item;
      }
      case 'message':
        return new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
    }
  }

  async getChildren(node?: SessionTreeNode): Promise<SessionTreeNode[]> {
    try {
      this.listing ??= this.companion.request('sessions/list', {});
      const { repository, sessions } = await this.listing;
      if (!node) return [{ kind: 'repository', location: repository.location, repositoryKind: repository.kind }];
      if (node.kind === 'repository') {
        if (sessions.length === 0) return [{ kind: 'message', text: 'No sessions yet — save a sandbox as a session revision' }];
        return sessions.map((session) => ({ kind: 'session', session }));
      }
      if (node.kind === 'session') {
        const { revisions } = await this.companion.request('sessions/revisions', { sessionId: node.session.sessionId });
        const children: SessionTreeNode[] = revisions.map((revision) => ({ kind: 'revision', session: node.session, revision }));
        const from = node.session.forkedFrom;
        if (from) children.push({ kind: 'lineage', text: `forked from ${from.sessionId}@${from.revision}`, tooltip: `fork ${node.session.createdByForkId ?? ''}` });
        const forks = sessions.filter((s) => s.forkedFrom?.sessionId === node.session.sessionId);
        for (const f of forks) children.push({ kind: 'lineage', text: `fork ${f.sessionId} (from ${f.forkedFrom?.revision ?? '?'})`, tooltip: `${f.sessionId} was forked from this session` });
        return children;
      }
      return [];
    } catch (err) {
      return [{ kind: 'message', text: `Cannot read the session repository: ${err instanceof Error ? err.message : String(err)}` }];
    }
  }

  dispose(): void {
    this.emitter.dispose();
  }
}
