// Which sandboxes an agent may touch through the MCP server, and on which isolation. By default
// only sandboxes this server process created, or whose Run a person granted to agents with the
// label (or annotation) `sandbox-sessions.dev/agents: granted` (protocol/agentAccess.ts) — read from
// the Run on every use, so a grant or revoke takes effect at the next call. The `process` backend of the local
// runtime isolates nothing, so agents are refused it unless the user allowed it
// (SANDBOX_SESSIONS_MCP_ALLOW_PROCESS=1 or `--allow-process`).
import { AGENTS_GRANTED, AGENTS_LABEL, CREATOR_AGENT, CREATOR_LABEL, isGrantedToAgents } from '../../protocol/agentAccess';
import type { Run } from '../../protocol/kruntimes/run';
import { type ProviderKind, type SandboxRef, sandboxKey } from '../../protocol/sandboxes';
import { localBackends } from '../sandboxes/localBackends';
import { defaultStateDir } from '../local/stateRoot';
import { McpToolError } from './toolErrors';

export const AGENT_GRANT_KEY = AGENTS_LABEL;
export const AGENT_GRANT_VALUE = AGENTS_GRANTED;
/** The labels of a sandbox an agent creates: the Sandboxes view marks it as the agent's. */
export const AGENT_CREATED_LABELS: Readonly<Record<string, string>> = { [CREATOR_LABEL]: CREATOR_AGENT };
export const ALLOW_PROCESS_ENV = 'SANDBOX_SESSIONS_MCP_ALLOW_PROCESS';

/** The local backend that runs commands with no isolation. */
const NO_ISOLATION_BACKEND = 'process';

export function allowProcessFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env[ALLOW_PROCESS_ENV];
  return v === '1' || v === 'true';
}


/** What a sandbox on this provider and runtime isolates, in words an agent can repeat to its user. */
export function isolationOf(provider: ProviderKind, runtime: string): string {
  if (provider === 'kruntimes') return `kruntimes Runtime "${runtime}" on a Kubernetes cluster (isolated as that Runtime's pods are)`;
  const backend = localBackends(defaultStateDir()).get(runtime);
  return backend ? `local ${backend.name}: ${backend.description}` : `local backend "${runtime}" (unknown)`;
}

export class AgentScope {
  private readonly created = new Set<string>();

  constructor(readonly allowProcess: boolean) {}

  /** Refuses a runtime agents may not use; call before creating a sandbox. */
  checkRuntime(provider: ProviderKind, runtime: string): void {
    if (provider === 'local' && runtime === NO_ISOLATION_BACKEND && !this.allowProcess) {
      throw new McpToolError(
        'isolation_refused',
        `the local "process" backend runs commands with no isolation (as your user, on this machine), so it is refused to agents; ` +
          `use runtime "bubblewrap", or let agents use it by starting the server with ${ALLOW_PROCESS_ENV}=1 (or --allow-process)`,
      );
    }
  }

  markCreated(ref: SandboxRef): void {
    this.created.add(sandboxKey(ref));
  }

  createdHere(ref: SandboxRef): boolean {
    return this.created.has(sandboxKey(ref));
  }

  /** Whether the agent may see and use this sandbox (no error). */
  permits(ref: SandboxRef, run: Run): boolean {
    return this.createdHere(ref) || isGrantedToAgents(run.metadata);
  }

  /** Throws the refusal an agent can act on when the sandbox is out of scope or on a refused runtime. */
  authorize(ref: SandboxRef, run: Run): void {
    if (!this.permits(ref, run)) {
      throw new McpToolError(
        'not_granted',
        `sandbox ${ref.name} was not created by this MCP server and has not been granted to agents; ` +
          `use a sandbox from sandbox_create, or ask its owner to grant it (Grant to Agents in the Sandboxes view of VS Code, or the label ${AGENT_GRANT_KEY}=${AGENT_GRANT_VALUE} on its Run)`,
      );
    }
    this.checkRuntime(ref.provider, run.spec.runtime);
  }
}
