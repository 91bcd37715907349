// Inspect Bundle… and Hydrate Bundle to Folder…: a bundle file on this machine checked (a report in an
// editor) or unpacked into a new folder.
import path from 'node:path';
import * as vscode from 'vscode';
import { CompanionRequestError } from '../../companion/companionClient';
import { type SessionContext, cancelled, message, withProgress } from './context';
import { pickBundle } from './picks';

export async function inspectBundle(ctx: SessionContext, uri?: vscode.Uri, options: { show?: boolean } = {}) {
  const { companion } = ctx;
  const file = await pickBundle(uri);
  if (!file) return undefined;
  let report: string;
  let result: Awaited<ReturnType<typeof companion.request<'bundles/inspect'>>> | undefined;
  try {
    result = await withProgress(`Inspecting ${path.basename(file)}`, (_report, token) => companion.request('bundles/inspect', { path: file }, { token }));
    const m = result.manifest;
    report = [
      `# ${path.basename(file)} — valid Session Bundle v1`,
      '',
      `| | |`,
      `|---|---|`,
      `| session | \`${m.envelope.sessionId}\` |`,
      `| last activation | ${m.envelope.lastCommittedActivationId ? `\`${m.envelope.lastCommittedActivationId}\`` : '—'} |`,
      `| state identity | \`${m.stateIdentity.mediaType}\` |`,
      `| entries | ${result.entryCount} |`,
      `| payload | ${result.payloadBytes} bytes |`,
      `| tar | ${result.decompressedTarBytes} bytes |`,
      `| archive | ${result.compressedBytes} bytes |`,
      `| archive digest | \`${result.archiveDigest}\` |`,
      `| tree digest | \`${m.payload.treeDigest}\` |`,
      '',
    ].join('\n');
  } catch (err) {
    if (cancelled(err)) return undefined;
    const code = err instanceof CompanionRequestError ? (err.causeCode ?? err.code) : 'error';
    report = `# ${path.basename(file)} — rejected\n\n\`${code}\`: ${message(err)}\n`;
  }
  if (options.show !== false) {
    const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: report });
    await vscode.window.showTextDocument(doc, { preview: true });
  }
  return { report, result };
}

export async function hydrateBundle(ctx: SessionContext, uri?: vscode.Uri, destination?: string) {
  const { companion } = ctx;
  const file = await pickBundle(uri);
  if (!file) return undefined;
  try {
    const inspection = await companion.request('bundles/inspect', { path: file });
    let dest = destination;
    if (!dest) {
      const parent = await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Hydrate Into This Folder' });
      if (!parent?.[0]) return undefined;
      dest = path.join(parent[0].fsPath, path.basename(file).replace(/\.tar\.zst$|\.zst$/, '') || 'hydrated');
    }
    const target = dest;
    const result = await withProgress(`Hydrating ${path.basename(file)}`, (_report, token) =>
      companion.request('bundles/hydrate', { path: file, sessionId: inspection.manifest.envelope.sessionId, destination: target }, { token }),
    );
    if (!destination) {
      const open = await vscode.window.showInformationMessage(`Hydrated into ${result.destinationRoot}.`, 'Open Workspace Folder');
      if (open) await vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(result.workspaceRoot), { forceNewWindow: true });
    }
    return result;
  } catch (err) {
    if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not hydrate ${path.basename(file)}: ${message(err)}`);
    return undefined;
  }
}
