// Save Sandbox as Session Revision: a new session or a compare-and-set commit on a session's head; what was
// left out is listed, and a secret file is named and refused.
import * as vscode from 'vscode';
import { CompanionRequestError } from '../../companion/companionClient';
import type { SandboxTarget } from '../../sandboxes/sandboxPicker';
import { type SessionContext, cancelled, message, withProgress } from './context';

export async function saveSandbox(ctx: SessionContext, target: SandboxTarget, options: { sessionId?: string; expectedRevision?: string | null } = {}) {
  const { companion, sessions, log, resolveSandbox } = ctx;
  const sandbox = await resolveSandbox(target, ['Ready'], 'Select a Ready sandbox to save');
  if (!sandbox) return undefined;
  let sessionId = options.sessionId;
  let expectedRevision = options.expectedRevision ?? undefined;
  if (sessionId === undefined) {
    const { sessions: all } = await companion.request('sessions/list', {});
    const picked = await vscode.window.showQuickPick(
      [
        { label: '$(add) New session…', id: undefined as string | undefined, head: undefined as string | undefined },
        ...all.map((s) => ({ label: s.sessionId, description: `commit on ${s.head.revision}`, id: s.sessionId, head: s.head.revision })),
      ],
      { placeHolder: `Save ${sandbox.ref.name} as a revision of…` },
    );
    if (!picked) return undefined;
    if (picked.id === undefined) {
      sessionId = await vscode.window.showInputBox({
        prompt: 'New session id',
        value: sandbox.ref.name,
        validateInput: (v) => (v.trim() === '' ? 'A session id is required' : undefined),
      });
      if (!sessionId) return undefined;
    } else {
      sessionId = picked.id;
      expectedRevision = picked.head;
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
