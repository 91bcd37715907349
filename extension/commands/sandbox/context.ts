// What every sandbox command gets (the extension context, companion, registry, Sandboxes view, log,
// terminals) and the small rules they share, so each command file under extension/commands/sandbox/ holds
// only its own steps.
import type * as vscode from 'vscode';
import type { CompanionClient } from '../../companion/companionClient';
import type { SandboxRegistry } from '../../sandboxes/registry';
import type { SandboxResolver } from '../../sandboxes/sandboxPicker';
import type { TerminalFactoryDeps } from '../../terminal/sandboxPseudoterminal';
import type { SandboxTreeProvider } from '../../views/sandboxTree';
import { withCancellableProgress } from '../progressNotification';

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

export interface SandboxCommandContext extends CommandDeps {
  resolve: SandboxResolver;
}

export const READ_ONLY_NOW = 'Its files are read-only now; open a new sandbox to keep working.';

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Work under a progress notification with Cancel that is gone before the caller shows the outcome. */
export const progress = withCancellableProgress;
