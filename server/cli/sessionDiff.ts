// `sandbox-sessions session diff [<id>[@rN]] <sandbox>`: what a local sandbox changed since a session revision
// (default: the head; with no session, the revision the sandbox was opened from or last saved as, else since it was
// opened: its opening snapshot, the one VS Code's Source Control compares with, taken now if it has none), as
// `git diff --name-status` prints it (A, M, D and the path), from the very code of the companion's
// `sessions/compareSandbox` / `openings/compareSandbox` and the MCP tool `session_diff`.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { OpeningChanges } from '../../protocol/companion/openings';
import type { WorkspaceChanges } from '../../protocol/companion/sessions';
import { createLogger } from '../log';
import type { SessionRepository } from '../repository/contract';
import { SessionRepositoryError } from '../repository/errors';
import { defaultStateDir, StateLayout } from '../local/stateRoot';
import { LocalSandboxProvider } from '../sandboxes/localProvider';
import { OpeningSnapshots } from '../sessions/openingSnapshots';
import { RevisionIndexCache } from '../sessions/revisionIndex';
import { compareSandboxWithRevision } from '../sessions/sandboxChanges';
import { SandboxSessionService } from '../sessions/sandboxSessions';

export interface SessionDiffInput {
  /** Undefined: the session revision the sandbox records (opened from, or last saved as), else since it was opened. */
  sessionId?: string | undefined;
  revision?: string | undefined;
  /** The local sandbox: its name, namespace and the local runtime's state directory (undefined: the default). */
  sandbox: { name: string; namespace: string; stateDir?: string | undefined };
}

const LETTER = { added: 'A', modified: 'M', deleted: 'D' } as const;

export async function diffSandbox(repository: SessionRepository, input: SessionDiffInput): Promise<WorkspaceChanges | OpeningChanges> {
  const log = createLogger(process.stderr, 'warn');
  const provider = new LocalSandboxProvider({ ...(input.sandbox.stateDir !== undefined ? { stateDir: input.sandbox.stateDir } : {}), log });
  const sandbox = { provider: 'local' as const, context: 'local', namespace: input.sandbox.namespace, name: input.sandbox.name };
  const revisions = new RevisionIndexCache(async () => repository, await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-diff-')));
  try {
    const sessions = new SandboxSessionService(async () => repository, new Map([['local', provider]]), { kind: 'file', description: '' }, log);
    const since = input.sessionId !== undefined ? { sessionId: input.sessionId, revision: input.revision } : (await provider.get(sandbox)).sandbox.sessionRevision;
    if (since === undefined) {
      const dir = new StateLayout(input.sandbox.stateDir ?? defaultStateDir()).openingSnapshotsDir;
      return await new OpeningSnapshots(dir, sessions, new Map([['local', provider]]), revisions, log).compare(sandbox);
    }
    const revision = since.revision ?? (await repository.listRevisions(since.sessionId)).find((r) => r.isHead)?.ref.revision;
    if (revision === undefined) throw new SessionRepositoryError('session_not_found', `session ${since.sessionId} has no retained revision`);
    return await compareSandboxWithRevision({ sessions, revisions }, { sandbox, sessionId: since.sessionId, revision });
  } finally {
    await revisions.dispose();
    await provider.dispose();
  }
}

/** `git diff --name-status` lines, then one line of totals (and what the policy left out). */
export function diffText(changes: WorkspaceChanges | OpeningChanges): string {
  const lines = changes.changes.map((c) => `${LETTER[c.status]}\t${c.path}`);
  const more = changes.total - changes.changes.length;
  if (more > 0) lines.push(`… and ${more} more`);
  const excluded = changes.workspace.excludedEntries.map((e) => e.path);
  const since =
    'against' in changes
      ? `${changes.against.sessionId}@${changes.against.revision}`
      : `it was opened (${changes.opened.at}${changes.taken ? ', its opening snapshot taken just now' : ''})`;
  lines.push(
    `${changes.total} changed, ${changes.unchanged} unchanged since ${since}` +
      (excluded.length > 0 ? ` (left out, as a save leaves them out: ${excluded.join(', ')})` : ''),
  );
  return `${lines.join('\n')}\n`;
}
