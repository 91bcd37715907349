// The `sandbox:` file system: `sandbox://<sandbox key>/<workspace path>`. A thin adapter from
// VS Code's FileSystemProvider onto SandboxFiles (one per sandbox), mapping its errors to
// FileSystemError and batching change events. `copy` within one sandbox is one command there.
import * as vscode from 'vscode';
import { parseSandboxKey } from '../../protocol/sandboxes';
import { CompanionRequestError } from '../companion/companionClient';
import { closedSandboxText } from '../sandboxes/errorText';
import type { SandboxRegistry } from '../sandboxes/registry';
import { type FileChange, type FilesCounters, FsError, SandboxFiles } from './sandboxFiles';
import { normalize } from './sandboxPaths';

export const SANDBOX_SCHEME = 'sandbox';

export function sandboxUri(key: string, path = ''): vscode.Uri {
  return vscode.Uri.from({ scheme: SANDBOX_SCHEME, authority: key, path: `/${path.replace(/^\/+/, '')}` });
}

/**
 * Every failure reaches VS Code as a FileSystemError with a sentence (VS Code shows any other
 * error as `<class name>: <message>`). A sandbox that is closing, closed or deleted says so, and
 * what to do, instead of the gateway's or companion server's words.
 */
function toFileSystemError(err: unknown, uri: vscode.Uri, ended: string | undefined): Error {
  if (ended !== undefined) {
    // Reads of an ended sandbox are "unavailable"; changes are refused like any read-only file's.
    return err instanceof FsError && err.kind === 'NoPermissions' ? vscode.FileSystemError.NoPermissions(ended) : vscode.FileSystemError.Unavailable(ended);
  }
  if (!(err instanceof FsError)) return vscode.FileSystemError.Unavailable(err instanceof Error ? err.message : String(err));
  switch (err.kind) {
    case 'FileNotFound':
      return vscode.FileSystemError.FileNotFound(uri);
    case 'FileExists':
      return vscode.FileSystemError.FileExists(uri);
    case 'FileIsADirectory':
      return vscode.FileSystemError.FileIsADirectory(uri);
    case 'FileNotADirectory':
      return vscode.FileSystemError.FileNotADirectory(uri);
    case 'NoPermissions':
      return vscode.FileSystemError.NoPermissions(err.message);
    case 'Unavailable':
      return vscode.FileSystemError.Unavailable(err.message);
    case 'ChangedElsewhere':
      // VS Code has no code for it (its own check, before it calls us, compares sizes): its save error shows the
      // sentence, with Retry and Revert.
      return new vscode.FileSystemError(err.message);
  }
}

export class SandboxFileSystemProvider implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;
  private readonly refusals = new vscode.EventEmitter<{ uri: vscode.Uri; message: string }>();
  /** A save was refused: the file changed in the sandbox after this window read it (saveConflicts.ts offers the ways on). */
  readonly onDidRefuseSave = this.refusals.event;
  private readonly files = new Map<string, SandboxFiles>();
  private pending: vscode.FileChangeEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Editors whose unsaved edits are gone without a save (Revert, or undone): see SandboxFiles.editorShows. */
  private readonly cleanEditors = vscode.workspace.onDidChangeTextDocument(({ document: d }) => {
    if (d.uri.scheme === SANDBOX_SCHEME && !d.isDirty) this.files.get(d.uri.authority)?.editorShows(d.uri.path, () => d.getText());
  });

  constructor(private readonly registry: SandboxRegistry) {}

  /** The file system of one sandbox (for tests and diagnostics: its counters). */
  filesOf(key: string): SandboxFiles {
    let f = this.files.get(key);
    if (!f) {
      const connection = this.registry.connection(key);
      if (!connection) throw vscode.FileSystemError.Unavailable(`"${key}" is not a sandbox reference`);
      f = new SandboxFiles(connection, { holdsUnsavedEdits: (p) => this.holdsUnsavedEdits(key, p) });
      f.onDidChange((changes) => this.queue(key, changes));
      this.files.set(key, f);
    }
    return f;
  }

  private holdsUnsavedEdits(key: string, p: string): boolean {
    return vscode.workspace.textDocuments.some(
      (d) => d.isDirty && d.uri.scheme === SANDBOX_SCHEME && d.uri.authority === key && normalize(d.uri.path) === p,
    );
  }

  /** The counters of a sandbox's file system, if this window has used it (a diagnostic; nothing is created). */
  countersOf(key: string): FilesCounters | undefined {
    return this.files.get(key)?.counters;
  }

  /** Tells the file system a terminal command finished in `cwd` of sandbox `key`; resolves once its changes are announced. */
  commandRanIn(key: string, cwd: string): Promise<void> {
    return this.files.get(key)?.commandRanIn(cwd) ?? Promise.resolve();
  }

  private queue(key: string, changes: FileChange[]): void {
    for (const c of changes) {
      const type =
        c.type === 'created' ? vscode.FileChangeType.Created : c.type === 'deleted' ? vscode.FileChangeType.Deleted : vscode.FileChangeType.Changed;
      this.pending.push({ type, uri: sandboxUri(key, c.path) });
    }
    // Batch like memfs: one event burst per 5 ms.
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      const batch = this.pending;
      this.pending = [];
      this.emitter.fire(batch);
    }, 5);
  }

  private async run<T>(uri: vscode.Uri, fn: (files: SandboxFiles, path: string) => Promise<T>): Promise<T> {
    try {
      return await fn(this.filesOf(uri.authority), uri.path);
    } catch (err) {
      if (err instanceof FsError && err.kind === 'ChangedElsewhere') this.refusals.fire({ uri, message: err.message });
      throw toFileSystemError(err, uri, await this.endedText(uri.authority, err));
    }
  }

  /** Why a failed call failed when the sandbox has ended (asking the server when the window does not know yet). */
  private async endedText(key: string, err: unknown): Promise<string | undefined> {
    const ref = parseSandboxKey(key);
    if (!ref) return undefined;
    if (err instanceof CompanionRequestError && (err.code === 'not_ready' || err.code === 'not_found') && !this.registry.lifecycle(key)) {
      await this.registry.refresh(ref).catch(() => undefined);
    }
    const ended = this.registry.lifecycle(key);
    return ended === undefined ? undefined : closedSandboxText(ref.name, ended, this.registry.summary(key)?.message);
  }

  /**
   * After a sandbox closed or was deleted: its open files change (so VS Code stats them again and
   * turns their editors read-only), and so does its root (so the Explorer asks again).
   */
  sandboxEnded(key: string): void {
    const open = vscode.workspace.textDocuments.filter((d) => d.uri.scheme === SANDBOX_SCHEME && d.uri.authority === key);
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri: sandboxUri(key) }, ...open.map((d) => ({ type: vscode.FileChangeType.Changed, uri: d.uri }))]);
  }

  watch(): vscode.Disposable {
    // Changes this extension makes (writes, and commands run in its terminals) are announced
    // without a watcher; other clients' changes in a shown sandbox come from its log (LiveSandboxChanges).
    return new vscode.Disposable(() => undefined);
  }

  stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    return this.run(uri, async (f, p) => {
      const info = await f.stat(p);
      return {
        type: info.type === 'directory' ? vscode.FileType.Directory : vscode.FileType.File,
        size: info.size,
        mtime: info.mtime,
        ctime: info.ctime,
        ...(info.readonly ? { permissions: vscode.FilePermission.Readonly } : {}),
      };
    });
  }

  readDirectory(uri: vscode.Uri): Promise<[string, vscode.FileType][]> {
    return this.run(uri, async (f, p) =>
      (await f.readDirectory(p)).map(([name, type]) => [name, type === 'directory' ? vscode.FileType.Directory : vscode.FileType.File]),
    );
  }

  readFile(uri: vscode.Uri): Promise<Uint8Array> {
    return this.run(uri, (f, p) => f.readFile(p));
  }

  writeFile(uri: vscode.Uri, content: Uint8Array, options: { readonly create: boolean; readonly overwrite: boolean }): Promise<void> {
    return this.run(uri, (f, p) => f.writeFile(p, content, options));
  }

  createDirectory(uri: vscode.Uri): Promise<void> {
    return this.run(uri, (f, p) => f.createDirectory(p));
  }

  delete(uri: vscode.Uri, options: { readonly recursive: boolean }): Promise<void> {
    return this.run(uri, (f, p) => f.delete(p, options));
  }

  rename(oldUri: vscode.Uri, newUri: vscode.Uri, options: { readonly overwrite: boolean }): Promise<void> {
    if (oldUri.authority !== newUri.authority) {
      return Promise.reject(vscode.FileSystemError.Unavailable('moving files between sandboxes is not supported; copy them instead'));
    }
    return this.run(oldUri, (f, p) => f.rename(p, newUri.path, options));
  }

  async copy(source: vscode.Uri, destination: vscode.Uri, options: { readonly overwrite: boolean }): Promise<void> {
    if (source.authority === destination.authority) return this.run(destination, (f, p) => f.copy(source.path, p, options));
    // From one sandbox to another (VS Code gives both to this provider): file by file, as VS Code itself would.
    const target = await this.stat(destination).catch(() => undefined);
    if (target && !options.overwrite) throw vscode.FileSystemError.FileExists(destination);
    if (target) await this.delete(destination, { recursive: true });
    await this.copyAcross(source, destination);
  }

  private async copyAcross(source: vscode.Uri, destination: vscode.Uri): Promise<void> {
    if ((await this.stat(source)).type !== vscode.FileType.Directory) {
      await this.writeFile(destination, await this.readFile(source), { create: true, overwrite: true });
      return;
    }
    await this.createDirectory(destination);
    for (const [name] of await this.readDirectory(source)) await this.copyAcross(vscode.Uri.joinPath(source, name), vscode.Uri.joinPath(destination, name));
  }

  dispose(): void {
    this.cleanEditors.dispose();
    if (this.timer) clearTimeout(this.timer);
    this.emitter.dispose();
    this.refusals.dispose();
  }
}
