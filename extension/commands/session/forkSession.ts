// Fork Session…: a new session started at a named revision of another; its notice offers to open the fork in a new
// sandbox or to browse it.
import { randomUUID } from 'node:crypto';
import * as vscode from 'vscode';
import { type SessionContext, type RevisionTarget, cancelled, message, withProgress } from './context';
import { pickRevision } from './picks';

const OPEN_FORK = 'Open in New Sandbox';
const BROWSE_FORK = 'Browse';

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
    // What one does next with a fork: work on it in a sandbox of its own (beside the source's folder, for a side-by-side
    // compare), or look through it read-only.
    const fork = { sessionId: result.target.sessionId, revision: result.target.revision };
    void (async () => {
      const choice = await vscode.window.showInformationMessage(`Forked ${picked.sessionId}@${revision} as ${fork.sessionId}@${fork.revision}.`, OPEN_FORK, BROWSE_FORK);
      const command = choice === OPEN_FORK ? 'sandboxSessions.openRevisionInSandbox' : choice === BROWSE_FORK ? 'sandboxSessions.browseRevision' : undefined;
      if (command) await vscode.commands.executeCommand(command, fork).then(undefined, (err: unknown) => vscode.window.showErrorMessage(`Could not open ${fork.sessionId}@${fork.revision}: ${message(err)}`));
    })();
    return result;
  } catch (err) {
    if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not fork ${picked.sessionId}@${revision}: ${message(err)}`);
    return undefined;
  }
}
