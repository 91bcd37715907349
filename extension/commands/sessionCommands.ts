// Session commands: Save Sandbox as Session Revision (exclusions listed, a secret file named and
// refused), Open Revision in New Sandbox, Export Revision as Bundle…, Inspect Bundle…, Hydrate
// Bundle to Folder…. Each runs under withProgress with Cancel and refreshes the Sessions view.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import * as vscode from 'vscode';
import { ActivationEventSchema } from '../../protocol/activation';
import { REVISION_SCHEME, revisionUri, parseRevisionAuthority } from '../fs/revisionFileSystemProvider';
import { SANDBOX_SCHEME } from '../fs/sandboxFileSystemProvider';
import type { RevisionSummary } from '../../protocol/repository';
import { type CompanionClient, CompanionRequestError } from '../companion/companionClient';
import type { SandboxRegistry } from '../sandboxes/registry';
import { writeRevisionWorkspaceFile } from '../sandboxes/workspaceFile';
import { createSandboxResolver, type SandboxTarget } from '../sandboxes/sandboxPicker';
import { formatTime } from '../views/dateText';
import type { SessionTreeNode, SessionTreeProvider } from '../views/sessionTree';
import { NewSandboxRefusal, resolveNewSandboxTarget, type NewSandboxArgs } from './newSandboxTarget';
import type { SandboxCreateSpec } from '../../protocol/sandboxes';

export interface SessionCommandDeps {
  companion: CompanionClient;
  registry: SandboxRegistry;
  sessions: SessionTreeProvider;
  log: vscode.LogOutputChannel;
  /** Where the workspace files of read-only revision windows are written (the extension's global storage). */
  storage: vscode.Uri;
}

/** A revision: a Sessions view item, or `{sessionId, revision}` from scripts and tests. */
type RevisionTarget = SessionTreeNode | { sessionId: string; revision?: string } | undefined;

const cancelled = (err: unknown) => err instanceof CompanionRequestError && err.code === 'cancelled';
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

function withProgress<T>(title: string, work: (report: (m: string) => void, token: vscode.CancellationToken) => Promise<T>): Thenable<T> {
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (p, token) =>
    work((m) => p.report({ message: m }), token),
  );
}

export function registerSessionCommands(deps: SessionCommandDeps): vscode.Disposable[] {
  const { companion, registry, sessions, log } = deps;
  const resolveSandbox = createSandboxResolver(companion, registry);

  const pickSession = async (): Promise<string | undefined> => {
    const { sessions: all } = await companion.request('sessions/list', {});
    const picked = await vscode.window.showQuickPick(
      all.map((s) => ({ label: s.sessionId, description: `head ${s.head.revision}` })),
      { placeHolder: 'Session' },
    );
    return picked?.label;
  };

  const pickRevision = async (target: RevisionTarget): Promise<{ sessionId: string; revision?: string } | undefined> => {
    if (target && 'kind' in target) {
      if (target.kind === 'revision') return { sessionId: target.revision.ref.sessionId, revision: target.revision.ref.revision };
      if (target.kind === 'session') return { sessionId: target.session.sessionId };
      return undefined;
    }
    if (target) return target;
    const sessionId = await pickSession();
    if (!sessionId) return undefined;
    const { revisions } = await companion.request('sessions/revisions', { sessionId });
    const revision = await vscode.window.showQuickPick(
      revisions.map((r: RevisionSummary) => ({ label: r.ref.revision, description: `${formatTime(r.committedAt)}${r.isHead ? ' · head' : ''}` })),
      { placeHolder: `Revision of ${sessionId}` },
    );
    return revision ? { sessionId, revision: revision.label } : undefined;
  };

  const saveSandbox = async (target: SandboxTarget, options: { sessionId?: string; expectedRevision?: string | null } = {}) => {
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
  };

  /**
   * Where a fresh sandbox for a revision or an activation goes: what the caller named (provider
   * default local), else — when only local sandboxes are possible — a local `process` one, else
   * picked like New Sandbox (provider, context, namespace, Runtime).
   */
  const freshSandboxSpec = async (where: Omit<NewSandboxArgs, 'name' | 'open'>): Promise<SandboxCreateSpec | undefined> => {
    const named = where.provider !== undefined || where.runtime !== undefined;
    const { providers } = await companion.request('providers/list', {});
    if (!named && !providers.some((p) => p.kind !== 'local' && p.available)) return { provider: 'local', runtime: 'process', namespace: 'default' };
    try {
      const target = await resolveNewSandboxTarget(providers, named ? { provider: 'local', ...where } : {});
      if (!target) return undefined;
      return { provider: target.provider.kind, namespace: target.namespace, runtime: target.runtime, ...(target.context ? { context: target.context } : {}) };
    } catch (err) {
      if (err instanceof NewSandboxRefusal) void vscode.window.showErrorMessage(err.message);
      return undefined;
    }
  };

  const openRevision = async (target: RevisionTarget, options: Omit<NewSandboxArgs, 'name'> = {}) => {
    const picked = await pickRevision(target);
    if (!picked) return undefined;
    const { open: _open, ...where } = options;
    const sandbox = await freshSandboxSpec(where);
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
      if (options.open !== false) await vscode.commands.executeCommand('sandboxSessions.openSandbox', result.sandbox.key, options.open ?? {});
      return result;
    } catch (err) {
      if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not open ${picked.sessionId}: ${message(err)}`);
      return undefined;
    }
  };

  const exportRevision = async (target: RevisionTarget, destination?: string) => {
    const picked = await pickRevision(target);
    if (!picked) return undefined;
    let dest = destination;
    if (!dest) {
      const uri = await vscode.window.showSaveDialog({
        saveLabel: 'Export Bundle',
        filters: { 'Session Bundle': ['zst'] },
        defaultUri: vscode.Uri.file(path.join(process.env.HOME ?? '/', `${picked.sessionId}-${picked.revision ?? 'head'}.tar.zst`)),
      });
      if (!uri) return undefined;
      dest = uri.fsPath;
    }
    try {
      const out = await companion.request('sessions/export', { sessionId: picked.sessionId, ...(picked.revision ? { revision: picked.revision } : {}), destination: dest });
      if (!destination) void vscode.window.showInformationMessage(`Exported ${out.revision.sessionId}@${out.revision.revision} to ${out.path} (${out.digest}).`);
      return out;
    } catch (err) {
      void vscode.window.showErrorMessage(`Could not export: ${message(err)}`);
      return undefined;
    }
  };

  const pickBundle = async (uri: vscode.Uri | undefined): Promise<string | undefined> => {
    if (uri?.scheme === 'file') return uri.fsPath;
    const picked = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'Session Bundle': ['zst'] }, openLabel: 'Select Bundle' });
    return picked?.[0]?.fsPath;
  };

  const inspectBundle = async (uri?: vscode.Uri, options: { show?: boolean } = {}) => {
    const file = await pickBundle(uri);
    if (!file) return undefined;
    let report: string;
    let result: Awaited<ReturnType<typeof companion.request<'bundles/inspect'>>> | undefined;
    try {
      result = await withProgress(`Inspecting ${path.basename(file)}`, (_report, token) => companion.request('bundles/inspect', { path: file }, { token }));
      const m = result.manifest;
      report = [
        `# ${path.basename(file)} — valid Session Bundle v1`,
        '',
        `| | |`,
        `|---|---|`,
        `| session | \`${m.envelope.sessionId}\` |`,
        `| last activation | ${m.envelope.lastCommittedActivationId ? `\`${m.envelope.lastCommittedActivationId}\`` : '—'} |`,
        `| state identity | \`${m.stateIdentity.mediaType}\` |`,
        `| entries | ${result.entryCount} |`,
        `| payload | ${result.payloadBytes} bytes |`,
        `| tar | ${result.decompressedTarBytes} bytes |`,
        `| archive | ${result.compressedBytes} bytes |`,
        `| archive digest | \`${result.archiveDigest}\` |`,
        `| tree digest | \`${m.payload.treeDigest}\` |`,
        '',
      ].join('\n');
    } catch (err) {
      if (cancelled(err)) return undefined;
      const code = err instanceof CompanionRequestError ? (err.causeCode ?? err.code) : 'error';
      report = `# ${path.basename(file)} — rejected\n\n\`${code}\`: ${message(err)}\n`;
    }
    if (options.show !== false) {
      const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: report });
      await vscode.window.showTextDocument(doc, { preview: true });
    }
    return { report, result };
  };

  const hydrateBundle = async (uri?: vscode.Uri, destination?: string) => {
    const file = await pickBundle(uri);
    if (!file) return undefined;
    try {
      const inspection = await companion.request('bundles/inspect', { path: file });
      let dest = destination;
      if (!dest) {
        const parent = await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Hydrate Into This Folder' });
        if (!parent?.[0]) return undefined;
        dest = path.join(parent[0].fsPath, path.basename(file).replace(/\.tar\.zst$|\.zst$/, '') || 'hydrated');
      }
      const target = dest;
      const result = await withProgress(`Hydrating ${path.basename(file)}`, (_report, token) =>
        companion.request('bundles/hydrate', { path: file, sessionId: inspection.manifest.envelope.sessionId, destination: target }, { token }),
      );
      if (!destination) {
        const open = await vscode.window.showInformationMessage(`Hydrated into ${result.destinationRoot}.`, 'Open Workspace Folder');
        if (open) await vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(result.workspaceRoot), { forceNewWindow: true });
      }
      return result;
    } catch (err) {
      if (!cancelled(err)) void vscode.window.showErrorMessage(`Could not hydrate ${path.basename(file)}: ${message(err)}`);
      return undefined;
    }
  };

  const forkSession = async (target: RevisionTarget, options: { targetSessionId?: string; forkId?: string } = {}) => {
    const picked = await pickRevision(target);
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
  };

  const activationLog = vscode.window.createOutputChannel('Sandbox Sessions: Activations');
  const runActivation = async (
    target: RevisionTarget | string,
    options: { message?: string; activationId?: string } & Omit<NewSandboxArgs, 'name' | 'open'> = {},
  ) => {
    const sessionId =
      typeof target === 'string'
        ? target
        : target && 'kind' in target && (target.kind === 'session' || target.kind === 'revision')
          ? target.session.sessionId
          : target && !('kind' in target)
            ? target.sessionId
            : await pickSession();
    if (!sessionId) return undefined;
    const text = options.message ?? (await vscode.window.showInputBox({ prompt: `Message for the agent of ${sessionId}` }));
    if (!text) return undefined;
    const { message: _message, activationId: _id, ...where } = options;
    const sandbox = await freshSandboxSpec(where);
    if (!sandbox) return undefined;
    const activationId = options.activationId ?? randomUUID();
    activationLog.show(true);
    activationLog.appendLine(`▶ ${sessionId} · activation ${activationId} — events are provisional until the commit`);
    const sub = companion.onNotification('activations/event', (raw: unknown) => {
      const p = raw as { activationId?: string; event?: unknown };
      if (p.activationId !== activationId) return;
      const event = ActivationEventSchema.safeParse(p.event);
      if (event.success) activationLog.appendLine(`  (provisional) ${event.data.type}${event.data.type === 'outcome' ? ` ${event.data.status}` : ''}`);
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
  };

  /**
   * Opens a revision read-only (its workspace/ folder) in a new window, through a workspace file
   * that names it `<session> @ <revision> (read-only)`. Resolves to that workspace file.
   */
  const browseRevision = async (target: RevisionTarget, options: { open?: boolean } = {}) => {
    const picked = await pickRevision(target);
    if (!picked?.revision) return undefined;
    const uri = revisionUri(picked.sessionId, picked.revision, 'workspace');
    const file = await writeRevisionWorkspaceFile(deps.storage, uri, picked.sessionId, picked.revision);
    if (options.open !== false) await vscode.commands.executeCommand('vscode.openFolder', file, { forceNewWindow: true });
    return file;
  };

  /**
   * Compares a file with the same path in a retained revision: the file of the active editor
   * (a live sandbox or another revision) on the right, the revision on the left.
   */
  const compareWithRevision = async (target?: vscode.Uri | SessionTreeNode, against?: { sessionId: string; revision: string }) => {
    // From a revision's context menu the argument is that revision: the active editor's file is compared with it.
    const node = target && !(target instanceof vscode.Uri) && target.kind === 'revision' ? target : undefined;
    const uri = target instanceof vscode.Uri ? target : vscode.window.activeTextEditor?.document.uri;
    if (!uri || (uri.scheme !== SANDBOX_SCHEME && uri.scheme !== REVISION_SCHEME)) {
      void vscode.window.showInformationMessage(
        node
          ? `Open a file of a sandbox or a revision, then choose Compare with Revision… on ${node.revision.ref.sessionId}@${node.revision.ref.revision} again.`
          : 'Open a file of a sandbox or a revision first.',
      );
      return undefined;
    }
    if (node) against = { sessionId: node.revision.ref.sessionId, revision: node.revision.ref.revision };
    // A sandbox path is a workspace path; a revision path already starts at the payload root.
    const rel = uri.scheme === SANDBOX_SCHEME ? `workspace/${uri.path.replace(/^\/+/, '')}` : uri.path.replace(/^\/+/, '');
    // From the explorer the second argument is the selection (an array): only a {sessionId, revision} counts.
    const given = against && typeof against === 'object' && !Array.isArray(against) && typeof against.revision === 'string' ? against : undefined;
    const other = given ?? (await pickRevision(undefined));
    if (!other?.revision) return undefined;
    const left = revisionUri(other.sessionId, other.revision, rel);
    const from = uri.scheme === REVISION_SCHEME ? parseRevisionAuthority(uri.authority) : undefined;
    const title = `${rel.replace(/^workspace\//, '')} (${other.sessionId}@${other.revision} ↔ ${from ? `${from.sessionId}@${from.revision}` : 'sandbox'})`;
    await vscode.commands.executeCommand('vscode.diff', left, uri, title);
    return { left, right: uri };
  };

  const reg = (id: string, fn: (...args: never[]) => unknown) => vscode.commands.registerCommand(id, fn as (...args: unknown[]) => unknown);
  return [
    reg('sandboxSessions.browseRevision', browseRevision),
    reg('sandboxSessions.compareWithRevision', compareWithRevision),
    activationLog,
    reg('sandboxSessions.forkSession', forkSession),
    reg('sandboxSessions.runActivation', runActivation),
    reg('sandboxSessions.saveSandboxAsRevision', saveSandbox),
    reg('sandboxSessions.openRevisionInSandbox', openRevision),
    reg('sandboxSessions.exportRevision', exportRevision),
    reg('sandboxSessions.inspectBundle', inspectBundle),
    reg('sandboxSessions.hydrateBundle', hydrateBundle),
    reg('sandboxSessions.refreshSessions', () => sessions.refresh()),
  ];
}
