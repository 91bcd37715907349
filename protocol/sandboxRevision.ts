// The session revision a sandbox's workspace was last in step with — the revision it was opened from, or the one it
// was last saved as — kept as an annotation on the sandbox's Run, so every client knows it: VS Code compares a
// sandbox an agent opened or saved through the MCP server with that revision, as it does the ones it opened or saved
// itself. `kubectl get run -o yaml` shows it as well. Written by the server (sessions/sandboxSessions.ts) whoever asked.
import { z } from 'zod';
import type { Run } from './kruntimes/run';
import { IdentifierSchema, RevisionSchema } from './repository';

export const SESSION_REVISION_ANNOTATION = 'sandbox-sessions.dev/session-revision';

export const SandboxSessionRevisionSchema = z.object({
  sessionId: IdentifierSchema,
  revision: RevisionSchema,
  /** When the sandbox was opened from it or saved as it (ISO 8601, the writing server's clock). */
  at: z.iso.datetime(),
  /** `opened`: hydrated from it into this sandbox; `saved`: this sandbox's workspace was committed as it. */
  how: z.enum(['opened', 'saved']),
});
export type SandboxSessionRevision = z.infer<typeof SandboxSessionRevisionSchema>;

/** The annotation's value (one-line JSON). */
export function sessionRevisionAnnotation(value: SandboxSessionRevision): Record<string, string> {
  return { [SESSION_REVISION_ANNOTATION]: JSON.stringify(SandboxSessionRevisionSchema.parse(value)) };
}

/** The Run's session revision; undefined when it has none, or one that is not ours to read (hand-edited, newer). */
export function sessionRevisionOf(metadata: Pick<Run['metadata'], 'annotations'>): SandboxSessionRevision | undefined {
  const raw = metadata.annotations?.[SESSION_REVISION_ANNOTATION];
  if (raw === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const parsed = SandboxSessionRevisionSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
