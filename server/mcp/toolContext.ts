// What every MCP tool and resource of this server shares: the providers, the agent scope (which
// sandboxes an agent may touch), the data-plane clients, the log, and the helpers that turn a
// handler's result or failure into an MCP answer. One context per server process, shared by every
// MCP session of it (stdio has one; Streamable HTTP may have several), so "created by this server"
// means this process whichever connection created it.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { parseSandboxKey, type ProviderKind, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';
import type { Run } from '../../protocol/kruntimes/run';
import type { CompanionServices } from '../companionServices';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { SandboxClients } from './sandboxClients';
import { AgentScope } from './scope';
import { McpToolError, toolErrorResult } from './toolErrors';

/** The services the MCP server uses: the companion's own (see companionServices.ts). */
export type McpBackends = Pick<CompanionServices, 'providers' | 'sessions' | 'revisions' | 'openings' | 'activations'>;

export class McpToolContext {
  readonly scope: AgentScope;
  readonly clients: SandboxClients;

  constructor(
    readonly backends: McpBackends,
    allowProcess: boolean,
    readonly log: Logger,
  ) {
    this.scope = new AgentScope(allowProcess);
    this.clients = new SandboxClients((kind) => this.provider(kind));
  }

  get providers(): ReadonlyMap<ProviderKind, SandboxProvider> {
    return this.backends.providers;
  }

  provider(kind: ProviderKind): SandboxProvider {
    const p = this.backends.providers.get(kind);
    if (!p) throw new McpToolError('unavailable', `the ${kind} provider is not available in this server`);
    return p;
  }

  /** The sandbox behind a key, if this server may use it (else the refusal an agent can act on). */
  async resolve(key: string): Promise<{ ref: SandboxRef; run: Run; summary: SandboxSummary }> {
    const ref = parseSandboxKey(key);
    if (!ref) throw new McpToolError('invalid_argument', `"${key}" is not a sandbox key; sandbox_list shows the keys of the sandboxes you may use`);
    const { run, sandbox } = await this.provider(ref.provider).get(ref);
    this.scope.authorize(ref, run);
    return { ref, run, summary: sandbox };
  }

  /** Runs a handler, turning any failure into an MCP tool error with words to act on. */
  tool<A>(name: string, fn: (args: A, extra: ToolExtra) => Promise<CallToolResult>) {
    return async (args: A, extra: ToolExtra): Promise<CallToolResult> => {
      try {
        return await fn(args, extra);
      } catch (err) {
        if (extra.signal.aborted) throw err; // the client cancelled: it expects no answer
        this.log.info('tool failed', { tool: name, error: err instanceof Error ? err.message : String(err) });
        return toolErrorResult(err);
      }
    };
  }

  dispose(): Promise<void> {
    return this.clients.dispose();
  }
}

/** What every handler gets from the SDK that we use: the client's cancellation and progress token. */
export interface ToolExtra {
  signal: AbortSignal;
  _meta?: { progressToken?: string | number } | undefined;
  sendNotification: (n: { method: 'notifications/progress'; params: { progressToken: string | number; progress: number; message?: string } }) => Promise<void>;
}

export function json(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }], structuredContent: value as Record<string, unknown> };
}

/**
 * `notifications/progress` for the request, when the client sent a progress token. Sent in order;
 * `flushed()` resolves once all were written, so none arrives after the result (a client drops
 * progress for a request it already has the answer to).
 */
export function progressOf(extra: ToolExtra): { send(message: string): void; flushed(): Promise<void> } | undefined {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  let n = 0;
  let chain = Promise.resolve();
  return {
    send: (message) => {
      n += 1;
      const params = { progressToken: token, progress: n, message };
      chain = chain.then(() => extra.sendNotification({ method: 'notifications/progress', params })).catch(() => undefined);
    },
    flushed: () => chain,
  };
}
