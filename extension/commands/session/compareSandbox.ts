// Compare Sandbox with Revision…: chooses the revision a sandbox's changes are shown against (its baseline). The
// Source Control view then lists what a save on that revision would change, and editors mark the changed lines.
// Compare Sandbox Since Opened: back to the sandbox's opening snapshot, for a sandbox made from an image.
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { shownSandboxes } from '../../sandboxes/shownSandboxes';
import { type SessionContext, message } from './context';
import { pickRevision } from './picks';

export async function compareSandbox(ctx: SessionContext, target: SandboxTarget | vscode.SourceControl, against?: { sessionId: string; revision?: string }) {
  const { companion, changes, resolveSandbox } = ctx;
  // From a sandbox's Source Control entry (its title menu) the argument is that entry.
  const where = target !== undefined && typeof target === 'object' && 'rootUri' in target ? target.rootUri : target;
  const sandbox = await resolveSandbox(where, ['Ready'], 'Select a sandbox to compare with a revision');
  if (!sandbox) return undefined;
  const picked = against ?? (await pickRevision(ctx, undefined));
  if (!picked) return undefined;
  let revision = picked.revision;
  try {
    if (revision === undefined) {
      const { revisions } = await companion.request('sessions/revisions', { sessionId: picked.sessionId });
      revision = revisions.find((r) => r.isHead)?.ref.revision;
      if (revision === undefined) throw new Error(`${picked.sessionId} has no retained revision`);
    }
  } catch (err) {
    void vscode.window.showErrorMessage(`Could not compare ${sandbox.ref.name}: ${message(err)}`);
    return undefined;
  }
  await changes.baselines.set(sandbox.key, { sessionId: picked.sessionId, revision });
  return showComparison(ctx, sandbox, `${picked.sessionId}@${revision}`);
}

export async function compareSandboxSinceOpened(ctx: SessionContext, target: SandboxTarget | vscode.SourceControl) {
  const where = target !== undefined && typeof target === 'object' && 'rootUri' in target ? target.rootUri : target;
  const sandbox = await ctx.resolveSandbox(where, ['Ready'], 'Select a sandbox to compare with what it held when it was opened');
  if (!sandbox) return undefined;
  // Opened from a revision (or saved as one): that revision is what it held when it was opened.
  const mark = sandbox.sessionRevision;
  if (mark !== undefined) {
    const choice = await vscode.window.showInformationMessage(
      `${sandbox.ref.name} was ${mark.how === 'opened' ? 'opened from' : 'saved as'} ${mark.sessionId}@${mark.revision}: compare it with that revision.`,
      'Compare with Revision',
    );
    if (choice) return compareSandbox(ctx, sandbox.key, { sessionId: mark.sessionId, revision: mark.revision });
    return undefined;
  }
  await ctx.changes.baselines.sinceOpened(sandbox.key);
  return showComparison(ctx, sandbox, 'it was opened');
}

/** Compares a sandbox shown here at once and shows Source Control; one not shown is offered to open. */
async function showComparison({ changes }: SessionContext, sandbox: SandboxSummary, since: string) {
  if (!shownSandboxes().has(sandbox.key)) {
    void vscode.window
      .showInformationMessage(`The changes of ${sandbox.ref.name} since ${since} show in Source Control while it is open in this window.`, 'Open Sandbox')
      .then((choice) => choice && vscode.commands.executeCommand('sandboxSessions.openSandbox', sandbox.key));
    return undefined;
  }
  await changes.refresh(sandbox.key);
  await vscode.commands.executeCommand('workbench.view.scm');
  return changes.state(sandbox.key);
}
