// Browse Revision (read-only, in a new window) and Compare with Revision…: a retained revision's files next
// to a live sandbox's.
import * as vscode from 'vscode';
import { parseRevisionAuthority, REVISION_SCHEME, revisionUri } from '../../fs/revisionFileSystemProvider';
import { SANDBOX_SCHEME } from '../../fs/sandboxFileSystemProvider';
import { writeRevisionWorkspaceFile } from '../../sandboxes/workspaceFile';
import type { SessionTreeNode } from '../../views/sessionTree';
import type { SessionContext, RevisionTarget } from './context';
import { pickRevision } from './picks';

/**
 * Opens a revision read-only (its workspace/ folder) in a new window, through a workspace file
 * that names it `<session> @ <revision> (read-only)`. Resolves to that workspace file.
 */
export async function browseRevision(ctx: SessionContext, target: RevisionTarget, options: { open?: boolean } = {}) {
  const picked = await pickRevision(ctx, target);
  if (!picked?.revision) return undefined;
  const uri = revisionUri(picked.sessionId, picked.revision, 'workspace');
  const file = await writeRevisionWorkspaceFile(ctx.storage, uri, picked.sessionId, picked.revision);
  if (options.open !== false) await vscode.commands.executeCommand('vscode.openFolder', file, { forceNewWindow: true });
  return file;
}

/**
 * Compares a file with the same path in a retained revision: the file of the active editor
 * (a live sandbox or another revision) on the right, the revision on the left.
 */
export async function compareWithRevision(ctx: SessionContext, target?: vscode.Uri | SessionTreeNode, against?: { sessionId: string; revision: string }) {
  // From a revision's context menu the argument is that revision: the active editor's file is compared with it.
  const node = target && !(target instanceof vscode.Uri) && target.kind === 'revision' ? target : undefined;
  const uri = target instanceof vscode.Uri ? target : vscode.window.activeTextEditor?.document.uri;
  if (!uri || (uri.scheme !== SANDBOX_SCHEME && uri.scheme !== REVISION_SCHEME)) {
    void vscode.window.showInformationMessage(
      node
        ? `Open a file of a sandbox or a revision, then choose Compare with Revision… on ${node.revision.ref.sessionId}@${node.revision.ref.revision} again.`
        : 'Open a file of a sandbox or a revision first.',
    );
    return undefined;
  }
  if (node) against = { sessionId: node.revision.ref.sessionId, revision: node.revision.ref.revision };
  // A sandbox path is a workspace path; a revision path already starts at the payload root.
  const rel = uri.scheme === SANDBOX_SCHEME ? `workspace/${uri.path.replace(/^\/+/, '')}` : uri.path.replace(/^\/+/, '');
  // From the explorer the second argument is the selection (an array): only a {sessionId, revision} counts.
  const given = against && typeof against === 'object' && !Array.isArray(against) && typeof against.revision === 'string' ? against : undefined;
  const other = given ?? (await pickRevision(ctx, undefined));
  if (!other?.revision) return undefined;
  const left = revisionUri(other.sessionId, other.revision, rel);
  const from = uri.scheme === REVISION_SCHEME ? parseRevisionAuthority(uri.authority) : undefined;
  const title = `${rel.replace(/^workspace\//, '')} (${other.sessionId}@${other.revision} ↔ ${from ? `${from.sessionId}@${from.revision}` : 'sandbox'})`;
  await vscode.commands.executeCommand('vscode.diff', left, uri, title);
  return { left, right: uri };
}
