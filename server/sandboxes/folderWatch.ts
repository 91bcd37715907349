// Watching folders of a local sandbox's workspace for changes nobody announces: a command's audit line tells the
// window to re-check (extension/fs/sandboxChangeFeed.ts), but a command that is still running — a dev server, a
// build, a file watcher of the user's — or a process that outlived its command writes files no line mentions, and
// the Explorer and open editors would show them only on Refresh. The companion reads a local sandbox's folder in
// place (workspaceReads.ts), so here it watches, in place, the folders the window has listed: one non-recursive
// fs.watch (inotify) each, not the whole tree — a node_modules alone would take thousands of the user's inotify
// watches. What it reports is which folders changed, a few times a second at most; the window lists them again.
// Confined as reads are: workspace-relative, and a folder that leads out of the workspace is not watched.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { resolveFollow } from '../local/workspacePaths';

export interface FolderWatchOptions {
  /** Changes are gathered for this long before one report (ms). */
  intervalMs?: number;
}

/** Watches folders of one workspace (`root`, a directory of this machine); `set` says which. */
export class SandboxFolderWatch {
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private changed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private generation = 0;
  private readonly intervalMs: number;

  constructor(
    private readonly root: string,
    private readonly onChanged: (folders: string[]) => void,
    options: FolderWatchOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 250;
  }

  /** The folders watched now (workspace-relative; `""` is the root). */
  get folders(): string[] {
    return [...this.watchers.keys()];
  }

  /**
   * Watches exactly `folders` (workspace-relative): new ones start, others stop. Resolves once each is watched or
   * found unwatchable (missing, not a folder, leading out of the workspace); answers the folders watched.
   */
  async set(folders: readonly string[]): Promise<string[]> {
    const generation = ++this.generation;
    const wanted = new Set(folders);
    for (const [folder, watcher] of this.watchers) {
      if (wanted.has(folder)) continue;
      watcher.close();
      this.watchers.delete(folder);
    }
    for (const folder of wanted) {
      if (this.watchers.has(folder)) continue;
      const abs = await this.resolve(folder);
      // A later `set` or `close` while this one resolved decides instead.
      if (this.closed || generation !== this.generation) break;
      if (abs === undefined || this.watchers.has(folder)) continue;
      try {
        const watcher = fs.watch(abs, { persistent: false }, () => this.report(folder));
        // The folder went away (or the watch failed): its parent's listing says so, and the folder itself is asked again.
        watcher.on('error', () => {
          watcher.close();
          if (this.watchers.get(folder) === watcher) this.watchers.delete(folder);
          this.report(folder);
        });
        this.watchers.set(folder, watcher);
      } catch {
        // Gone between the check and the watch: nothing to watch.
      }
    }
    return this.folders;
  }

  /** Stops every watch; no report comes after. */
  close(): void {
    this.closed = true;
    this.generation += 1;
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
    clearTimeout(this.timer);
    this.changed.clear();
  }

  /** Whether the workspace itself is still there (a sandbox that ended has no directory any more). */
  async workspaceExists(): Promise<boolean> {
    return (await fsp.stat(this.root).catch(() => undefined))?.isDirectory() === true;
  }

  private async resolve(folder: string): Promise<string | undefined> {
    try {
      const { abs } = await resolveFollow(this.root, folder, { allowRoot: true });
      return (await fsp.stat(abs)).isDirectory() ? abs : undefined;
    } catch {
      return undefined; // not a path of the workspace, gone, or leading out of it
    }
  }

  private report(folder: string): void {
    if (this.closed) return;
    this.changed.add(folder);
    // A fixed window, not a quiet period: a file written without pause (a log) is still reported every interval.
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      const folders = [...this.changed];
      this.changed = new Set();
      if (!this.closed && folders.length > 0) this.onChanged(folders);
    }, this.intervalMs);
  }
}
