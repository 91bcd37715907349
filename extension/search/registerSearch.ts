// Search in sandbox folders, wired at activation: VS Code's own Quick Open / Find in Files through the
// proposed search providers when this host enables them for us and the setting
// `sandboxSessions.search.quickOpenAndFindInFiles` is on (registered and unregistered as it changes), and
// always the two fallback commands (with a one-time word on why they are needed when the providers are not).
import * as vscode from 'vscode';
import type { CompanionClient } from '../companion/companionClient';
import { proposedSearchApi } from './proposedSearchApi';
import { explainFallbackOnce, registerSearchCommands, type SearchUnavailable } from './searchCommands';
import { registerSearchProviders } from './searchProviders';

/** Off: Quick Open and Find in Files do not search sandbox folders (the providers are not registered). */
export const BUILT_IN_SEARCH_SETTING = 'sandboxSessions.search.quickOpenAndFindInFiles';

export interface SandboxSearch {
  /** Whether Quick Open and Find in Files search sandbox folders (the proposed providers are registered) now. */
  readonly providersRegistered: boolean;
  /** Why not, when they are not. */
  readonly unavailableReason: string | undefined;
  readonly disposables: vscode.Disposable[];
}

/** Why the providers are off when the setting says so, and how to turn them on. */
const SETTING_OFF: SearchUnavailable = {
  why: `the setting "${BUILT_IN_SEARCH_SETTING}" is off`,
  howToEnable: 'turn that setting on (Settings › Extensions › Sandbox Sessions; no reload needed)',
};

/** Registers the proposed providers, or says why they cannot be. */
function registerProviders(companion: CompanionClient, log: vscode.LogOutputChannel): { providers: vscode.Disposable[] } | SearchUnavailable {
  const found = proposedSearchApi();
  const howToEnable = 'start VS Code / code-server with --enable-proposed-api sandbox-sessions.sandbox-sessions (npm start does)';
  const why = (detail: string) => `VS Code lets an extension search its own file system only through a proposed API (${detail})`;
  if (!('api' in found)) return { why: why(found.reason), howToEnable };
  try {
    return { providers: registerSearchProviders(found.api, companion, log) };
  } catch (err) {
    // The host has the API but did not enable the proposals for this extension.
    return { why: why(err instanceof Error ? err.message : String(err)), howToEnable };
  }
}

export function registerSandboxSearch(deps: {
  companion: CompanionClient;
  onDidChangeFile: vscode.Event<vscode.FileChangeEvent[]>;
  globalState: vscode.Memento;
  log: vscode.LogOutputChannel;
}): SandboxSearch {
  const disposables = registerSearchCommands(deps);
  let providers: vscode.Disposable[] = [];
  let unavailable: SearchUnavailable | undefined;

  const apply = (): void => {
    const wanted = vscode.workspace.getConfiguration().get<boolean>(BUILT_IN_SEARCH_SETTING, true) !== false;
    if (wanted && providers.length > 0) return;
    for (const d of providers.splice(0)) d.dispose();
    const registered = wanted ? registerProviders(deps.companion, deps.log) : SETTING_OFF;
    if ('providers' in registered) {
      providers = registered.providers;
      unavailable = undefined;
      deps.log.info('Quick Open and Find in Files search sandbox folders (proposed search providers registered)');
      return;
    }
    unavailable = registered;
    deps.log.info(`sandbox folders are searched with Go to File in Sandbox… / Find in Sandbox… only: ${registered.why}`);
    void explainFallbackOnce(deps.globalState, registered);
  };

  apply();
  disposables.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(BUILT_IN_SEARCH_SETTING)) apply();
    }),
    // The notice waits for a sandbox folder in this window.
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      if (unavailable) void explainFallbackOnce(deps.globalState, unavailable);
    }),
    { dispose: () => providers.splice(0).forEach((d) => d.dispose()) },
  );
  return {
    get providersRegistered() {
      return unavailable === undefined;
    },
    get unavailableReason() {
      return unavailable?.why;
    },
    disposables,
  };
}
