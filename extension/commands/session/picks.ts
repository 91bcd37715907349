// The quick picks the session commands share: a session, a revision of it (or what a Sessions view item or a
// script names), and a bundle file.
import * as vscode from 'vscode';
import type { RevisionSummary } from '../../../protocol/repository';
import { formatTime } from '../../views/dateText';
import type { SessionContext, RevisionTarget } from './context';

export async function pickSession(ctx: SessionContext): Promise<string | undefined> {
  const { companion } = ctx;
  const { sessions: all } = await companion.request('sessions/list', {});
  const picked = await vscode.window.showQuickPick(
    all.map((s) => ({ label: s.sessionId, description: `head ${s.head.revision}` })),
    { placeHolder: 'Session' },
  );
  return picked?.label;
}

export async function pickRevision(ctx: SessionContext, target: RevisionTarget): Promise<{ sessionId: string; revision?: string } | undefined> {
  const { companion } = ctx;
  if (target && 'kind' in target) {
    if (target.kind === 'revision') return { sessionId: target.revision.ref.sessionId, revision: target.revision.ref.revision };
    if (target.kind === 'session') return { sessionId: target.session.sessionId };
    return undefined;
  }
  if (target) return target;
  const sessionId = await pickSession(ctx);
  if (!sessionId) return undefined;
  const { revisions } = await companion.request('sessions/revisions', { sessionId });
  const revision = await vscode.window.showQuickPick(
    revisions.map((r: RevisionSummary) => ({ label: r.ref.revision, description: `${formatTime(r.committedAt)}${r.isHead ? ' · head' : ''}` })),
    { placeHolder: `Revision of ${sessionId}` },
  );
  return revision ? { sessionId, revision: revision.label } : undefined;
}

export async function pickBundle(uri: vscode.Uri | undefined): Promise<string | undefined> {
  if (uri?.scheme === 'file') return uri.fsPath;
  const picked = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'Session Bundle': ['zst'] }, openLabel: 'Select Bundle' });
  return picked?.[0]?.fsPath;
}
