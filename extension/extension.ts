// The VS Code extension's entry point: starts the companion server, registers the `sandbox:`
// file system, the Sandboxes view, the status bar, the Sandbox terminal profile and `sandbox`
// tasks, and the commands; then finishes an "open sandbox" that a restart interrupted. It activates
// in every window once start-up has finished (package.json: onStartupFinished) — the only event that
// reaches a sandbox window VS Code opened without its folder (see sandboxes/workspaceRepair.ts) —
// and so does little until used: the companion server starts with the first request.
import './zodSetup'; // first: it configures zod before any module builds a schema
import * as vscode from 'vscode';
import { parseSandboxKey } from '../protocol/sandboxes';
import { CompanionClient, type CompanionStartHooks, REPOSITORY_PASSWORD_SECRET } from './companion/companionClient';
import { registerSandboxCommands } from './commands/sandboxCommands';
import { registerOpenSandboxCommands } from './commands/openSandboxCommands';
import { registerSessionCommands } from './commands/sessionCommands';
import { registerCheckMachine } from './diagnostics/doctor';
import { registerSupportReport } from './diagnostics/supportReport';
import { REVISION_SCHEME, RevisionFileSystemProvider } from './fs/revisionFileSystemProvider';
import { SaveConflicts } from './fs/saveConflicts';
import { SANDBOX_SCHEME, SandboxFileSystemProvider, sandboxUri } from './fs/sandboxFileSystemProvider';
import { activeSandboxKey } from './sandboxes/activeSandbox';
import { SandboxLifecycleNotices } from './sandboxes/lifecycleNotice';
import { finishPendingOpenWhenShown, type PendingOpen, takePendingOpen } from './sandboxes/pendingOpen';
import { registerRestoringFolderView, restoreLostSandboxFolders } from './sandboxes/workspaceRepair';
import { SandboxRegistry } from './sandboxes/registry';
import { SandboxUsage } from './sandboxes/sandboxUsage';
import { SandboxPseudoterminal, sandboxTerminalOptions, type TerminalFactoryDeps } from './terminal/sandboxPseudoterminal';
import { SANDBOX_TASK_TYPE, SandboxTaskProvider } from './tasks/sandboxTasks';
import { guardHostShells } from './terminal/hostShellGuard';
import { InteractivePseudoterminal, registerInteractiveTerminal } from './terminal/interactiveTerminal';
import { SandboxTerminalRestore } from './terminal/terminalRestore';
import { SandboxStatusBar } from './views/statusBar';
import { SandboxTreeProvider } from './views/sandboxTree';
import { SessionTreeProvider } from './views/sessionTree';
import { registerOperationActions } from './views/operationActions';
import { OperationsTreeProvider } from './views/operationsTree';
import { WindowCommands } from './sandboxes/windowCommands';
import { SandboxLogChannels } from './views/sandboxLogChannels';
import { SandboxLogFollows } from './sandboxes/logFollows';
import { LiveSandboxChanges } from './fs/liveSandboxChanges';
import { ChangeBaselines } from './changes/changeBaselines';
import { registerChangeDecorations } from './changes/changeDecorations';
import { SandboxChangesView } from './changes/sandboxChangesView';
import { SandboxFolderWatches } from './fs/sandboxFolderWatches';
import { messageOf } from './sandboxes/errorText';
import { createSandboxResolver, type SandboxResolver, type SandboxTarget } from './sandboxes/sandboxPicker';
import { registerSandboxSearch, type SandboxSearch } from './search/registerSearch';
import { type McpServerPublication, registerMcpServerProvider } from './mcp/mcpServerProvider';
import { registerPorts } from './ports/portCommands';
import type { PortForwards } from './ports/portForwards';
import type { PortsTreeProvider } from './ports/portsTree';
import type { TerminalPortLinks } from './ports/terminalPortLinks';

/** What the extension exposes to other extensions and to its integration tests. */
export interface SandboxSessionsApi {
  companion: CompanionClient;
  registry: SandboxRegistry;
  fileSystem: SandboxFileSystemProvider;
  tree: SandboxTreeProvider;
  sessions: SessionTreeProvider;
  /** What a Sandbox terminal (line-based or interactive) has shown (last 64 KiB), or undefined for other terminals. */
  terminalTranscript(terminal: vscode.Terminal): string | undefined;
  /** What the Sandbox status bar item shows (undefined while hidden). */
  statusBarText(): string | undefined;
  /** The last "stops for want of use" warning the status bar showed. */
  idleWarning(): string | undefined;
  /** The Operations view (the active sandbox's audited operations, newest first). */
  operations: OperationsTreeProvider;
  /** What the Sandbox Log channel of a sandbox shows, or undefined before Show Sandbox Log. */
  sandboxLogText(key: string): string | undefined;
  /** The width VS Code gave a Sandbox terminal, in columns (undefined before it did, or for other terminals). */
  terminalColumns(terminal: vscode.Terminal): number | undefined;
  /** Whether Quick Open / Find in Files search sandbox folders here (else the fallback commands do). */
  search: Pick<SandboxSearch, 'providersRegistered' | 'unavailableReason'>;
  /** Live changes: the sandboxes shown in this window whose log it follows for other clients' changes. */
  live: LiveSandboxChanges;
  /** What the sandboxes shown here changed since their baseline revisions (Source Control, quick diff, Explorer marks). */
  changes: SandboxChangesView;
  /** The MCP server definition provider this extension published for agent mode. */
  mcp: McpServerPublication;
  /** This window's port forwards (the Ports section) and the link provider of Sandbox terminals. */
  ports: { forwards: PortForwards; links: TerminalPortLinks; tree: PortsTreeProvider };
}

export async function activate(context: vscode.ExtensionContext): Promise<SandboxSessionsApi> {
  const log = vscode.window.createOutputChannel('Sandbox Sessions', { log: true });
  context.subscriptions.push(log);
  log.info(`Sandbox Sessions ${String(context.extension.packageJSON.version)} activating`);

  const companion = new CompanionClient(context, log, companionStartHooks(log));
  context.subscriptions.push(companion);

  const registry = new SandboxRegistry(companion);
  const fileSystem = new SandboxFileSystemProvider(registry);
  const tree = new SandboxTreeProvider(companion, registry);
  const sessions = new SessionTreeProvider(companion);
  const statusBar = new SandboxStatusBar(registry);
  const resolveSandbox = createSandboxResolver(companion, registry);
  const logFollows = new SandboxLogFollows(companion);
  const windowCommands = new WindowCommands();
  const operations = new OperationsTreeProvider(logFollows, windowCommands);
  const logChannels = new SandboxLogChannels(logFollows);
  const folderWatches = new SandboxFolderWatches(companion, log);
  const live = new LiveSandboxChanges(registry, fileSystem, logFollows, log, folderWatches);
  const changes = new SandboxChangesView(companion, registry, new ChangeBaselines(context.globalState), fileSystem.onDidChangeFile, log);
  const terminals: TerminalFactoryDeps = {
    globalState: context.globalState,
    onCommandFinished: (key, cwd) => fileSystem.commandRanIn(key, cwd),
    commands: windowCommands,
  };
  context.subscriptions.push(
    registry,
    fileSystem,
    tree,
    vscode.workspace.registerFileSystemProvider(SANDBOX_SCHEME, fileSystem, { isCaseSensitive: true }),
    new SaveConflicts(fileSystem),
    vscode.workspace.registerFileSystemProvider(REVISION_SCHEME, new RevisionFileSystemProvider(companion), { isCaseSensitive: true, isReadonly: true }),
    vscode.window.registerTreeDataProvider('sandboxSessions.sandboxes', tree),
    registerRestoringFolderView(),
    sessions,
    vscode.window.registerTreeDataProvider('sandboxSessions.sessions', sessions),
    logFollows,
    folderWatches,
    live,
    changes,
    registerChangeDecorations(changes),
    operations,
    logChannels,
    vscode.window.registerTreeDataProvider('sandboxSessions.operations', operations),
    ...registerLogCommands(resolveSandbox, logChannels, operations),
    ...registerOperationActions({ operations, commands: windowCommands, registry, terminals }),
    statusBar,
    new SandboxUsage(registry, log),
    ...registerSandboxCommands({ context, companion, registry, tree, log, terminals, finishPendingOpen: async () => {
      const intent = await takePendingOpen(context.globalState, shownHere);
      if (intent) await showOpenedSandbox(intent, registry, terminals, log);
    } }),
    ...registerSessionCommands({ companion, registry, sessions, log, storage: context.globalStorageUri, changes }),
    ...registerOpenSandboxCommands({ context, companion, log }),
    ...registerInteractiveTerminal({ registry, resolveSandbox }),
    ...registerTerminalProfile(registry, terminals),
    ...registerServerSettings(context),
    vscode.tasks.registerTaskProvider(SANDBOX_TASK_TYPE, new SandboxTaskProvider(registry, terminals, log)),
  );
  const search = registerSandboxSearch({ companion, onDidChangeFile: fileSystem.onDidChangeFile, globalState: context.globalState, log });
  context.subscriptions.push(...search.disposables);
  await restoreWindow(context, registry, fileSystem, terminals, log);
  context.subscriptions.push(registerCheckMachine(context));
  context.subscriptions.push(registerSupportReport({ context, companion, registry, fileSystem, live, roundTrip: (key) => statusBar.roundTrip(key) }));
  const mcp = registerMcpServerProvider(context, log);
  const ports = registerPorts({ companion, registry, resolveSandbox, log, state: context.workspaceState });
  context.subscriptions.push(...ports.disposables);
  // Not awaited: each forward waits for the companion server, which activation does not.
  void ports.forwards.restore().catch((err: unknown) => log.warn(`forwarding ports again after a reload: ${messageOf(err)}`));
  log.info('activated');
  return {
    companion,
    registry,
    fileSystem,
    tree,
    sessions,
    ...terminalApi(),
    statusBarText: () => statusBar.text,
    idleWarning: () => statusBar.idleWarning,
    operations,
    sandboxLogText: (key) => logChannels.text(key),
    search, // live getters: the setting registers and removes the providers while the window runs
    live,
    changes,
    mcp,
    ports: { forwards: ports.forwards, links: ports.links, tree: ports.tree },
  };
}

/**
 * What this window had before a reload: its sandbox folders made known to the registry (their phase drives
 * read-only), its Sandbox terminals reconnected; then host shells are guarded, closes reported, and an "open
 * sandbox" that a restart interrupted is finished (started, not awaited).
 */
async function restoreWindow(
  context: vscode.ExtensionContext,
  registry: SandboxRegistry,
  fileSystem: SandboxFileSystemProvider,
  terminals: TerminalFactoryDeps,
  log: vscode.LogOutputChannel,
): Promise<void> {
  const terminalRestore = new SandboxTerminalRestore(context.workspaceState, log);
  context.subscriptions.push(terminalRestore, new SandboxLifecycleNotices(registry, fileSystem));
  // Make sandbox folders of this workspace known to the registry (their phase drives read-only).
  await Promise.all(
    (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === SANDBOX_SCHEME).map((f) => refreshKey(registry, f.uri.authority)),
  );
  await terminalRestore.restore(registry, terminals);
  context.subscriptions.push(
    guardHostShells(() => {
      const key = readySandboxKey(registry);
      const connection = key ? registry.connection(key) : undefined;
      return connection ? vscode.window.createTerminal(sandboxTerminalOptions(connection, terminals)) : undefined;
    }, log),
  );
  // Not awaited: adding a folder back and revealing it read it through this extension's file system,
  // which VS Code serves only once activate() has returned — awaiting them here would never finish.
  // An open this window shows (now, or once its folders arrive) is finished here.
  const openFailed = (err: unknown) => log.warn(`finishing a pending open: ${messageOf(err)}`);
  void restoreLostSandboxFolders(log)
    .then(() => {
      const finishing = finishPendingOpenWhenShown(
        context.globalState,
        shownHere,
        vscode.workspace.onDidChangeWorkspaceFolders,
        (intent) => showOpenedSandbox(intent, registry, terminals, log),
        openFailed,
      );
      context.subscriptions.push(finishing);
    })
    .catch(openFailed);
}

/** On the companion server's start: the walkthrough's step completes, or the user is told in words why it did not start. */
function companionStartHooks(log: vscode.LogOutputChannel): CompanionStartHooks {
  return {
    onStarted: () => void vscode.commands.executeCommand('setContext', 'sandboxSessions.serverReady', true),
    onStartFailed: (message) => {
      log.error(`the companion server did not start: ${message}`);
      void vscode.window.showErrorMessage(`Sandbox Sessions cannot start its companion server: ${message}`, 'Show Logs').then((a) => a && log.show());
    },
  };
}

/** Show Sandbox Log and Refresh Operations. */
function registerLogCommands(resolveSandbox: SandboxResolver, logChannels: SandboxLogChannels, operations: OperationsTreeProvider): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand('sandboxSessions.showSandboxLog', async (target?: SandboxTarget) => {
      const sandbox = await resolveSandbox(target ?? activeSandboxKey(), undefined, 'Select a sandbox to show its log');
      if (sandbox) logChannels.show(sandbox.ref);
    }),
    vscode.commands.registerCommand('sandboxSessions.refreshOperations', () => {
      const key = operations.sandboxKey;
      operations.retarget(undefined);
      operations.retarget(key);
    }),
  ];
}

/** The Sandbox terminal profile: a terminal in the Ready sandbox of this window (or one picked). */
function registerTerminalProfile(registry: SandboxRegistry, terminals: TerminalFactoryDeps): vscode.Disposable[] {
  const profileTerminals = new WeakSet<vscode.Pseudoterminal>();
  return [
    vscode.window.registerTerminalProfileProvider('sandboxSessions.shell', {
      provideTerminalProfile: async () => {
        const key = readySandboxKey(registry) ?? (await pickReadySandbox(registry));
        const connection = key ? registry.connection(key) : undefined;
        if (!connection) throw new Error('Open a Ready sandbox first (Sandbox Sessions: Open Sandbox…).');
        const options = sandboxTerminalOptions(connection, terminals);
        profileTerminals.add(options.pty);
        return new vscode.TerminalProfile(options);
      },
    }),
    // VS Code may hide the panel while it waits for a profile's terminal (hideOnStartup), so show it once it opens.
    vscode.window.onDidOpenTerminal((t) => {
      const pty = (t.creationOptions as Partial<vscode.ExtensionTerminalOptions>).pty;
      if (pty && profileTerminals.delete(pty)) t.show();
    }),
  ];
}

/** Set Repository Password, and the offer to restart when a setting the companion server reads at start changes. */
function registerServerSettings(context: vscode.ExtensionContext): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand('sandboxSessions.setRepositoryPassword', async () => {
      const password = await vscode.window.showInputBox({ prompt: 'Password of the PostgreSQL session repository', password: true, ignoreFocusOut: true });
      if (password === undefined) return;
      await context.secrets.store(REPOSITORY_PASSWORD_SECRET, password);
      await offerRestart('The repository password was saved in secret storage.');
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      // Settings the companion server reads when it starts (see serverEnvironment).
      const serverSettings = ['repository', 'server.nodePath', 'activation.command', 'kubeconfig'];
      if (serverSettings.some((s) => e.affectsConfiguration(`sandboxSessions.${s}`))) {
        await offerRestart('Sandbox Sessions settings changed.');
      }
    }),
  ];
}

/** What the API tells of Sandbox terminals (line-based or interactive). */
function terminalApi(): Pick<SandboxSessionsApi, 'terminalTranscript' | 'terminalColumns'> {
  return {
    terminalTranscript: (terminal) => {
      const options = terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>;
      return options.pty instanceof SandboxPseudoterminal || options.pty instanceof InteractivePseudoterminal ? options.pty.transcript : undefined;
    },
    terminalColumns: (terminal) => {
      const options = terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>;
      return options.pty instanceof SandboxPseudoterminal ? options.pty.columns : undefined;
    },
  };
}

/** The companion server reads its settings at start; a reload of the window restarts it. */
async function offerRestart(reason: string): Promise<void> {
  const choice = await vscode.window.showInformationMessage(`${reason} Reload the window to restart the companion server with it.`, 'Reload Window');
  if (choice) await vscode.commands.executeCommand('workbench.action.reloadWindow');
}

async function refreshKey(registry: SandboxRegistry, key: string): Promise<void> {
  const ref = parseSandboxKey(key);
  if (ref) await registry.refresh(ref).catch(() => undefined);
}

/** The Ready sandbox a new terminal goes to without asking: the active editor's, else the only one of this window. */
function readySandboxKey(registry: SandboxRegistry): string | undefined {
  const active = activeSandboxKey();
  if (active && registry.summary(active)?.phase === 'Ready') return active;
  const ready = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === SANDBOX_SCHEME && registry.summary(f.uri.authority)?.phase === 'Ready');
  return ready.length === 1 ? ready[0]?.uri.authority : undefined;
}

/** A Ready sandbox for a new terminal: of this window's folders when it has any, else of all known ones. */
async function pickReadySandbox(registry: SandboxRegistry): Promise<string | undefined> {
  const folders = new Set((vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === SANDBOX_SCHEME).map((f) => f.uri.authority));
  const known = registry.all().filter((s) => s.phase === 'Ready');
  const mine = known.filter((s) => folders.has(s.key));
  const ready = mine.length > 0 ? mine : known;
  if (ready.length === 1) return ready[0]?.key;
  const picked = await vscode.window.showQuickPick(ready.map((s) => ({ label: s.ref.name, description: s.runtime, key: s.key })), {
    placeHolder: 'Sandbox for the terminal',
  });
  return picked?.key;
}

/** Whether this window shows the folder of the sandbox `key`. */
function shownHere(key: string): boolean {
  const uri = sandboxUri(key).toString();
  return (vscode.workspace.workspaceFolders ?? []).some((f) => f.uri.toString() === uri);
}

/** Finishes an open this window shows: the Explorer shows the folder, selected, and its terminal opens if asked. */
async function showOpenedSandbox(intent: PendingOpen, registry: SandboxRegistry, terminals: TerminalFactoryDeps, log: vscode.LogOutputChannel): Promise<void> {
  log.info(`finishing the open of ${intent.key}`);
  // Visibly done: the Explorer shows the folder, selected. When the folder has only just arrived, the Explorer may
  // still be setting its new roots, which drops a selection made meanwhile: its refresh, awaited, comes after that.
  await vscode.commands.executeCommand('workbench.view.explorer');
  await vscode.commands.executeCommand('workbench.files.action.refreshFilesExplorer');
  await vscode.commands.executeCommand('revealInExplorer', sandboxUri(intent.key));
  if (intent.openTerminal) {
    const connection = registry.connection(intent.key);
    if (connection) vscode.window.createTerminal(sandboxTerminalOptions(connection, terminals)).show();
  }
}

export function deactivate(): void {
  // Disposables in context.subscriptions stop the companion server; the local gateway daemon
  // and its sandboxes keep running for other windows.
}
