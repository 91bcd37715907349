// Import Bundle as Session Revision…: a Session Bundle file from elsewhere (Export Revision on another machine, a
// colleague, Maka) becomes a revision of the session it was packed for — a bundle is bound to its session, so the
// session is not asked for: it is read from the bundle. A new session is created; an existing one gets the bundle
// as its next revision, after the user agreed (compare-and-set on the head they saw). Then it can be opened in a
// new sandbox like any revision.
import path from 'node:path';
import * as vscode from 'vscode';
import { type SessionContext, cancelled, message, withProgress } from './context';
import { pickBundle } from './picks';

export interface ImportBundleOptions {
  /** Scripts and tests: commit on this revision (the session exists), or `null` to create it, without asking. */
  expectedRevision?: string | null;
}

export async function importBundle(ctx: SessionContext, uri?: vscode.Uri, options: ImportBundleOptions = {}) {
  const { companion, sessions, log } = ctx;
  const file = await pickBundle(uri);
  if (!file) return undefined;
  const name = path.basename(file);
  try {
    // Which session it is, from its manifest (the whole file is checked again by the import).
    const inspection = await withProgress(`Checking ${name}`, (_report, token) => companion.request('bundles/inspect', { path: file }, { token }));
    const sessionId = inspection.manifest.envelope.sessionId;
    let expectedRevision = options.expectedRevision ?? undefined;
    if (options.expectedRevision === undefined) {
      const existing = (await companion.request('sessions/list', {})).sessions.find((s) => s.sessionId === sessionId);
      if (existing) {
        const add = `Add as Revision after ${existing.head.revision}`;
        const answer = await vscode.window.showInformationMessage(
          `${name} was packed for session ${sessionId}, which already has revisions up to ${existing.head.revision}. Add it as ${sessionId}'s next revision?`,
          { modal: true },
          add,
        );
        if (answer !== add) return undefined;
        expectedRevision = existing.head.revision;
      }
    }
    const out = await withProgress(`Importing ${name} into ${sessionId}`, (_report, token) =>
      companion.request('sessions/import', { path: file, ...(expectedRevision !== undefined ? { expectedRevision } : {}) }, { token }),
    );
    const { ref } = out.revision;
    log.info(`imported ${file} as ${ref.sessionId}@${ref.revision} (${out.bundle.digest})`);
    sessions.refresh();
    void vscode.window.showInformationMessage(`Imported ${name} as ${ref.sessionId}@${ref.revision}.`, 'Open in New Sandbox').then((action) => {
      if (action) void vscode.commands.executeCommand('sandboxSessions.openRevisionInSandbox', { sessionId: ref.sessionId, revision: ref.revision });
    });
    return out;
  } catch (err) {
    if (cancelled(err)) return undefined;
    void vscode.window.showErrorMessage(`Could not import ${name}: ${message(err)}`);
    throw err;
  }
}
