// Fork Session…: a new session started at a named revision of another.
import { randomUUID } from 'node:crypto';
import * as vscode from 'vscode';
import { type SessionContext, type RevisionTarget, cancelled, message, withProgress } from './context';
import { pickRevision } from './picks';

export async function forkSession(ctx: SessionContext, target: RevisionTarget, options: { targetSessionId?: string; forkId?: string } = {}) {
  const { companion, sessions } = ctx;
  const picked = await pickRevision(ctx, target);
  if (!picked) return undefined;
  let revision = picked.revision;
  if (!revision) revision = (await companion.request('sessions/list', {})).sessions.find((s) => s.sessionId === picked.sessionId)?.head.revision;
  if (!revision) return undefined;
  const targetSessionId =
    options.targetSessionId ??
    (await vscode.window.showInputBox({ prompt: `Fork ${picked.sessionId}@${revision} as the new session…`, value: `${picked.sessionId}-fork` }));
  if (!targetSessionId) return undefined;
  try {
    const result = await withProgress(`Forking ${picked.sessionId}@${revision}`, (report, token) =>
      companion.request(
        'sessions/fork',
        { forkId: options.forkId ?? randomUUID(), source: { sessionId: picked.sessionId, revision }, targetSessionId },
        { token, onProgress: (v) => v.message && report(v.message) },
      ),
    );
    sessions.refresh();
    void vscode.window.showInformationMessage(`Forked ${picked.sessionId}@${revision} as ${result.target.sessionId}@${result.target.revision}.`);
    return result;
  } catch (err) {
    if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not fork ${picked.sessionId}@${revision}: ${message(err)}`);
    return undefined;
  }
}
