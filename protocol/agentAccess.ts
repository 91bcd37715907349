// Which sandboxes agents (the MCP server, `sandbox-sessions mcp`) may use, as labels on the sandbox's
// Run so every client sees the same answer and a person can set it with kubectl as well as with the
// Sandboxes view: `sandbox-sessions.dev/agents: granted` is a person's grant; `sandbox-sessions.dev/creator:
// agent` marks a sandbox an agent created (shown in the view; it grants nothing by itself — the
// server that created it may use it, others only once granted).
import type { Run } from './kruntimes/run';

export const AGENTS_LABEL = 'sandbox-sessions.dev/agents';
export const AGENTS_GRANTED = 'granted';
export const CREATOR_LABEL = 'sandbox-sessions.dev/creator';
export const CREATOR_AGENT = 'agent';

type Meta = Pick<Run['metadata'], 'labels' | 'annotations'>;

/** Whether a person granted this Run to agents (the label, or the same key as an annotation). */
export function isGrantedToAgents(metadata: Meta): boolean {
  return metadata.labels?.[AGENTS_LABEL] === AGENTS_GRANTED || metadata.annotations?.[AGENTS_LABEL] === AGENTS_GRANTED;
}

/** Whether an agent created this Run (through the MCP server). */
export function isCreatedByAgent(metadata: Meta): boolean {
  return metadata.labels?.[CREATOR_LABEL] === CREATOR_AGENT;
}

/** The merge patch of `metadata.labels` that grants (or revokes) agents' use. */
export function agentGrantLabels(granted: boolean): Record<string, string | null> {
  return { [AGENTS_LABEL]: granted ? AGENTS_GRANTED : null };
}
