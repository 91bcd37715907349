// Live changes in the sandboxes this window shows: while a sandbox is open as a workspace folder
// (or one of its files in an editor tab), its log is followed and what other clients change there
// (an agent over MCP, the CLI, another window) reaches the Explorer and open editors as file
// events — VS Code does not re-read a file system by itself. One SandboxChangeFeed per shown
// sandbox; it stops when the folder and its tabs close or the sandbox ends. A local sandbox's
// listed folders are also watched in place (sandboxFolderWatches.ts), for what no operation
// announces: a command still running, or a process that outlived its command.
import * as vscode from 'vscode';
import { parseSandboxKey, type SandboxRef } from '../../protocol/sandboxes';
import type { SandboxLogFollows } from '../sandboxes/logFollows';
import type { SandboxRegistry } from '../sandboxes/registry';
import { shownSandboxes } from '../sandboxes/shownSandboxes';
import { SandboxChangeFeed } from './sandboxChangeFeed';
import type { FolderWatch, SandboxFolderWatches } from './sandboxFolderWatches';
import type { SandboxFileSystemProvider } from './sandboxFileSystemProvider';

export class LiveSandboxChanges implements vscode.Disposable {
  private readonly feeds = new Map<string, SandboxChangeFeed>();
  private readonly watches = new Map<string, FolderWatch>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly registry: SandboxRegistry,
    private readonly fileSystem: SandboxFileSystemProvider,
    private readonly follows: SandboxLogFollows,
    private readonly log: vscode.LogOutputChannel,
    private readonly folderWatches?: SandboxFolderWatches,
  ) {
    this.subscriptions = [
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.update()),
      vscode.window.tabGroups.onDidChangeTabs(() => this.update()),
      registry.onDidChange(() => this.update()),
    ];
    this.update();
  }

  /** The sandboxes whose changes this window follows now. */
  followed(): string[] {
    return [...this.feeds.keys()];
  }

  /** The feed of a followed sandbox (its counters, for tests and diagnostics). */
  feed(key: string): SandboxChangeFeed | undefined {
    return this.feeds.get(key);
  }

  private update(): void {
    const wanted = new Set([...shownSandboxes()].filter((key) => this.registry.lifecycle(key) === undefined));
    for (const [key, feed] of this.feeds) {
      if (wanted.has(key) && feed.active) continue;
      feed.stop();
      this.feeds.delete(key);
      this.watches.get(key)?.stop();
      this.watches.delete(key);
    }
    for (const key of wanted) {
      if (this.feeds.has(key)) continue;
      const ref = parseSandboxKey(key);
      if (!ref) continue;
      if (ref.provider === 'local' && this.folderWatches) this.watchFolders(key, ref, this.folderWatches);
      this.feeds.set(
        key,
        new SandboxChangeFeed({
          label: ref.name,
          follow: (query, onLines) => this.follows.follow(ref, query, onLines),
          isOwn: (kind, loggedAt) => this.registry.ownOperations.claim(key, kind, loggedAt),
          recheck: () => this.fileSystem.commandRanIn(key, ''),
          ended: () => this.registry.lifecycle(key) !== undefined,
          log: this.log,
        }),
      );
    }
  }

  /** Watches the folders this window lists of a local sandbox; one it cannot reach yet is followed through its log only. */
  private watchFolders(key: string, ref: SandboxRef, watches: SandboxFolderWatches): void {
    try {
      this.watches.set(key, watches.watch(ref, this.fileSystem.filesOf(key)));
    } catch (err) {
      this.log.info(`not watching the folders of ${ref.name}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const feed of this.feeds.values()) feed.stop();
    this.feeds.clear();
    for (const watch of this.watches.values()) watch.stop();
    this.watches.clear();
  }
}
