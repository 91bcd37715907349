// Open Sandbox (as a workspace folder, here or in a new window) and Open Terminal: the window that shows the
// folder finishes the open (pendingOpen.ts), since opening a workspace restarts this extension host.
import * as vscode from 'vscode';
import { sandboxFolderName, type SandboxSummary } from '../../../protocol/sandboxes';
import { sandboxUri } from '../../fs/sandboxFileSystemProvider';
import { recordPendingOpen } from '../../sandboxes/pendingOpen';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { writeFolderAndSandboxWorkspaceFile, writeSandboxWorkspaceFile } from '../../sandboxes/workspaceFile';
import { sandboxTerminalOptions } from '../../terminal/sandboxPseudoterminal';
import type { SandboxCommandContext } from './context';

export interface OpenOptions {
  /** Skip the prompt: add to this window's folders, open instead of this window's folders, or open a new window. */
  mode?: 'add' | 'here' | 'newWindow';
  openTerminal?: boolean;
}

/** Resolves true when `uri` becomes a workspace folder (false after 30 s without it). */
function folderAdded(uri: vscode.Uri): { promise: Promise<boolean>; dispose(): void } {
  let done: (added: boolean) => void = () => undefined;
  const promise = new Promise<boolean>((resolve) => (done = resolve));
  const sub = vscode.workspace.onDidChangeWorkspaceFolders((e) => {
    if (e.added.some((f) => f.uri.toString() === uri.toString())) finish(true);
  });
  const timer = setTimeout(() => finish(false), 30_000);
  function finish(added: boolean): void {
    clearTimeout(timer);
    sub.dispose();
    done(added);
  }
  return { promise, dispose: () => finish(false) };
}

export function openTerminal(ctx: SandboxCommandContext, s: SandboxSummary, cwd?: string) {
  const { registry } = ctx;
  const connection = registry.connection(s.key);
  if (!connection) return;
  const terminal = vscode.window.createTerminal(sandboxTerminalOptions(connection, ctx.terminals, cwd));
  terminal.show();
  return terminal;
}

export async function openFolder(ctx: SandboxCommandContext, s: SandboxSummary, options: OpenOptions = {}) {
  if (s.phase !== 'Ready') {
    void vscode.window.showWarningMessage(`${s.ref.name} is ${s.phase ?? 'Pending'}, not Ready; it cannot be opened.`);
    return;
  }
  const uri = sandboxUri(s.key);
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.some((f) => f.uri.toString() === uri.toString())) {
    await vscode.commands.executeCommand('workbench.view.explorer');
    if (options.openTerminal) openTerminal(ctx, s);
    return;
  }
  let mode = options.mode;
  if (!mode) {
    const choices = folders.length === 0 ? ['Open Here', 'Open in New Window'] : ['Add to Workspace', 'Open Here', 'Open in New Window'];
    const choice = await vscode.window.showInformationMessage(`Open sandbox ${s.ref.name} as a folder`, ...choices);
    if (!choice) return;
    mode = choice === 'Open in New Window' ? 'newWindow' : choice === 'Open Here' ? 'here' : 'add';
  }
  // The window that shows the folder finishes the open (reveal it, open a terminal): this one, the
  // next activation here when VS Code restarts this extension host, or the new window's.
  await recordPendingOpen(ctx.context.globalState, { key: s.key, openTerminal: options.openTerminal ?? false });
  if (mode === 'newWindow' || mode === 'here' || folders.length === 0) {
    const file = await writeSandboxWorkspaceFile(ctx.context.globalStorageUri, s.ref);
    await vscode.commands.executeCommand('vscode.openFolder', file, { forceNewWindow: mode === 'newWindow' });
    return;
  }
  if (!vscode.workspace.workspaceFile) {
    // A window of one folder: adding would make it an untitled workspace, which the browser build
    // reloads without the sandbox. A workspace file of both is opened here instead (one reload, as
    // VS Code's own add would make), and the reloaded window finishes the open.
    const file = await writeFolderAndSandboxWorkspaceFile(ctx.context.globalStorageUri, folders[0]!, s.ref);
    await vscode.commands.executeCommand('vscode.openFolder', file, { forceReuseWindow: true });
    return;
  }
  const added = folderAdded(uri);
  const ok = vscode.workspace.updateWorkspaceFolders(folders.length, 0, { uri, name: sandboxFolderName(s.ref) });
  if (!ok) {
    added.dispose();
    void vscode.window.showErrorMessage(`VS Code refused to add ${s.ref.name} to the workspace; try Open Here or Open in New Window.`);
    return;
  }
  // Without a restart (a workspace that has its first folder already) the open finishes here.
  if (await added.promise) await ctx.finishPendingOpen();
}

/** Open Sandbox: the sandbox picked (or given) opened as a folder, as `options` say or as the user chooses. */
export async function openSandbox(ctx: SandboxCommandContext, target: SandboxTarget, options?: OpenOptions) {
  const s = await ctx.resolve(target, ['Ready'], 'Select a Ready sandbox to open');
  if (s) await openFolder(ctx, s, options);
}

export async function openSandboxInNewWindow(ctx: SandboxCommandContext, target: SandboxTarget) {
  const s = await ctx.resolve(target, ['Ready'], 'Select a Ready sandbox to open');
  if (s) await openFolder(ctx, s, { mode: 'newWindow' });
}

/** Open Sandbox Terminal Here (the Explorer's menu on a sandbox folder): a Sandbox terminal in that folder. */
export async function openSandboxTerminalHere(ctx: SandboxCommandContext, folder: unknown) {
  if (!(folder instanceof vscode.Uri) || folder.scheme !== 'sandbox') {
    void vscode.window.showWarningMessage('Open Sandbox Terminal Here works on a folder of a sandbox in the Explorer.');
    return undefined;
  }
  // Terminal directories are relative to the sandbox's root ('' is the root itself).
  return openSandboxTerminal(ctx, folder, folder.path.replace(/^\/+|\/+$/g, ''));
}

/** Open Terminal: a Sandbox terminal of the sandbox picked (or given), in `cwd` if given. */
export async function openSandboxTerminal(ctx: SandboxCommandContext, target: SandboxTarget, cwd?: string) {
  const s = await ctx.resolve(target, ['Ready'], 'Select a Ready sandbox for the terminal');
  return s ? openTerminal(ctx, s, cwd) : undefined;
}
