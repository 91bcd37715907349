// Save Sandbox as Session Revision: a new session or a compare-and-set commit — on the revision the sandbox is from
// when it is from that session (saveTargets.ts), else on the session's head; what was left out is listed, and a
// secret file is named and refused.
import * as vscode from 'vscode';
import { CompanionRequestError } from '../../companion/companionClient';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { type SessionContext, cancelled, message, withProgress } from './context';
import { commitOn, type SaveTarget, saveTargets } from './saveTargets';

/**
 * The session moved on since the sandbox's revision: saving on its head would replace what the newer revision
 * changed, so the user decides — save on top of it anyway, or compare the sandbox with it first (nothing is saved).
 */
async function confirmOverHead(name: string, sessionId: string, behind: { base: string; head: string }, key: string): Promise<string | undefined> {
  const save = `Save on Top of ${behind.head}`;
  const compare = `Compare with ${behind.head}`;
  const answer = await vscode.window.showWarningMessage(
    `${sessionId} moved on to ${behind.head} since ${name}'s ${behind.base}. Saving on top of ${behind.head} replaces what ${behind.head} changed with this sandbox's files.`,
    { modal: true },
    // Compare first: the safe choice is the one Enter takes.
    compare,
    save,
  );
  if (answer === compare) await vscode.commands.executeCommand('sandboxSessions.compareSandboxWithRevision', key, { sessionId, revision: behind.head });
  return answer === save ? behind.head : undefined;
}

export async function saveSandbox(ctx: SessionContext, target: SandboxTarget, options: { sessionId?: string; expectedRevision?: string | null } = {}) {
  const { companion, sessions, log, resolveSandbox } = ctx;
  const sandbox = await resolveSandbox(target, ['Ready'], 'Select a Ready sandbox to save');
  if (!sandbox) return undefined;
  let sessionId = options.sessionId;
  let expectedRevision = options.expectedRevision ?? undefined;
  if (sessionId === undefined) {
    const { sessions: all } = await companion.request('sessions/list', {});
    const mark = (ctx.registry.summary(sandbox.key) ?? sandbox).sessionRevision;
    const picked = await vscode.window.showQuickPick<vscode.QuickPickItem & { target?: SaveTarget }>(
      [{ label: '$(add) New session…' }, ...saveTargets(all, mark).map((target) => ({ label: target.label, description: target.description, target }))],
      { placeHolder: `Save ${sandbox.ref.name} as a revision of…` },
    );
    if (!picked) return undefined;
    if (picked.target === undefined) {
      sessionId = await vscode.window.showInputBox({
        prompt: 'New session id',
        value: sandbox.ref.name,
        validateInput: (v) => (v.trim() === '' ? 'A session id is required' : undefined),
      });
      if (!sessionId) return undefined;
    } else {
      sessionId = picked.target.sessionId;
      const on = commitOn(picked.target);
      if ('behind' in on) {
        expectedRevision = await confirmOverHead(sandbox.ref.name, sessionId, on.behind, sandbox.key);
        if (expectedRevision === undefined) return undefined;
      } else expectedRevision = on.expectedRevision;
    }
  }
  const id = sessionId;
  try {
    const saved = await withProgress(`Saving ${sandbox.ref.name} as ${id}`, (report, token) =>
      companion.request(
        'sessions/saveSandbox',
        { sandbox: sandbox.ref, sessionId: id, ...(expectedRevision ? { expectedRevision } : {}) },
        { token, onProgress: (v) => v.message && report(v.message) },
      ),
    );
    sessions.refresh();
    // From now on its changes are those since this save.
    await ctx.changes.baselines.set(sandbox.key, saved.revision.ref);
    const excluded = saved.workspace.excludedEntries.map((e) => e.path);
    log.info(`saved ${sandbox.key} as ${id}@${saved.revision.ref.revision} (${saved.bundle.digest}); excluded: ${excluded.join(', ') || 'nothing'}`);
    void vscode.window.showInformationMessage(
      `Saved ${sandbox.ref.name} as ${id}@${saved.revision.ref.revision}` + (excluded.length ? ` (left out: ${excluded.join(', ')})` : ''),
    );
    return saved;
  } catch (err) {
    if (cancelled(err)) return undefined;
    const why =
      err instanceof CompanionRequestError && err.causeCode === 'policy_rejected'
        ? `it holds a secret file, which is never saved: ${message(err)}`
        : err instanceof CompanionRequestError && err.causeCode === 'revision_conflict'
          ? `the session moved on meanwhile (${message(err)}); refresh and save again`
          : message(err);
    void vscode.window.showErrorMessage(`Could not save ${sandbox.ref.name}: ${why}`);
    throw err;
  }
}
