// What a person can do with a command row of the Operations view when the command ran from this
// window (WindowCommands knows its text and output; runtimed's log does not): Re-run Command sends
// the same line to an idle Sandbox terminal of that sandbox at the same working directory (a new
// one when there is none), and Open Command Output shows what it printed in a read-only editor
// (a `sandbox-output:` document, served from memory).
import * as vscode from 'vscode';
import { messageOf } from '../sandboxes/errorText';
import { commandOutputText, type WindowCommand, type WindowCommands } from '../sandboxes/windowCommands';
import type { SandboxRegistry } from '../sandboxes/registry';
import { SandboxPseudoterminal, sandboxTerminalOptions, type TerminalFactoryDeps } from '../terminal/sandboxPseudoterminal';
import type { OperationsNode, OperationsTreeProvider } from './operationsTree';

export const OUTPUT_SCHEME = 'sandbox-output';

/** The document of a command's output: `sandbox-output:/<sandbox name> <operation id>.log?<operation id>`. */
export function outputUri(c: WindowCommand): vscode.Uri {
  const name = c.sandboxKey.split('/').pop() ?? 'sandbox';
  return vscode.Uri.from({ scheme: OUTPUT_SCHEME, path: `/${name} ${c.operationId}.log`, query: c.operationId });
}

export function registerOperationActions(deps: {
  operations: OperationsTreeProvider;
  commands: WindowCommands;
  registry: SandboxRegistry;
  terminals: TerminalFactoryDeps;
}): vscode.Disposable[] {
  const { operations, commands } = deps;
  const commandOf = (node: OperationsNode | undefined): WindowCommand | undefined => {
    const c = node ? operations.windowCommand(node) : undefined;
    if (!c) void vscode.window.showInformationMessage('Only commands run from this window’s Sandbox terminals and tasks can be re-run or opened: the sandbox log holds no command text or output.');
    return c;
  };
  return [
    vscode.workspace.registerTextDocumentContentProvider(OUTPUT_SCHEME, {
      provideTextDocumentContent: (uri) => {
        const c = commands.byOperationId(uri.query);
        return c ? commandOutputText(c) : 'This command’s output is no longer kept (this window keeps the last 200 commands).\n';
      },
    }),
    vscode.commands.registerCommand('sandboxSessions.openOperationOutput', async (node?: OperationsNode) => {
      const c = commandOf(node);
      if (!c) return undefined;
      const doc = await vscode.workspace.openTextDocument(outputUri(c));
      return vscode.window.showTextDocument(doc, { preview: true });
    }),
    vscode.commands.registerCommand('sandboxSessions.rerunOperation', (node?: OperationsNode) => {
      const c = commandOf(node);
      if (!c) return undefined;
      const idle = vscode.window.terminals.find((t) => {
        const pty = (t.creationOptions as Partial<vscode.ExtensionTerminalOptions>).pty;
        return pty instanceof SandboxPseudoterminal && pty.key === c.sandboxKey && !pty.session.busy && pty.session.workingDirectory === c.cwd;
      });
      let terminal = idle;
      if (!terminal) {
        const connection = deps.registry.connection(c.sandboxKey);
        if (!connection) {
          void vscode.window.showErrorMessage(`Cannot re-run the command: ${c.sandboxKey} is not open in this window.`);
          return undefined;
        }
        try {
          terminal = vscode.window.createTerminal(sandboxTerminalOptions(connection, deps.terminals, c.cwd));
        } catch (err) {
          void vscode.window.showErrorMessage(`Cannot open a Sandbox terminal: ${messageOf(err)}`);
          return undefined;
        }
      }
      terminal.show();
      // A new terminal buffers the line until its prompt is up (TerminalSession takes pending input).
      terminal.sendText(c.command, true);
      return terminal;
    }),
  ];
}
