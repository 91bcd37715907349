// Download Artifacts…: a closed sandbox's exported artifacts into a local folder, each checked against its digest.
import path from 'node:path';
import * as vscode from 'vscode';
import { CompanionRequestError } from '../../companion/companionClient';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { type SandboxCommandContext, errorText, progress } from './context';
import { pickDownloadFolder } from './pickFolder';

export async function downloadArtifacts(ctx: SandboxCommandContext, target: SandboxTarget, destination?: string) {
  const { companion, log, resolve } = ctx;
  const s = await resolve(target, ['Succeeded'], 'Select a closed sandbox to download its artifacts');
  if (!s) return;
  if (!s.artifacts?.length) {
    void vscode.window.showInformationMessage(`${s.ref.name} has no artifacts (they are exported by Close Sandbox (Drain)).`);
    return;
  }
  let dest = destination;
  if (!dest) {
    const folder = await pickDownloadFolder('Download Here');
    if (folder === undefined) return;
    dest = path.join(folder, s.ref.name);
  }
  try {
    const { artifacts } = await progress(`Downloading artifacts of ${s.ref.name}`, (report, token) =>
      companion.request('sandboxes/artifacts/download', { ref: s.ref, destination: dest, unpack: true }, { token, onProgress: (v) => v.message && report(v.message) }),
    );
    log.info(`downloaded ${artifacts.length} artifact(s) of ${s.key} to ${dest}`);
    if (!destination) {
      const reveal = await vscode.window.showInformationMessage(`Downloaded ${artifacts.length} verified artifact(s) to ${dest}.`, 'Reveal');
      if (reveal) await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(dest));
    }
    return artifacts;
  } catch (err) {
    if (err instanceof CompanionRequestError && err.code === 'cancelled') return;
    void vscode.window.showErrorMessage(`Could not download the artifacts of ${s.ref.name}: ${errorText(err)}`);
    return;
  }
}
