// The sandbox commands of the palette, the Sandboxes view and the status bar: New Sandbox… (and
// New Sandbox Here on a namespace of the view), Open Sandbox (as a workspace folder or in a new window), Open Terminal, Close Sandbox (Drain),
// Cancel Sandbox (Immediate), Delete, Download Artifacts…, Show Logs. Long work runs under
// withProgress with a working Cancel.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vscode from 'vscode';
import { z } from 'zod';
import type { TerminationMode } from '../../protocol/kruntimes/run';
import { sandboxFolderName, type SandboxSummary } from '../../protocol/sandboxes';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';
import { sandboxUri } from '../fs/sandboxFileSystemProvider';
import { closeReportedHere } from '../sandboxes/lifecycleNotice';
import { recordPendingOpen } from '../sandboxes/pendingOpen';
import { writeSandboxWorkspaceFile } from '../sandboxes/workspaceFile';
import { createSandboxResolver, type SandboxTarget } from '../sandboxes/sandboxPicker';
import type { SandboxRegistry } from '../sandboxes/registry';
import { sandboxTerminalOptions, type TerminalFactoryDeps } from '../terminal/sandboxPseudoterminal';
import { isSandboxTreeNode, type SandboxTreeNode, type SandboxTreeProvider } from '../views/sandboxTree';
import { type NewSandboxArgs, NewSandboxArgsSchema, NewSandboxRefusal, type NewSandboxTarget, resolveNewSandboxTarget } from './newSandboxTarget';

export interface CommandDeps {
  context: vscode.ExtensionContext;
  companion: CompanionClient;
  registry: SandboxRegistry;
  tree: SandboxTreeProvider;
  log: vscode.LogOutputChannel;
  terminals: TerminalFactoryDeps;
  /** Finishes a recorded "open sandbox" intent (reveal the folder, open a terminal). */
  finishPendingOpen(): Promise<void>;
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

type Target = SandboxTarget;

const READ_ONLY_NOW = 'Its files are read-only now; open a new sandbox to keep working.';

export interface OpenOptions {
  /** Skip the prompt: add to this window's folders, open instead of this window's folders, or open a new window. */
  mode?: 'add' | 'here' | 'newWindow';
  openTerminal?: boolean;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function progress<T>(title: string, work: (report: (message: string) => void, token: vscode.CancellationToken) => Promise<T>): Promise<T> {
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (p, token) =>
    work((message) => p.report({ message }), token),
  );
}

export function registerSandboxCommands(deps: CommandDeps): vscode.Disposable[] {
  const { companion, registry, tree, log } = deps;

  const resolve = createSandboxResolver(companion, registry);

  const openTerminal = (s: SandboxSummary, cwd?: string) => {
    const connection = registry.connection(s.key);
    if (!connection) return;
    const terminal = vscode.window.createTerminal(sandboxTerminalOptions(connection, deps.terminals, cwd));
    terminal.show();
    return terminal;
  };

  const openFolder = async (s: SandboxSummary, options: OpenOptions = {}) => {
    if (s.phase !== 'Ready') {
      void vscode.window.showWarningMessage(`${s.ref.name} is ${s.phase ?? 'Pending'}, not Ready; it cannot be opened.`);
      return;
    }
    const uri = sandboxUri(s.key);
    const folders = vscode.workspace.workspaceFolders ?? [];
    if (folders.some((f) => f.uri.toString() === uri.toString())) {
      await vscode.commands.executeCommand('workbench.view.explorer');
      if (options.openTerminal) openTerminal(s);
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
    await recordPendingOpen(deps.context.globalState, { key: s.key, openTerminal: options.openTerminal ?? false });
    if (mode === 'newWindow' || mode === 'here' || folders.length === 0) {
      const file = await writeSandboxWorkspaceFile(deps.context.globalStorageUri, s.ref);
      await vscode.commands.executeCommand('vscode.openFolder', file, { forceNewWindow: mode === 'newWindow' });
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
    if (await added.promise) await deps.finishPendingOpen();
  };

  const terminate = async (target: Target, mode: TerminationMode): Promise<SandboxSummary | undefined> => {
    const s = await resolve(target, mode === 'Drain' ? ['Ready', 'Pending', 'Scheduled', 'Running'] : ['Ready', 'Pending', 'Scheduled', 'Running', 'Finalizing']);
    if (!s) return;
    if (mode === 'Immediate') {
      const ok = await vscode.window.showWarningMessage(
        `Cancel sandbox ${s.ref.name}? Running commands are killed and no artifacts are exported.`,
        { modal: true },
        'Cancel Sandbox',
      );
      if (ok !== 'Cancel Sandbox') return;
    }
    closeReportedHere(s.key);
    try {
      const { sandbox } = await progress(mode === 'Drain' ? `Closing ${s.ref.name} (Drain)` : `Cancelling ${s.ref.name}`, (report, token) =>
        companion.request('sandboxes/terminate', { ref: s.ref, mode, wait: true }, { token, onProgress: (v) => v.message && report(v.message) }),
      );
      registry.fireChanged(sandbox);
      if (mode === 'Drain') {
        const n = sandbox.artifacts?.length ?? 0;
        // The offer does not hold the command: it resolves with the closed sandbox right away.
        if (n > 0) {
          void vscode.window.showInformationMessage(`${s.ref.name} closed with ${n} artifact(s). ${READ_ONLY_NOW}`, 'Download Artifacts…').then((action) => {
            if (action) void vscode.commands.executeCommand('sandboxSessions.downloadArtifacts', sandbox.key);
          });
        } else {
          void vscode.window.showInformationMessage(`${s.ref.name} closed; it exported no artifacts. ${READ_ONLY_NOW}`);
        }
      } else {
        void vscode.window.showInformationMessage(`${s.ref.name} was cancelled. ${READ_ONLY_NOW}`);
      }
      return sandbox;
    } catch (err) {
      if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
      log.error(`terminate ${s.key} (${mode}) failed: ${errorText(err)}`);
      void vscode.window.showErrorMessage(`Could not ${mode === 'Drain' ? 'close' : 'cancel'} ${s.ref.name}: ${errorText(err)}`);
    }
  };

  const newSandbox = async (raw?: unknown): Promise<SandboxSummary | undefined> => {
    // The view's **+** is called with the selected row, which says nothing about the new sandbox.
    const parsedArgs = NewSandboxArgsSchema.optional().safeParse(isSandboxTreeNode(raw) ? undefined : raw);
    if (!parsedArgs.success) {
      void vscode.window.showErrorMessage(`New Sandbox was given arguments it cannot use: ${z.prettifyError(parsedArgs.error)}`);
      return;
    }
    const args: NewSandboxArgs = parsedArgs.data ?? {};
    let target: NewSandboxTarget | undefined;
    try {
      const { providers } = await companion.request('providers/list', {});
      target = await resolveNewSandboxTarget(providers, args);
    } catch (err) {
      if (err instanceof NewSandboxRefusal) {
        const action = err.action;
        void vscode.window.showErrorMessage(err.message, ...(action ? [action.label] : [])).then((choice) => {
          if (choice && action) void vscode.commands.executeCommand(action.command, ...(action.args ?? []));
        });
      } else {
        log.error(`new sandbox: ${errorText(err)}`);
        void vscode.window.showErrorMessage(`Could not list the sandbox providers: ${errorText(err)}`, 'Show Logs').then((c) => c && log.show());
      }
      return;
    }
    if (!target) return;
    const { provider, context, namespace, runtime } = target;
    const where = provider.kind === 'kruntimes' ? ` in ${context ?? 'the current context'}/${namespace}` : '';
    try {
      const { sandbox } = await progress(`Creating a ${runtime} sandbox${where}`, (report, token) =>
        companion.request(
          'sandboxes/create',
          {
            spec: {
              provider: provider.kind,
              runtime,
              namespace,
              ...(context ? { context } : {}),
              ...(args.name ? { name: args.name } : {}),
              idleTimeoutSeconds: vscode.workspace.getConfiguration('sandboxSessions').get<number>('sandbox.idleTimeoutSeconds', 3600),
              ...leaseSetting(),
              ...timeoutSetting(),
            },
            waitForReady: true,
          },
          { token, onProgress: (v) => v.message && report(v.message) },
        ),
      );
      registry.fireChanged(sandbox);
      tree.refresh();
      log.info(`created sandbox ${sandbox.key}`);
      if (args.open !== false) await openFolder(sandbox, args.open ?? {});
      return sandbox;
    } catch (err) {
      if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
      log.error(`create a ${provider.kind} sandbox${where} (runtime ${runtime}) failed: ${errorText(err)}`);
      void vscode.window.showErrorMessage(`Could not create a sandbox${where}: ${errorText(err)}`, 'Show Logs').then((c) => c && log.show());
      return;
    }
  };

  /** "New Sandbox Here" on a namespace (or context) of the Sandboxes view. */
  const newSandboxHere = (node?: SandboxTreeNode) => {
    if (node?.kind === 'namespace') return newSandbox({ provider: node.provider.kind, context: node.context, namespace: node.namespace });
    if (node?.kind === 'context') return newSandbox({ provider: node.provider.kind, context: node.context });
    if (node?.kind === 'provider') return newSandbox({ provider: node.provider.kind });
    return newSandbox();
  };

  const downloadArtifacts = async (target: Target, destination?: string) => {
    const s = await resolve(target, ['Succeeded'], 'Select a closed sandbox to download its artifacts');
    if (!s) return;
    if (!s.artifacts?.length) {
      void vscode.window.showInformationMessage(`${s.ref.name} has no artifacts (they are exported by Close Sandbox (Drain)).`);
      return;
    }
    let dest = destination;
    if (!dest) {
      const picked = await vscode.window.showOpenDialog({
        canSelectFolders: true,
        canSelectFiles: false,
        canSelectMany: false,
        openLabel: 'Download Here',
        defaultUri: vscode.Uri.file(fs.existsSync(path.join(os.homedir(), 'Downloads')) ? path.join(os.homedir(), 'Downloads') : os.homedir()),
      });
      if (!picked?.[0]) return;
      dest = path.join(picked[0].fsPath, s.ref.name);
    }
    try {
      const { artifacts } = await progress(`Downloading artifacts of ${s.ref.name}`, (report, token) =>
        companion.request('sandboxes/artifacts/download', { ref: s.ref, destination: dest, unpack: true }, { token, onProgress: (v) => v.message && report(v.message) }),
      );
      log.info(`downloaded ${artifacts.length} artifact(s) of ${s.key} to ${dest}`);
      if (!destination) {
        const reveal = await vscode.window.showInformationMessage(`Downloaded ${artifacts.length} verified artifact(s) to ${dest}.`, 'Reveal');
        if (reveal) await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(dest));
      }
      return artifacts;
    } catch (err) {
      if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
      void vscode.window.showErrorMessage(`Could not download the artifacts of ${s.ref.name}: ${errorText(err)}`);
      return;
    }
  };

  const reg = (id: string, fn: (...args: never[]) => unknown) => vscode.commands.registerCommand(id, fn as (...args: unknown[]) => unknown);
  return [
    reg('sandboxSessions.newSandbox', newSandbox),
    reg('sandboxSessions.newSandboxHere', newSandboxHere),
    reg('sandboxSessions.openSandbox', async (target: Target, options?: OpenOptions) => {
      const s = await resolve(target, ['Ready'], 'Select a Ready sandbox to open');
      if (s) await openFolder(s, options);
    }),
    reg('sandboxSessions.openSandboxInNewWindow', async (target: Target) => {
      const s = await resolve(target, ['Ready'], 'Select a Ready sandbox to open');
      if (s) await openFolder(s, { mode: 'newWindow' });
    }),
    reg('sandboxSessions.openTerminal', async (target: Target, cwd?: string) => {
      const s = await resolve(target, ['Ready'], 'Select a Ready sandbox for the terminal');
      return s ? openTerminal(s, cwd) : undefined;
    }),
    reg('sandboxSessions.closeSandbox', (target: Target) => terminate(target, 'Drain')),
    reg('sandboxSessions.cancelSandbox', (target: Target) => terminate(target, 'Immediate')),
    reg('sandboxSessions.deleteSandbox', async (target: Target) => {
      const s = await resolve(target, undefined, 'Select a sandbox to delete');
      if (!s) return;
      const ok = await vscode.window.showWarningMessage(`Delete sandbox ${s.ref.name} and its workspace?`, { modal: true }, 'Delete');
      if (ok !== 'Delete') return;
      try {
        await companion.request('sandboxes/delete', { ref: s.ref });
        tree.refresh();
      } catch (err) {
        void vscode.window.showErrorMessage(`Could not delete ${s.ref.name}: ${errorText(err)}`);
      }
    }),
    reg('sandboxSessions.downloadArtifacts', downloadArtifacts),
    reg('sandboxSessions.refresh', () => tree.refresh()),
    reg('sandboxSessions.showLogs', () => log.show()),
    reg('sandboxSessions.sandboxActions', async (target: Target) => {
      const s = await resolve(target);
      if (!s) return;
      const actions: [string, string][] = [
        ['Open Terminal', 'sandboxSessions.openTerminal'],
        ['Close Sandbox (Drain)', 'sandboxSessions.closeSandbox'],
        ['Cancel Sandbox (Immediate)', 'sandboxSessions.cancelSandbox'],
        ['Download Artifacts…', 'sandboxSessions.downloadArtifacts'],
        ['Show Logs', 'sandboxSessions.showLogs'],
      ];
      const picked = await vscode.window.showQuickPick(actions.map(([label, command]) => ({ label, command })), { placeHolder: `${s.ref.name} (${s.phase ?? 'Pending'})` });
      if (picked) await vscode.commands.executeCommand(picked.command, s.key);
    }),
  ];
}

/** `sandboxSessions.sandbox.timeout` as a spec field (absent when empty). */
function timeoutSetting(): { timeout?: string } {
  const timeout = vscode.workspace.getConfiguration('sandboxSessions').get<string>('sandbox.timeout', '').trim();
  return timeout ? { timeout } : {};
}

/** `sandboxSessions.sandbox.leaseTimeoutSeconds` as a spec field (absent for 0: no lease). */
function leaseSetting(): { leaseTimeoutSeconds?: number } {
  const seconds = Math.floor(vscode.workspace.getConfiguration('sandboxSessions').get<number>('sandbox.leaseTimeoutSeconds', 0));
  return seconds >= 1 ? { leaseTimeoutSeconds: seconds } : {};
}
