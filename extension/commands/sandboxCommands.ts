// The sandbox commands of the palette, the Sandboxes view and the status bar: New Sandbox… (and
// New Sandbox Here on a namespace of the view), Open Sandbox (as a workspace folder or in a new window), Open Terminal (and Open
// Sandbox Terminal Here on a folder in the Explorer), Close Sandbox (Drain),
// Cancel Sandbox (Immediate), Delete, Download Artifacts… (and Open Artifact / Save Artifact… on a Drain report's rows), Grant to Agents / Revoke from Agents, Show Logs. Long work runs under
// withProgress with a working Cancel. Each command lives in its own file under commands/sandbox/; this registers them.
import * as vscode from 'vscode';
import { createSandboxResolver, type SandboxTarget } from '../sandboxes/sandboxPicker';
import { setAgentGrant } from './sandbox/agentGrant';
import type { CommandDeps, SandboxCommandContext } from './sandbox/context';
import { openArtifact, saveArtifact } from './sandbox/artifactActions';
import { downloadArtifacts } from './sandbox/downloadArtifacts';
import { newSandbox, newSandboxHere } from './sandbox/newSandbox';
import { openSandbox, openSandboxInNewWindow, openSandboxTerminal, openSandboxTerminalHere } from './sandbox/openSandbox';
import { deleteSandbox, sandboxActions } from './sandbox/sandboxActions';
import { terminate } from './sandbox/terminate';

export type { CommandDeps } from './sandbox/context';
export type { OpenOptions } from './sandbox/openSandbox';

export function registerSandboxCommands(deps: CommandDeps): vscode.Disposable[] {
  const ctx: SandboxCommandContext = { ...deps, resolve: createSandboxResolver(deps.companion, deps.registry) };
  /** Registers `command` with the context bound as its first argument. */
  const reg = <A extends unknown[]>(id: string, command: (ctx: SandboxCommandContext, ...args: A) => unknown) =>
    vscode.commands.registerCommand(id, (...args: unknown[]) => command(ctx, ...(args as A)));
  return [
    reg('sandboxSessions.newSandbox', newSandbox),
    reg('sandboxSessions.newSandboxHere', newSandboxHere),
    reg('sandboxSessions.openSandbox', openSandbox),
    reg('sandboxSessions.openSandboxInNewWindow', openSandboxInNewWindow),
    reg('sandboxSessions.openTerminal', openSandboxTerminal),
    reg('sandboxSessions.openTerminalHere', openSandboxTerminalHere),
    reg('sandboxSessions.closeSandbox', (c, target: SandboxTarget) => terminate(c, target, 'Drain')),
    reg('sandboxSessions.cancelSandbox', (c, target: SandboxTarget) => terminate(c, target, 'Immediate')),
    reg('sandboxSessions.deleteSandbox', deleteSandbox),
    reg('sandboxSessions.downloadArtifacts', downloadArtifacts),
    reg('sandboxSessions.openArtifact', openArtifact),
    reg('sandboxSessions.saveArtifact', saveArtifact),
    reg('sandboxSessions.grantToAgents', (c, target: SandboxTarget) => setAgentGrant(c, target, true)),
    reg('sandboxSessions.revokeFromAgents', (c, target: SandboxTarget) => setAgentGrant(c, target, false)),
    reg('sandboxSessions.refresh', () => deps.tree.refresh()),
    reg('sandboxSessions.showLogs', () => deps.log.show()),
    reg('sandboxSessions.sandboxActions', sandboxActions),
  ];
}
