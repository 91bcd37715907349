// Run Activation…: one agent turn of a session in a fresh, throw-away sandbox, its provisional events shown
// in an output channel until the commit says what counted.
import { randomUUID } from 'node:crypto';
import * as vscode from 'vscode';
import { companionNotifications } from '../../../protocol/companion';
import type { NewSandboxArgs } from '../newSandboxTarget';
import { type SessionContext, type RevisionTarget, cancelled, message, withProgress } from './context';
import { pickSession } from './picks';
import { freshSandboxSpec } from './freshSandbox';

export async function runActivation(
  ctx: SessionContext,
  target: RevisionTarget | string,
  options: { message?: string; activationId?: string } & Omit<NewSandboxArgs, 'name' | 'open'> = {},
) {
  const { companion, sessions, activationLog } = ctx;
  const sessionId =
    typeof target === 'string'
      ? target
      : target && 'kind' in target && (target.kind === 'session' || target.kind === 'revision')
        ? target.session.sessionId
        : target && !('kind' in target)
          ? target.sessionId
          : await pickSession(ctx);
  if (!sessionId) return undefined;
  const text = options.message ?? (await vscode.window.showInputBox({ prompt: `Message for the agent of ${sessionId}` }));
  if (!text) return undefined;
  const { message: _message, activationId: _id, ...where } = options;
  const sandbox = await freshSandboxSpec(ctx, where);
  if (!sandbox) return undefined;
  const activationId = options.activationId ?? randomUUID();
  activationLog.show(true);
  activationLog.appendLine(`▶ ${sessionId} · activation ${activationId} — events are provisional until the commit`);
  const sub = companion.onNotification('activations/event', (raw: unknown) => {
    const parsed = companionNotifications['activations/event'].params.safeParse(raw);
    if (!parsed.success || parsed.data.activationId !== activationId) return;
    const event = parsed.data.event;
    activationLog.appendLine(`  (provisional) ${event.type}${event.type === 'outcome' ? ` ${event.status}` : ''}`);
  });
  try {
    const result = await withProgress(`Running an activation of ${sessionId}`, (report, token) =>
      companion.request(
        'activations/run',
        { sessionId, activationId, stimulus: { type: 'message', payload: { text } }, sandbox },
        { token, onProgress: (v) => v.message && report(v.message) },
      ),
    );
    sessions.refresh();
    if (result.commit === 'committed') {
      activationLog.appendLine(`✔ committed as ${sessionId}@${result.revision ?? '?'}: ${result.outcome?.status ?? ''}${result.deduplicated ? ' (stored outcome of an earlier run)' : ''}`);
      void vscode.window.showInformationMessage(`Activation committed as ${sessionId}@${result.revision ?? '?'} (${result.outcome?.status ?? 'no outcome'}).`);
    } else {
      activationLog.appendLine(`✖ not committed: ${result.error?.code ?? ''} ${result.error?.message ?? ''}`);
      void vscode.window.showWarningMessage(`The activation was not committed: ${result.error?.message ?? 'unknown reason'}`);
    }
    return result;
  } catch (err) {
    if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not run the activation: ${message(err)}`);
    return undefined;
  } finally {
    sub.dispose();
  }
}
