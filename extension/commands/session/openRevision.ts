// Open Revision in New Sandbox: a retained revision hydrated into a fresh sandbox, then opened.
import * as vscode from 'vscode';
import type { NewSandboxArgs } from '../newSandboxTarget';
import { type SessionContext, type RevisionTarget, cancelled, message, withProgress } from './context';
import { pickRevision } from './picks';
import { freshSandboxSpec } from './freshSandbox';

export async function openRevision(ctx: SessionContext, target: RevisionTarget, options: Omit<NewSandboxArgs, 'name'> = {}) {
  const { companion, registry } = ctx;
  const picked = await pickRevision(ctx, target);
  if (!picked) return undefined;
  const { open: _open, ...where } = options;
  const sandbox = await freshSandboxSpec(ctx, where);
  if (!sandbox) return undefined;
  try {
    const result = await withProgress(`Opening ${picked.sessionId}${picked.revision ? `@${picked.revision}` : ''} in a new sandbox`, (report, token) =>
      companion.request(
        'sessions/openInSandbox',
        { sessionId: picked.sessionId, ...(picked.revision ? { revision: picked.revision } : {}), sandbox },
        { token, onProgress: (v) => v.message && report(v.message) },
      ),
    );
    registry.fireChanged(result.sandbox);
    // Its changes are shown against the revision it was opened from.
    await ctx.changes.baselines.set(result.sandbox.key, result.revision);
    if (options.open !== false) await vscode.commands.executeCommand('sandboxSessions.openSandbox', result.sandbox.key, options.open ?? {});
    return result;
  } catch (err) {
    if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not open ${picked.sessionId}: ${message(err)}`);
    return undefined;
  }
}
