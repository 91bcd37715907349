// Grant to Agents / Revoke from Agents: whether the MCP server may use a sandbox.
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { type SandboxCommandContext, errorText } from './context';

/** Grant to Agents / Revoke from Agents: the label the MCP server reads on every call (protocol/agentAccess.ts). */
export async function setAgentGrant(ctx: SandboxCommandContext, target: SandboxTarget, granted: boolean): Promise<SandboxSummary | undefined> {
  const { companion, registry, log, resolve } = ctx;
  const s = await resolve(
    target,
    granted ? ['Ready', 'Pending', 'Scheduled', 'Running'] : undefined,
    granted ? 'Select a sandbox to grant to agents' : 'Select a sandbox to revoke from agents',
  );
  if (!s) return;
  try {
    const { sandbox } = await companion.request('sandboxes/grantAgents', { ref: s.ref, granted });
    registry.fireChanged(sandbox);
    log.info(`${granted ? 'granted' : 'revoked'} agents' use of ${sandbox.key}`);
    const noIsolation = granted && sandbox.ref.provider === 'local' && sandbox.runtime === 'process';
    void vscode.window.showInformationMessage(
      granted
        ? `Agents may now use ${s.ref.name}: the Sandbox Sessions MCP server can run commands and change files in it.` +
            (noIsolation ? ' It runs on the "process" backend (no isolation), which agents may use only with the setting sandboxSessions.mcp.allowProcessBackend.' : '')
        : `Agents may no longer use ${s.ref.name} (from their next call on), unless an agent created it in a server that still runs.`,
    );
    return sandbox;
  } catch (err) {
    void vscode.window.showErrorMessage(`Could not ${granted ? 'grant' : 'revoke'} ${s.ref.name} ${granted ? 'to' : 'from'} agents: ${errorText(err)}`);
    return;
  }
}
