// "What the sandbox changed" (vscode-ux-anchors §4.8): for each sandbox this window shows, against its baseline
// (changeBaselines.ts: the revision it was opened from or saved as, by anyone, or the user's choice; else since it
// was opened, its opening snapshot, taken on the first comparison), a Source Control entry lists the files a save on
// that baseline would change (added, modified, deleted; the companion's `sessions/compareSandbox` or
// `openings/compareSandbox`), a click opens the diff baseline ↔ sandbox, editors get VS Code's change marks in the
// gutter against the baseline (quick diff), and the Explorer marks the files. The
// list is compared again after the sandbox's files change (the file system's events: this window's saves, its
// commands, other clients' changes heard from the log), paced by refreshPacer.ts.
import * as vscode from 'vscode';
import type { OpeningChanges } from '../../protocol/companion/openings';
import type { WorkspaceChange, WorkspaceChanges } from '../../protocol/companion/sessions';
import { parseSandboxKey, sandboxKey } from '../../protocol/sandboxes';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';
import { openingUri, revisionUri } from '../fs/revisionFileSystemProvider';
import { SANDBOX_SCHEME, sandboxUri } from '../fs/sandboxFileSystemProvider';
import type { SandboxRegistry } from '../sandboxes/registry';
import { messageOf } from '../sandboxes/errorText';
import { shownSandboxes } from '../sandboxes/shownSandboxes';
import { formatTime } from '../views/dateText';
import { type Baseline, baselineName, type ChangeBaselines, sameBaseline, SINCE_OPENED, sinceWords } from './changeBaselines';
import { RefreshPacer, type PacerOptions } from './refreshPacer';

export const CHANGES_SCM_ID = 'sandboxSessions';

const STATUS_WORDS: Record<WorkspaceChange['status'], string> = { added: 'Added', modified: 'Modified', deleted: 'Deleted' };

/** A comparison's result: with a revision, or since the sandbox was opened. */
export type ComparedChanges = WorkspaceChanges | OpeningChanges;

/** `HH:MM` today, else `YYYY-MM-DD HH:MM`. */
function shortTime(iso: string): string {
  const full = formatTime(iso);
  return new Date(iso).toDateString() === new Date().toDateString() ? full.slice(-5) : full;
}

/** The baseline's version of a workspace file (`rel` relative to the workspace). */
function originalUri(key: string, baseline: Baseline, rel: string): vscode.Uri {
  return 'opened' in baseline ? openingUri(key, `workspace/${rel}`) : revisionUri(baseline.sessionId, baseline.revision, `workspace/${rel}`);
}

/** One shown sandbox's comparison: its Source Control entry, its pacer and its last result. */
class ShownChanges implements vscode.Disposable {
  readonly control: vscode.SourceControl;
  private readonly group: vscode.SourceControlResourceGroup;
  readonly pacer: RefreshPacer;
  /** The last comparison's result (undefined before the first, or after one failed). */
  result: ComparedChanges | undefined;
  /** Why the last comparison failed. */
  error: string | undefined;
  private byPath = new Map<string, WorkspaceChange['status']>();
  private inFlight: vscode.CancellationTokenSource | undefined;

  constructor(
    readonly key: string,
    readonly baseline: Baseline,
    private readonly companion: CompanionClient,
    private readonly log: vscode.LogOutputChannel,
    private readonly onResult: (key: string, paths: string[]) => void,
    pacing: PacerOptions,
  ) {
    const name = parseSandboxKey(key)?.name ?? key;
    this.control = vscode.scm.createSourceControl(CHANGES_SCM_ID, `Sandbox ${name}`, sandboxUri(key));
    this.control.inputBox.visible = false;
    this.control.quickDiffProvider = { provideOriginalResource: (uri) => this.original(uri) };
    this.group = this.control.createResourceGroup('changes', this.label('comparing…'));
    this.group.hideWhenEmpty = false;
    this.pacer = new RefreshPacer(() => this.compare(), pacing);
  }

  /** The revision's version of a sandbox file, for the gutter's change marks (none for a file the revision lacks). */
  private async original(uri: vscode.Uri): Promise<vscode.Uri | undefined> {
    if (uri.scheme !== SANDBOX_SCHEME || uri.authority !== this.key) return undefined;
    const rel = uri.path.replace(/^\/+/, '');
    if (rel === '' || this.byPath.get(rel) === 'added') return undefined;
    const original = originalUri(this.key, this.baseline, rel);
    // A file the policy leaves out (node_modules/…) or one made since the last comparison is not in the baseline.
    const inRevision = await vscode.workspace.fs.stat(original).then(
      (stat) => stat.type === vscode.FileType.File,
      () => false,
    );
    return inRevision ? original : undefined;
  }

  status(rel: string): WorkspaceChange['status'] | undefined {
    return this.byPath.get(rel);
  }

  private label(state?: string): string {
    // Since opened: when, once the first comparison said (the snapshot's time; its date only if not today).
    const opened = this.result !== undefined && 'opened' in this.result ? ` at ${shortTime(this.result.opened.at)}` : '';
    return `Changes since ${baselineName(this.baseline)}${opened}${state ? ` (${state})` : ''}`;
  }

  private async compare(): Promise<void> {
    const ref = parseSandboxKey(this.key);
    if (!ref) return;
    this.inFlight = new vscode.CancellationTokenSource();
    try {
      const token = this.inFlight.token;
      const result: ComparedChanges =
        'opened' in this.baseline
          ? await this.companion.request('openings/compareSandbox', { sandbox: ref }, { token })
          : await this.companion.request('sessions/compareSandbox', { sandbox: ref, sessionId: this.baseline.sessionId, revision: this.baseline.revision }, { token });
      if (this.inFlight.token.isCancellationRequested) return;
      this.show(result);
    } catch (err) {
      if (this.inFlight.token.isCancellationRequested) return;
      this.fail(err);
    } finally {
      this.inFlight.dispose();
      this.inFlight = undefined;
    }
  }

  private show(result: ComparedChanges): void {
    const before = [...this.byPath.keys()];
    this.result = result;
    this.error = undefined;
    this.byPath = new Map(result.changes.map((c) => [c.path, c.status]));
    const more = result.total - result.changes.length;
    this.group.label = this.label(more > 0 ? `${more} more not listed` : undefined);
    this.group.resourceStates = result.changes.map((change) => this.resourceState(change));
    this.control.count = result.total;
    this.onResult(this.key, [...new Set([...before, ...this.byPath.keys()])]);
  }

  private fail(err: unknown): void {
    const before = [...this.byPath.keys()];
    const why =
      err instanceof CompanionRequestError && err.code === 'not_found' && !('opened' in this.baseline)
        ? `${baselineName(this.baseline)} is no longer retained; choose another with Compare Sandbox with Revision…`
        : err instanceof CompanionRequestError && err.causeCode === 'policy_rejected'
          ? `a save would be refused: ${err.message}`
          : messageOf(err);
    this.log.warn(`comparing ${this.key} with ${baselineName(this.baseline)}: ${why}`);
    this.result = undefined;
    this.error = why;
    this.byPath = new Map();
    this.group.label = this.label(`not compared: ${why}`);
    this.group.resourceStates = [];
    this.control.count = 0;
    this.onResult(this.key, before);
  }

  private resourceState(change: WorkspaceChange): vscode.SourceControlResourceState {
    const uri = sandboxUri(this.key, change.path);
    const words = `${STATUS_WORDS[change.status]} since ${sinceWords(this.baseline)}`;
    return {
      resourceUri: uri,
      contextValue: change.status,
      decorations: { tooltip: words, strikeThrough: change.status === 'deleted', faded: change.status === 'deleted' },
      command: { title: 'Open Change', command: 'sandboxSessions.openSandboxChange', arguments: [this.key, change.path, change.status] },
    };
  }

  dispose(): void {
    this.pacer.dispose();
    this.inFlight?.cancel();
    const shown = [...this.byPath.keys()];
    this.byPath = new Map();
    this.onResult(this.key, shown);
    this.control.dispose();
  }
}

export class SandboxChangesView implements vscode.Disposable {
  private readonly shown = new Map<string, ShownChanges>();
  /** Shown sandboxes whose summary (and so their mark) was asked of the server once. */
  private readonly asked = new Set<string>();
  private anyShown = false;
  private readonly subscriptions: vscode.Disposable[];
  private readonly decorationChanges = new vscode.EventEmitter<vscode.Uri[]>();
  /** The Explorer's marks of the files listed (for the FileDecorationProvider). */
  readonly onDidChangeDecorations = this.decorationChanges.event;

  constructor(
    private readonly companion: CompanionClient,
    private readonly registry: SandboxRegistry,
    readonly baselines: ChangeBaselines,
    onDidChangeFile: vscode.Event<vscode.FileChangeEvent[]>,
    private readonly log: vscode.LogOutputChannel,
    private readonly pacing: PacerOptions = {},
  ) {
    const baselineChanged = baselines.onDidChange((key) => {
      this.shown.get(key)?.dispose();
      this.shown.delete(key);
      this.update();
    });
    this.subscriptions = [
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.update()),
      vscode.window.tabGroups.onDidChangeTabs(() => this.update()),
      registry.onDidChange(() => this.update()),
      onDidChangeFile((events) => {
        const keys = new Set(events.filter((e) => e.uri.scheme === SANDBOX_SCHEME).map((e) => e.uri.authority));
        for (const key of keys) this.shown.get(key)?.pacer.changed();
      }),
      { dispose: () => baselineChanged.dispose() },
      this.decorationChanges,
      ...this.commands(),
    ];
    this.update();
  }

  /** The sandboxes whose changes are shown here. */
  compared(): string[] {
    return [...this.shown.keys()];
  }

  /** The last comparison of a shown sandbox (undefined before the first), and why the last one failed. */
  state(key: string): { result: ComparedChanges | undefined; error: string | undefined } | undefined {
    const shown = this.shown.get(key);
    return shown && { result: shown.result, error: shown.error };
  }

  /** How a file of a shown sandbox differs from the baseline, if it does. */
  status(uri: vscode.Uri): { status: WorkspaceChange['status']; baseline: Baseline } | undefined {
    if (uri.scheme !== SANDBOX_SCHEME) return undefined;
    const shown = this.shown.get(uri.authority);
    const status = shown?.status(uri.path.replace(/^\/+/, ''));
    return shown && status ? { status, baseline: shown.baseline } : undefined;
  }

  /** Compares a shown sandbox now; resolves once it has been (undefined if the sandbox is not compared here). */
  async refresh(key: string): Promise<void> {
    await this.shown.get(key)?.pacer.now();
  }

  private update(): void {
    const shownNow = shownSandboxes();
    // The Source Control view's welcome offers Compare Sandbox with Revision… while a sandbox is shown here.
    if (shownNow.size > 0 !== this.anyShown) {
      this.anyShown = shownNow.size > 0;
      void vscode.commands.executeCommand('setContext', 'sandboxSessions.sandboxShown', this.anyShown);
    }
    for (const [key, shown] of this.shown) {
      // A sandbox saved as (or opened from) another revision meanwhile, by anyone, is compared with that one now.
      if (shownNow.has(key) && this.registry.lifecycle(key) === undefined && sameBaseline(shown.baseline, this.baseline(key))) continue;
      shown.dispose();
      this.shown.delete(key);
    }
    for (const key of shownNow) {
      if (this.shown.has(key) || this.registry.lifecycle(key) !== undefined) continue;
      const baseline = this.baseline(key);
      if (!baseline) {
        this.learnMark(key);
        continue;
      }
      const shown = new ShownChanges(key, baseline, this.companion, this.log, (k, paths) => this.decorationChanges.fire(paths.map((p) => sandboxUri(k, p))), this.pacing);
      this.shown.set(key, shown);
      void shown.pacer.now();
    }
  }

  /**
   * What a sandbox's changes are shown against, if anything (changeBaselines.ts). Since opened only once its summary
   * is known to hold no mark: a sandbox opened from a revision is never snapshotted for nothing.
   */
  baseline(key: string): Baseline | undefined {
    const summary = this.registry.summary(key);
    const resolved = this.baselines.resolve(key, summary?.sessionRevision);
    if (resolved !== undefined || summary === undefined || this.baselines.stopped(key, summary.sessionRevision)) return resolved;
    return SINCE_OPENED;
  }

  /** A folder opened before the window heard of its sandbox: its summary, mark included, is fetched once. */
  private learnMark(key: string): void {
    const ref = parseSandboxKey(key);
    if (this.registry.summary(key) !== undefined || this.asked.has(key) || !ref || sandboxKey(ref) !== key) return;
    this.asked.add(key);
    this.registry.refresh(ref).catch((err: unknown) => this.log.debug(`could not read ${key}'s summary: ${messageOf(err)}`));
  }

  private commands(): vscode.Disposable[] {
    /** From the Source Control title: the entry's sandbox; from elsewhere a key, else every compared sandbox. */
    const keysOf = (arg: unknown): string[] => {
      if (typeof arg === 'string') return [arg];
      const root = (arg as { rootUri?: vscode.Uri } | undefined)?.rootUri;
      return root?.scheme === SANDBOX_SCHEME ? [root.authority] : this.compared();
    };
    return [
      vscode.commands.registerCommand('sandboxSessions.refreshSandboxChanges', (arg?: unknown) => Promise.all(keysOf(arg).map((key) => this.refresh(key)))),
      vscode.commands.registerCommand('sandboxSessions.stopComparingSandbox', (arg?: unknown) => Promise.all(keysOf(arg).map((key) => this.baselines.stop(key)))),
      vscode.commands.registerCommand('sandboxSessions.openSandboxChange', (key: string, rel: string, status: WorkspaceChange['status']) => this.open(key, rel, status)),
    ];
  }

  /** A modified file opens as a diff (revision ↔ sandbox), an added one as itself, a deleted one as it was. */
  private async open(key: string, rel: string, status: WorkspaceChange['status']): Promise<void> {
    const baseline = this.shown.get(key)?.baseline ?? this.baseline(key);
    if (!baseline) return;
    const theirs = originalUri(key, baseline, rel);
    const mine = sandboxUri(key, rel);
    if (status === 'added') await vscode.commands.executeCommand('vscode.open', mine);
    else if (status === 'deleted') await vscode.commands.executeCommand('vscode.open', theirs);
    else await vscode.commands.executeCommand('vscode.diff', theirs, mine, `${rel} (${baselineName(baseline)} ↔ sandbox)`);
  }

  dispose(): void {
    for (const shown of this.shown.values()) shown.dispose();
    this.shown.clear();
    for (const s of this.subscriptions) s.dispose();
  }
}
