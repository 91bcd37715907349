// The VS Code extension's entry point. It opens the "Sandbox Sessions" log; the sandbox
// views, file system and terminal are registered here as they land.
import * as vscode from 'vscode';

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Sandbox Sessions', { log: true });
  context.subscriptions.push(log);
  log.info(`Sandbox Sessions ${String(context.extension.packageJSON.version)} activated`);
}

export function deactivate(): void {
  // Nothing to release beyond context.subscriptions.
}
