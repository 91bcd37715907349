// What a person can do when a save into a sandbox was refused because the file changed there after this window read
// it (saveGuard.ts). VS Code's own toast only says the save failed (its Retry fails again, as does every auto save,
// until the person decides); this notice offers the two ways on: Compare — the sandbox's version beside theirs,
// in a diff editor whose right side is their unsaved editor — and Overwrite — save theirs over it. Revert, in VS
// Code's toast, takes the sandbox's. One notice per file at a time: repeated refusals do not stack them.
//
// Once compared, the choice lives in the diff editor's title bar (Overwrite, Take the Sandbox's Version), as in VS
// Code's own conflict editor, and no notice comes back while that diff is on screen. A notice shown again right
// after the click would not be reliable: VS Code shows at most three new toasts in 800 ms and sends the rest straight
// to the notification center, and the refused save's own toasts count.
import path from 'node:path/posix';
import * as vscode from 'vscode';
import { SANDBOX_SCHEME, type SandboxFileSystemProvider } from './sandboxFileSystemProvider';

/** The sandbox's version of a refused file, read-only: `sandbox-conflict://<sandbox key>/<path>`. */
export const CONFLICT_SCHEME = 'sandbox-conflict';

export const OVERWRITE_COMMAND = 'sandboxSessions.overwriteChangedFile';
export const COMPARE_COMMAND = 'sandboxSessions.compareChangedFile';
export const TAKE_SANDBOX_VERSION_COMMAND = 'sandboxSessions.takeSandboxVersion';
/** True while the active editor is the diff of a refused save (its title bar holds the two ways on). */
const CONFLICT_SHOWN_CONTEXT = 'sandboxSessions.saveConflictShown';

export class SaveConflicts implements vscode.Disposable {
  /** Files (their `sandbox:` URIs) whose notice is on screen. */
  private readonly asking = new Set<string>();
  /** A later refusal of the same file may find another version there: an open Compare shows it. */
  private readonly versions = new vscode.EventEmitter<vscode.Uri>();
  private readonly subscriptions: vscode.Disposable[];
  private conflictShown = false;

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
      vscode.commands.registerCommand(OVERWRITE_COMMAND, (uri?: unknown) => this.decide(uri, (file) => this.overwrite(file))),
      vscode.commands.registerCommand(TAKE_SANDBOX_VERSION_COMMAND, (uri?: unknown) => this.decide(uri, (file) => this.takeSandboxVersion(file))),
      vscode.commands.registerCommand(COMPARE_COMMAND, (uri?: unknown) => (uri instanceof vscode.Uri ? this.compare(sandboxUriOf(uri)) : undefined)),
      vscode.window.tabGroups.onDidChangeTabs(() => this.updateContext()),
      vscode.window.tabGroups.onDidChangeTabGroups(() => this.updateContext()),
    ];
  }

  private refused(uri: vscode.Uri, message: string): void {
    this.versions.fire(uri.with({ scheme: CONFLICT_SCHEME }));
    // A diff of it on screen holds the choice already.
    if (this.asking.has(uri.toString()) || this.conflictTabsOf(uri).some((t) => t.isActive)) return;
    this.asking.add(uri.toString());
    void this.ask(uri, message).finally(() => this.asking.delete(uri.toString()));
  }

  private async ask(uri: vscode.Uri, message: string): Promise<void> {
    const canCompare = this.fileSystem.filesOf(uri.authority).conflictOf(uri.path) !== undefined;
    const choice = await vscode.window.showWarningMessage(
      `${message} Your edits are still in the editor: compare the two, or overwrite the sandbox's version with yours.`,
      ...(canCompare ? ['Compare'] : []),
      'Overwrite',
    );
    if (choice === 'Overwrite') await this.overwrite(uri);
    else if (choice === 'Compare') await this.compare(uri);
  }

  /** The sandbox's version beside the unsaved one; the diff's title bar offers Overwrite and Take the Sandbox's Version. */
  private async compare(uri: vscode.Uri): Promise<void> {
    const name = path.basename(uri.path);
    await vscode.commands.executeCommand('vscode.diff', uri.with({ scheme: CONFLICT_SCHEME }), uri, `${name} (in the sandbox) ↔ ${name} (yours, unsaved)`);
  }

  /** A choice made in the diff's title bar (its file as the argument) or from the palette (the active conflict diff's). */
  private async decide(arg: unknown, choose: (file: vscode.Uri) => Promise<void>): Promise<void> {
    const file = arg instanceof vscode.Uri ? sandboxUriOf(arg) : activeConflictFile();
    if (!file) return;
    await choose(file);
    await vscode.window.tabGroups.close(this.conflictTabsOf(file));
  }

  /** Saves the editor's version of `uri` over the sandbox's version that was refused. */
  private async overwrite(uri: vscode.Uri): Promise<void> {
    this.fileSystem.filesOf(uri.authority).overwriteConflict(uri.path);
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (doc?.isDirty) await doc.save();
  }

  /**
   * VS Code's Revert of the file (it reads the sandbox's version, which ends the conflict). Revert acts on the active
   * editor: the conflict diff when the choice was made in its title bar, else the file's own editor.
   */
  private async takeSandboxVersion(uri: vscode.Uri): Promise<void> {
    if (activeConflictFile()?.toString() !== uri.toString()) await vscode.window.showTextDocument(uri, { preview: false });
    await vscode.commands.executeCommand('workbench.action.files.revert');
  }

  /** The open diffs of `file`'s refused save. */
  private conflictTabsOf(file: vscode.Uri): vscode.Tab[] {
    return vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => conflictFileOf(t)?.toString() === file.toString());
  }

  private updateContext(): void {
    const shown = activeConflictFile() !== undefined;
    if (shown === this.conflictShown) return;
    this.conflictShown = shown;
    void vscode.commands.executeCommand('setContext', CONFLICT_SHOWN_CONTEXT, shown);
  }

  dispose(): void {
    this.versions.dispose();
    for (const s of this.subscriptions) s.dispose();
  }
}

/** The `sandbox:` file of a URI of either side of a conflict diff. */
function sandboxUriOf(uri: vscode.Uri): vscode.Uri {
  return uri.scheme === CONFLICT_SCHEME ? uri.with({ scheme: SANDBOX_SCHEME }) : uri;
}

/** The file whose refused save `tab` compares, if it is such a diff. */
function conflictFileOf(tab: vscode.Tab | undefined): vscode.Uri | undefined {
  const input = tab?.input;
  return input instanceof vscode.TabInputTextDiff && input.original.scheme === CONFLICT_SCHEME ? input.modified : undefined;
}

function activeConflictFile(): vscode.Uri | undefined {
  return conflictFileOf(vscode.window.tabGroups.activeTabGroup.activeTab);
}
