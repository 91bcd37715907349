// Keeps the companion watching, in place, the folders this window has listed of each local sandbox it shows
// (`sandboxes/files/watch`), and has the file system list again the folders it reports changed — so what a command
// that is still running, or a process that outlived its command, writes reaches the Explorer and open editors
// without Refresh (the sandbox's log, sandboxChangeFeed.ts, tells only of operations that finished). One dispatcher
// of `sandboxes/files/changed` for the window; one watch request per sandbox, asked again after a short pause when the
// listed folders change. Local sandboxes only: the kruntimes and OpenSandbox APIs have no watch.
import * as vscode from 'vscode';
import { companionNotifications } from '../../protocol/companion';
import { SANDBOX_FILES_MAX_WATCHED_FOLDERS } from '../../protocol/companion/files';
import type { SandboxRef } from '../../protocol/sandboxes';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';
import type { SandboxFiles } from './sandboxFiles';

/** How long the listed folders must stay as they are before the watch is asked again (ms). */
const RESTART_AFTER_MS = 300;

export interface FolderWatch {
  stop(): void;
}

export class SandboxFolderWatches implements vscode.Disposable {
  private readonly handlers = new Map<string, (folders: string[]) => void>();
  private readonly subscription: vscode.Disposable;
  private next = 0;

  constructor(
    private readonly companion: CompanionClient,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.subscription = companion.onNotification('sandboxes/files/changed', (raw) => {
      const parsed = companionNotifications['sandboxes/files/changed'].params.safeParse(raw);
      if (parsed.success) this.handlers.get(parsed.data.watchId)?.(parsed.data.folders);
    });
  }

  /** Watches the folders `files` has listed of sandbox `ref` until `stop()` or the sandbox ends. */
  watch(ref: SandboxRef, files: SandboxFiles): FolderWatch {
    let stopped = false;
    let cancel: vscode.CancellationTokenSource | undefined;
    let timer: NodeJS.Timeout | undefined;
    let rechecking = Promise.resolve();
    const restart = (): void => {
      timer = undefined;
      if (stopped) return;
      cancel?.cancel();
      const current = (cancel = new vscode.CancellationTokenSource());
      const watchId = `watch-${process.pid}-${++this.next}`;
      // Re-checks one after another: a folder reported again while it is listed is listed once more after.
      this.handlers.set(watchId, (folders) => {
        rechecking = rechecking.then(() => files.foldersChanged(folders)).catch(() => undefined);
      });
      // The shallowest first: those the Explorer shows open.
      const folders = files.knownFolders().sort((a, b) => a.split('/').length - b.split('/').length).slice(0, SANDBOX_FILES_MAX_WATCHED_FOLDERS);
      this.companion
        .request('sandboxes/files/watch', { ref, watchId, folders }, { token: current.token })
        .then(
          () => {
            stopped = true; // the sandbox ended: its workspace is gone
          },
          (err: unknown) => {
            if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
            stopped = true;
            // Not a local sandbox on this machine (any more): nothing to watch, and nothing to warn about.
            if (err instanceof CompanionRequestError && err.code === 'not_ready') return;
            this.log.warn(`not watching the folders of ${ref.name}: ${err instanceof Error ? err.message : String(err)}; changes made outside this window show on Refresh`);
          },
        )
        .finally(() => {
          this.handlers.delete(watchId);
          current.dispose();
        });
    };
    const listed = files.onDidChangeKnownFolders(() => {
      if (stopped) return;
      clearTimeout(timer);
      timer = setTimeout(restart, RESTART_AFTER_MS);
    });
    restart();
    return {
      stop: () => {
        stopped = true;
        clearTimeout(timer);
        listed.dispose();
        cancel?.cancel();
      },
    };
  }

  dispose(): void {
    this.subscription.dispose();
    this.handlers.clear();
  }
}
