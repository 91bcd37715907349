// The VS Code extension's entry point: starts the companion server, registers the `sandbox:`
// file system, the Sandboxes view, the status bar, the Sandbox terminal profile and `sandbox`
// tasks, and the commands; then finishes an "open sandbox" that a restart interrupted.
import './zodSetup';
import * as vscode from 'vscode';
import { parseSandboxKey } from '../protocol/sandboxes';
import { CompanionClient, REPOSITORY_PASSWORD_SECRET } from './companion/companionClient';
import { registerSandboxCommands } from './commands/sandboxCommands';
import { registerSessionCommands } from './commands/sessionCommands';
import { REVISION_SCHEME, RevisionFileSystemProvider } from './fs/revisionFileSystemProvider';
import { SANDBOX_SCHEME, SandboxFileSystemProvider, sandboxUri } from './fs/sandboxFileSystemProvider';
import { activeSandboxKey } from './sandboxes/activeSandbox';
import { takePendingOpen } from './sandboxes/pendingOpen';
import { SandboxRegistry } from './sandboxes/registry';
import { SandboxUsage } from './sandboxes/sandboxUsage';
import { SandboxPseudoterminal, sandboxTerminalOptions, SandboxTaskTerminal, type TerminalFactoryDeps } from './terminal/sandboxPseudoterminal';
import { SandboxStatusBar } from './views/statusBar';
import { SandboxTreeProvider } from './views/sandboxTree';
import { SessionTreeProvider } from './views/sessionTree';

/** What the extension exposes to other extensions and to its integration tests. */
export interface SandboxSessionsApi {
  companion: CompanionClient;
  registry: SandboxRegistry;
  fileSystem: SandboxFileSystemProvider;
  tree: SandboxTreeProvider;
  sessions: SessionTreeProvider;
  /** What a Sandbox terminal has shown (last 64 KiB), or undefined for other terminals. */
  terminalTranscript(terminal: vscode.Terminal): string | undefined;
}

export async function activate(context: vscode.ExtensionContext): Promise<SandboxSessionsApi | undefined> {
  const log = vscode.window.createOutputChannel('Sandbox Sessions', { log: true });
  context.subscriptions.push(log);
  log.info(`Sandbox Sessions ${String(context.extension.packageJSON.version)} activating`);

  let companion: CompanionClient;
  try {
    companion = await CompanionClient.start(context, log);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log.error(`the companion server did not start: ${message}`);
    void vscode.window.showErrorMessage(`Sandbox Sessions cannot start its companion server: ${message}`, 'Show Logs').then((a) => a && log.show());
    return undefined;
  }
  context.subscriptions.push(companion);
  void vscode.commands.executeCommand('setContext', 'sandboxSessions.serverReady', true);

  const registry = new SandboxRegistry(companion);
  const fileSystem = new SandboxFileSystemProvider(registry);
  const tree = new SandboxTreeProvider(companion, registry);
  const sessions = new SessionTreeProvider(companion);
  const terminals: TerminalFactoryDeps = {
    globalState: context.globalState,
    onCommandFinished: (key, cwd) => fileSystem.commandRanIn(key, cwd),
  };
  context.subscriptions.push(
    registry,
    fileSystem,
    tree,
    vscode.workspace.registerFileSystemProvider(SANDBOX_SCHEME, fileSystem, { isCaseSensitive: true }),
    vscode.workspace.registerFileSystemProvider(REVISION_SCHEME, new RevisionFileSystemProvider(companion), { isCaseSensitive: true, isReadonly: true }),
    vscode.window.registerTreeDataProvider('sandboxSessions.sandboxes', tree),
    sessions,
    vscode.window.registerTreeDataProvider('sandboxSessions.sessions', sessions),
    new SandboxStatusBar(registry),
    new SandboxUsage(registry, log),
    ...registerSandboxCommands({ context, companion, registry, tree, log, terminals }),
    ...registerSessionCommands({ companion, registry, sessions, log }),
    vscode.window.registerTerminalProfileProvider('sandboxSessions.shell', {
      provideTerminalProfile: async () => {
        const key = activeSandboxKey() ?? (await pickReadySandbox(registry));
        const connection = key ? registry.connection(key) : undefined;
        if (!connection) throw new Error('Open a Ready sandbox first (Sandbox Sessions: Open Sandbox…).');
        return new vscode.TerminalProfile(sandboxTerminalOptions(connection, terminals));
      },
    }),
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
    vscode.tasks.registerTaskProvider('sandbox', {
      provideTasks: () => [],
      resolveTask: (task) => resolveSandboxTask(task, registry, terminals),
    }),
  );
  // Make sandbox folders of this workspace known to the registry (their phase drives read-only).
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    if (folder.uri.scheme === SANDBOX_SCHEME) void refreshKey(registry, folder.uri.authority);
  }
  await finishPendingOpen(context, registry, terminals, log);
  log.info('activated');
  return {
    companion,
    registry,
    fileSystem,
    tree,
    sessions,
    terminalTranscript: (terminal) => {
      const options = terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>;
      return options.pty instanceof SandboxPseudoterminal ? options.pty.transcript : undefined;
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

async function pickReadySandbox(registry: SandboxRegistry): Promise<string | undefined> {
  const ready = registry.all().filter((s) => s.phase === 'Ready');
  if (ready.length === 1) return ready[0]?.key;
  const picked = await vscode.window.showQuickPick(ready.map((s) => ({ label: s.ref.name, description: s.runtime, key: s.key })), {
    placeHolder: 'Sandbox for the terminal',
  });
  return picked?.key;
}

function resolveSandboxTask(task: vscode.Task, registry: SandboxRegistry, terminals: TerminalFactoryDeps): vscode.Task | undefined {
  const definition = task.definition as { type: 'sandbox'; command?: unknown; sandbox?: unknown; cwd?: unknown };
  if (typeof definition.command !== 'string') return undefined;
  const command = definition.command;
  const cwd = typeof definition.cwd === 'string' ? definition.cwd : undefined;
  const resolved = new vscode.Task(
    definition,
    task.scope ?? vscode.TaskScope.Workspace,
    task.name,
    'sandbox',
    new vscode.CustomExecution(async () => {
      const key = typeof definition.sandbox === 'string' ? definition.sandbox : activeSandboxKey();
      const connection = key ? registry.connection(key) : undefined;
      if (!connection) throw new Error('The task names no sandbox and no sandbox folder is open.');
      return new SandboxTaskTerminal(connection, command, cwd, (dir) => terminals.onCommandFinished(connection.key, dir));
    }),
  );
  return resolved;
}

async function finishPendingOpen(
  context: vscode.ExtensionContext,
  registry: SandboxRegistry,
  terminals: TerminalFactoryDeps,
  log: vscode.LogOutputChannel,
): Promise<void> {
  const intent = await takePendingOpen(context.globalState);
  if (!intent) return;
  const uri = sandboxUri(intent.key).toString();
  if (!(vscode.workspace.workspaceFolders ?? []).some((f) => f.uri.toString() === uri)) return;
  log.info(`finishing the interrupted open of ${intent.key}`);
  await vscode.commands.executeCommand('workbench.view.explorer');
  if (intent.openTerminal) {
    const connection = registry.connection(intent.key);
    if (connection) vscode.window.createTerminal(sandboxTerminalOptions(connection, terminals)).show();
  }
}

export function deactivate(): void {
  // Disposables in context.subscriptions stop the companion server; the local gateway daemon
  // and its sandboxes keep running for other windows.
}
