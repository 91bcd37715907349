// `sandbox-sessions sandbox diff NAME --session ID [--revision rN]`: what a local sandbox changed since a session
// revision (default: the head), as `git diff --name-status` prints it (A, M, D and the path), from the very code of
// the companion's `sessions/compareSandbox` and the MCP tool `session_diff`. Loaded only when the verb runs.
import os from 'node:os';
import path from 'node:path';
import fsp from 'node:fs/promises';
import type { WorkspaceChanges } from '../../protocol/companion/sessions';
import { createLogger } from '../log';
import { openSessionRepository } from '../repository/open';
import { SessionRepositoryError } from '../repository/errors';
import { LocalSandboxProvider } from '../sandboxes/localProvider';
import { RevisionIndexCache } from '../sessions/revisionIndex';
import { compareSandboxWithRevision } from '../sessions/sandboxChanges';
import { SandboxSessionService } from '../sessions/sandboxSessions';

export interface SandboxDiffInput {
  stateDir: string;
  namespace: string;
  name: string;
  sessionId: string;
  revision?: string | undefined;
  repository?: string | undefined;
  gatewayCommand?: string[] | undefined;
}

const LETTER = { added: 'A', modified: 'M', deleted: 'D' } as const;

export async function diffSandbox(input: SandboxDiffInput): Promise<WorkspaceChanges> {
  const log = createLogger(process.stderr, 'warn');
  const provider = new LocalSandboxProvider({ stateDir: input.stateDir, ...(input.gatewayCommand ? { gatewayCommand: input.gatewayCommand } : {}), log });
  const repository = await openSessionRepository(input.repository !== undefined ? { location: input.repository } : {});
  const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-diff-'));
  const revisions = new RevisionIndexCache(async () => repository, cacheDir);
  try {
    const sessions = new SandboxSessionService(async () => repository, new Map([['local', provider]]), { kind: 'file', description: '' });
    const revision = input.revision ?? (await repository.listRevisions(input.sessionId)).find((r) => r.isHead)?.ref.revision;
    if (revision === undefined) throw new SessionRepositoryError('session_not_found', `session ${input.sessionId} has no retained revision`);
    const ref = { provider: 'local' as const, context: 'local', namespace: input.namespace, name: input.name };
    return await compareSandboxWithRevision({ sessions, revisions }, { sandbox: ref, sessionId: input.sessionId, revision });
  } finally {
    await revisions.dispose();
    await repository.close();
    await provider.dispose();
  }
}

/** `git diff --name-status` lines, then one line of totals (and what the policy left out). */
export function diffText(changes: WorkspaceChanges): string {
  const lines = changes.changes.map((c) => `${LETTER[c.status]}\t${c.path}`);
  const more = changes.total - changes.changes.length;
  if (more > 0) lines.push(`… and ${more} more`);
  const excluded = changes.workspace.excludedEntries.map((e) => e.path);
  lines.push(
    `${changes.total} changed, ${changes.unchanged} unchanged since ${changes.against.sessionId}@${changes.against.revision}` +
      (excluded.length > 0 ? ` (left out, as a save leaves them out: ${excluded.join(', ')})` : ''),
  );
  return lines.join('\n');
}
