// Opening a machine-scoped setting (such as sandboxSessions.kubeconfig) where VS Code shows it.
// In a remote window — a browser-served VS Code (code-server), Remote-SSH, Dev Containers — a
// machine setting lives on the Settings editor's Remote tab; on the User tab it shows as
// "No Settings Found". So the link opens the Remote tab there, and the User tab on a local window.
import * as vscode from 'vscode';

export interface SettingLink {
  command: string;
  args: unknown[];
}

/** The command (and its argument) that opens the Settings editor on `settingId`, on the tab that has it. */
export function machineSettingLink(settingId: string, remoteName: string | undefined = vscode.env.remoteName): SettingLink {
  const query = { query: `@id:${settingId}` };
  return remoteName ? { command: 'workbench.action.openRemoteSettings', args: [query] } : { command: 'workbench.action.openSettings', args: [query] };
}
