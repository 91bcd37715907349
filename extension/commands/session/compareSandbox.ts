// Compare Sandbox with Revision…: chooses the revision a sandbox's changes are shown against (its baseline). The
// Source Control view then lists what a save on that revision would change, and editors mark the changed lines.
import * as vscode from 'vscode';
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
  if (!shownSandboxes().has(sandbox.key)) {
    void vscode.window
      .showInformationMessage(`The changes of ${sandbox.ref.name} since ${picked.sessionId}@${revision} show in Source Control while it is open in this window.`, 'Open Sandbox')
      .then((choice) => choice && vscode.commands.executeCommand('sandboxSessions.openSandbox', sandbox.key));
    return undefined;
  }
  await changes.refresh(sandbox.key);
  await vscode.commands.executeCommand('workbench.view.scm');
  return changes.state(sandbox.key);
}
