// What a person can do when a save into a sandbox was refused because the file changed there after this window read
// it (saveGuard.ts). VS Code's own toast only says the save failed (its Retry fails again, as does every auto save,
// until the person decides); this notice offers the two ways on: Compare — the sandbox's version beside theirs,
// in a diff editor whose right side is their unsaved editor — and Overwrite — save theirs over it. Revert, in VS
// Code's toast, takes the sandbox's. One notice per file at a time: repeated refusals do not stack them.
import path from 'node:path/posix';
import * as vscode from 'vscode';
import type { SandboxFileSystemProvider } from './sandboxFileSystemProvider';

/** The sandbox's version of a refused file, read-only: `sandbox-conflict://<sandbox key>/<path>`. */
export const CONFLICT_SCHEME = 'sandbox-conflict';

export const OVERWRITE_COMMAND = 'sandboxSessions.overwriteChangedFile';

export class SaveConflicts implements vscode.Disposable {
  /** Files (their `sandbox:` URIs) whose notice is on screen. */
  private readonly asking = new Set<string>();
  /** A later refusal of the same file may find another version there: an open Compare shows it. */
  private readonly versions = new vscode.EventEmitter<vscode.Uri>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly fileSystem: SandboxFileSystemProvider) {
    this.subscriptions = [
      fileSystem.onDidRefuseSave(({ uri, message }) => this.refused(uri, message)),
      vscode.workspace.registerTextDocumentContentProvider(CONFLICT_SCHEME, {
        onDidChange: this.versions.event,
        provideTextDocumentContent: (uri) => {
          const theirs = this.fileSystem.filesOf(uri.authority).conflictOf(uri.path);
          return theirs === undefined ? '' : new TextDecoder().decode(theirs);
        },
      }),
      vscode.commands.registerCommand(OVERWRITE_COMMAND, (uri?: vscode.Uri) => (uri ? this.overwrite(uri) : undefined)),
    ];
  }

  private refused(uri: vscode.Uri, message: string): void {
    this.versions.fire(uri.with({ scheme: CONFLICT_SCHEME }));
    if (this.asking.has(uri.toString())) return;
    this.asking.add(uri.toString());
    void this.ask(uri, message).finally(() => this.asking.delete(uri.toString()));
  }

  private async ask(uri: vscode.Uri, message: string): Promise<void> {
    const files = this.fileSystem.filesOf(uri.authority);
    let canCompare = files.conflictOf(uri.path) !== undefined;
    for (;;) {
      const choice = await vscode.window.showWarningMessage(
        `${message} Your edits are still in the editor: compare the two, or overwrite the sandbox's version with yours.`,
        ...(canCompare ? ['Compare'] : []),
        'Overwrite',
      );
      if (choice === 'Overwrite') return this.overwrite(uri);
      if (choice !== 'Compare') return;
      const name = path.basename(uri.path);
      const theirs = uri.with({ scheme: CONFLICT_SCHEME });
      await vscode.commands.executeCommand('vscode.diff', theirs, uri, `${name} (in the sandbox) ↔ ${name} (yours, unsaved)`);
      // Comparing decides nothing: the notice comes back until the person overwrites or dismisses it, or Revert (or
      // another read of the file) has ended the conflict.
      canCompare = files.conflictOf(uri.path) !== undefined;
      if (!canCompare) return;
    }
  }

  /** Saves the editor's version of `uri` over the sandbox's version that was refused. */
  private async overwrite(uri: vscode.Uri): Promise<void> {
    this.fileSystem.filesOf(uri.authority).overwriteConflict(uri.path);
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (doc?.isDirty) await doc.save();
  }

  dispose(): void {
    this.versions.dispose();
    for (const s of this.subscriptions) s.dispose();
  }
}
