// The rows of a Drain report (the artifacts under a closed sandbox in the Sandboxes view): Open Artifact opens a file
// artifact in an editor, Save Artifact… keeps any one of them in a folder — each downloaded through the companion and
// verified against its sha256 before anyone sees a byte (Download Artifacts… does all of them at once).
import fs from 'node:fs/promises';
import path from 'node:path';
import * as vscode from 'vscode';
import type { DownloadedArtifact } from '../../../protocol/sandboxes';
import { CompanionRequestError } from '../../companion/companionClient';
import { isSandboxTreeNode, type SandboxTreeNode } from '../../views/sandboxTree';
import { type SandboxCommandContext, errorText, progress } from './context';
import { pickDownloadFolder } from './pickFolder';

type ArtifactNode = Extract<SandboxTreeNode, { kind: 'artifact' }>;

function artifactNode(target: unknown): ArtifactNode | undefined {
  return isSandboxTreeNode(target) && target.kind === 'artifact' ? target : undefined;
}

/** Downloads one artifact of the node's sandbox into `destination`, verified; undefined when cancelled or failed (said). */
async function downloadOne(ctx: SandboxCommandContext, node: ArtifactNode, destination: string, unpack: boolean): Promise<DownloadedArtifact | undefined> {
  const { sandbox, artifact } = node;
  try {
    const { artifacts } = await progress(`Downloading ${artifact.name} from ${sandbox.ref.name}`, (report, token) =>
      ctx.companion.request('sandboxes/artifacts/download', { ref: sandbox.ref, destination, names: [artifact.name], unpack }, { token, onProgress: (v) => v.message && report(v.message) }),
    );
    return artifacts.find((a) => a.name === artifact.name);
  } catch (err) {
    if (!(err instanceof CompanionRequestError && err.code === 'cancelled')) void vscode.window.showErrorMessage(`Could not download ${artifact.name} of ${sandbox.ref.name}: ${errorText(err)}`);
    return undefined;
  }
}

/** Open Artifact: a file artifact, downloaded (verified) into this extension's storage and opened; resolves to its path. */
export async function openArtifact(ctx: SandboxCommandContext, target: unknown): Promise<string | undefined> {
  const node = artifactNode(target);
  if (!node || node.artifact.type !== 'file') return undefined;
  // One folder per artifact digest: the same bytes are not downloaded twice, other bytes never mixed in.
  const folder = path.join(ctx.context.globalStorageUri.fsPath, 'artifacts', node.sandbox.key, node.artifact.digest.slice('sha256:'.length, 'sha256:'.length + 16));
  const file = path.join(folder, node.artifact.name);
  const kept = await fs.stat(file).catch(() => undefined);
  if (kept?.size !== node.artifact.sizeBytes) {
    await fs.rm(folder, { recursive: true, force: true });
    await fs.mkdir(path.dirname(folder), { recursive: true, mode: 0o700 });
    if (!(await downloadOne(ctx, node, folder, false))) return undefined;
  }
  await vscode.commands.executeCommand('vscode.open', vscode.Uri.file(file));
  return file;
}

/** Save Artifact…: one artifact into a chosen folder (under the sandbox's name), verified; a folder artifact unpacked. */
export async function saveArtifact(ctx: SandboxCommandContext, target: unknown, destination?: string): Promise<DownloadedArtifact | undefined> {
  const node = artifactNode(target);
  if (!node) return undefined;
  let dest = destination;
  if (!dest) {
    const folder = await pickDownloadFolder('Save Here');
    if (folder === undefined) return undefined;
    dest = path.join(folder, node.sandbox.ref.name);
  }
  const saved = await downloadOne(ctx, node, dest, true);
  if (saved && !destination) void vscode.window.showInformationMessage(`Saved ${node.artifact.name} (verified against its sha256) to ${saved.unpackedTo ?? saved.path}.`);
  return saved;
}
