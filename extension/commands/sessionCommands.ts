// Session commands: Save Sandbox as Session Revision (exclusions listed, a secret file named and
// refused), Open Revision in New Sandbox, Export Revision as Bundle…, Import Bundle as Session Revision…, Inspect Bundle…, Hydrate
// Bundle to Folder…, Fork Session…, Run Activation…, Browse and Compare with Revision, Compare
// Sandbox with Revision…. Each runs under withProgress with Cancel and refreshes the Sessions view; each lives in its own file under
// commands/session/, and this registers them.
import * as vscode from 'vscode';
import { createSandboxResolver } from '../sandboxes/sandboxPicker';
import { hydrateBundle, inspectBundle } from './session/bundles';
import { browseRevision, compareWithRevision } from './session/browseRevision';
import { compareSandbox, compareSandboxSinceOpened } from './session/compareSandbox';
import type { SessionCommandDeps, SessionContext } from './session/context';
import { exportRevision } from './session/exportRevision';
import { forkSession } from './session/forkSession';
import { importBundle } from './session/importBundle';
import { openRevision } from './session/openRevision';
import { runActivation } from './session/runActivation';
import { saveSandbox } from './session/saveSandbox';

export type { SessionCommandDeps } from './session/context';

export function registerSessionCommands(deps: SessionCommandDeps): vscode.Disposable[] {
  const activationLog = vscode.window.createOutputChannel('Sandbox Sessions: Activations');
  const ctx: SessionContext = { ...deps, resolveSandbox: createSandboxResolver(deps.companion, deps.registry), activationLog };
  /** Registers `command` with the context bound as its first argument. */
  const reg = <A extends unknown[]>(id: string, command: (ctx: SessionContext, ...args: A) => unknown) =>
    vscode.commands.registerCommand(id, (...args: unknown[]) => command(ctx, ...(args as A)));
  return [
    reg('sandboxSessions.browseRevision', browseRevision),
    reg('sandboxSessions.compareWithRevision', compareWithRevision),
    reg('sandboxSessions.compareSandboxWithRevision', compareSandbox),
    reg('sandboxSessions.compareSandboxSinceOpened', compareSandboxSinceOpened),
    activationLog,
    reg('sandboxSessions.forkSession', forkSession),
    reg('sandboxSessions.runActivation', runActivation),
    reg('sandboxSessions.saveSandboxAsRevision', saveSandbox),
    reg('sandboxSessions.openRevisionInSandbox', openRevision),
    reg('sandboxSessions.exportRevision', exportRevision),
    reg('sandboxSessions.importBundle', importBundle),
    reg('sandboxSessions.inspectBundle', inspectBundle),
    reg('sandboxSessions.hydrateBundle', hydrateBundle),
    vscode.commands.registerCommand('sandboxSessions.refreshSessions', () => deps.sessions.refresh()),
  ];
}
