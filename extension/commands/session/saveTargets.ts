// What Save Sandbox as Session Revision offers, and which revision each choice commits on (compare-and-set). The
// session the sandbox is in step with — its mark: the revision it was opened from or last saved as, by any client —
// comes first and commits on THAT revision, not on the session's head: when someone committed since, the save must
// not silently replace their revision (the user is asked first). Any other session commits on its head, as chosen.
// No VS Code API here, so it is unit-testable.
import type { SandboxSessionRevision } from '../../../protocol/sandboxRevision';

export interface SaveTarget {
  label: string;
  description: string;
  sessionId: string;
  head: string;
  /** The revision this sandbox is from, when it is from this session. */
  base?: string;
}

export function saveTargets(sessions: readonly { sessionId: string; head: { revision: string } }[], mark: SandboxSessionRevision | undefined): SaveTarget[] {
  const targets = sessions.map((s): SaveTarget => {
    const head = s.head.revision;
    if (mark?.sessionId !== s.sessionId) return { label: s.sessionId, description: `commit on ${head}`, sessionId: s.sessionId, head };
    const description =
      mark.revision === head ? `commit on ${head} · this sandbox's revision` : `this sandbox is from ${mark.revision}; the head moved on to ${head}`;
    return { label: s.sessionId, description, sessionId: s.sessionId, head, base: mark.revision };
  });
  // The sandbox's own session first; the others in the order the repository lists them.
  return [...targets.filter((t) => t.base !== undefined), ...targets.filter((t) => t.base === undefined)];
}

/** The revision to commit on, or — the sandbox is from an older revision of the chosen session — both, to ask. */
export function commitOn(target: SaveTarget): { expectedRevision: string } | { behind: { base: string; head: string } } {
  if (target.base === undefined || target.base === target.head) return { expectedRevision: target.head };
  return { behind: { base: target.base, head: target.head } };
}
