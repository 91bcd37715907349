// In a window whose folders are all sandboxes, a new terminal is a Sandbox shell (the workspace
// file sets it as the default profile), as a Remote-SSH window's terminals are remote shells. VS
// Code 1.139 does not always honour an extension's profile as the default (on the first load of
// a workspace its "new terminal" may still start the host's shell), so this guard replaces a host
// shell that nobody named — the default profile's — with a Sandbox shell in the same place, and
// says so in the log. A host shell chosen on purpose ("bash (host)" from the + menu) carries its
// name and is left alone, as are other extensions' terminals and tasks.
import * as vscode from 'vscode';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';

export function sandboxOnlyWindow(): boolean {
  const folders = vscode.workspace.workspaceFolders ?? [];
  return folders.length > 0 && folders.every((f) => f.uri.scheme === SANDBOX_SCHEME);
}

/** A terminal VS Code started with the host's default shell, unnamed (not a chosen profile, not an extension's). */
export function isUnnamedHostShell(terminal: vscode.Terminal): boolean {
  const options = terminal.creationOptions as vscode.TerminalOptions & Partial<vscode.ExtensionTerminalOptions>;
  return options.pty === undefined && !options.name && !options.shellPath;
}

export function guardHostShells(openSandboxShell: () => vscode.Terminal | undefined, log: vscode.LogOutputChannel): vscode.Disposable {
  const replace = (terminal: vscode.Terminal) => {
    if (!sandboxOnlyWindow() || !isUnnamedHostShell(terminal)) return;
    const replacement = openSandboxShell();
    if (!replacement) return; // no Ready sandbox: leave the shell rather than leave nothing
    log.info('a terminal of this machine opened in a sandbox window without being asked for: replaced by a Sandbox shell');
    terminal.dispose();
    replacement.show();
  };
  for (const t of vscode.window.terminals) replace(t);
  return vscode.window.onDidOpenTerminal(replace);
}
