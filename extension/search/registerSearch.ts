// Search in sandbox folders, wired once at activation: VS Code's own Quick Open / Find in Files
// through the proposed search providers when this host enables them for us, and always the two
// fallback commands (with a one-time word on why they are needed when the providers are not).
import * as vscode from 'vscode';
import type { CompanionClient } from '../companion/companionClient';
import { proposedSearchApi } from './proposedSearchApi';
import { explainFallbackOnce, registerSearchCommands } from './searchCommands';
import { registerSearchProviders } from './searchProviders';

export interface SandboxSearch {
  /** Whether Quick Open and Find in Files search sandbox folders (the proposed providers are registered). */
  readonly providersRegistered: boolean;
  /** Why not, when they are not. */
  readonly unavailableReason: string | undefined;
  readonly disposables: vscode.Disposable[];
}

export function registerSandboxSearch(deps: {
  companion: CompanionClient;
  onDidChangeFile: vscode.Event<vscode.FileChangeEvent[]>;
  globalState: vscode.Memento;
  log: vscode.LogOutputChannel;
}): SandboxSearch {
  const disposables = registerSearchCommands(deps);
  const found = proposedSearchApi();
  let reason: string | undefined;
  if ('api' in found) {
    try {
      disposables.push(...registerSearchProviders(found.api, deps.companion, deps.log));
    } catch (err) {
      // The host has the API but did not enable the proposals for this extension.
      reason = err instanceof Error ? err.message : String(err);
    }
  } else {
    reason = found.reason;
  }
  if (reason === undefined) {
    deps.log.info('Quick Open and Find in Files search sandbox folders (proposed search providers registered)');
  } else {
    deps.log.info(`sandbox folders are searched with Go to File in Sandbox… / Find in Sandbox… only: ${reason}`);
    const r = reason;
    void explainFallbackOnce(deps.globalState, r);
    disposables.push(vscode.workspace.onDidChangeWorkspaceFolders(() => void explainFallbackOnce(deps.globalState, r)));
  }
  return { providersRegistered: reason === undefined, unavailableReason: reason, disposables };
}
