// The MCP tools an agent uses on sandboxes: create, list, close (Drain) and cancel (Immediate) here; exec
// (execTool.ts) and read/write/list files (fileTools.ts) are registered with them. Each has a zod input schema (the SDK lists it as JSON schema), MCP
// annotations, and bounded work (timeouts, capped output, paged listings). Lifecycle goes through
// the providers the companion server uses; data goes through the one session client (GatewayClient),
// so everything an agent does lands in the sandbox's audit trail like anything a person does.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { TerminationMode } from '../../protocol/kruntimes/run';
import { type ProviderKind, ProviderKindSchema, type SandboxCreateSpec, type SandboxSummary } from '../../protocol/sandboxes';
import { registerExecTool } from './execTool';
import { registerFileTools } from './fileTools';
import { AGENT_CREATED_LABELS, isolationOf } from './scope';
import { json, type McpToolContext, progressOf, type ToolExtra } from './toolContext';
import { McpToolError } from './toolErrors';

const CREATE_TIMEOUT_MS = 120_000;
const CLOSE_DEFAULT_TIMEOUT_S = 300;
const CANCEL_TIMEOUT_MS = 60_000;
/** sandbox_list looks at most at this many sandboxes per provider. */
const LIST_MAX = 500;

export const sandboxArg = z
  .string()
  .min(1)
  .max(1100)
  .describe('The sandbox key, as sandbox_create and sandbox_list return it (e.g. "local.local.default.sbx-1a2b3")');

export function describeSandbox(s: SandboxSummary, extra: { createdByThisServer: boolean; grantedToAgents: boolean }) {
  return {
    sandbox: s.key,
    name: s.ref.name,
    provider: s.ref.provider,
    context: s.ref.context,
    namespace: s.ref.namespace,
    runtime: s.runtime,
    phase: s.phase ?? 'Pending',
    isolation: isolationOf(s.ref.provider, s.runtime),
    ...(s.message ? { message: s.message } : {}),
    ...(s.leaseTimeoutSeconds !== undefined ? { leaseTimeoutSeconds: s.leaseTimeoutSeconds } : {}),
    // Which revision a session_save's expectedRevision would build on, and what session_diff compares with.
    ...(s.sessionRevision ? { sessionRevision: { sessionId: s.sessionRevision.sessionId, revision: s.sessionRevision.revision, how: s.sessionRevision.how } } : {}),
    ...extra,
  };
}

/** The sandboxes the agent may use (created here or granted), and the providers that did not answer. */
export async function permittedSandboxes(
  context: McpToolContext,
  filter: { provider?: ProviderKind | undefined; namespace?: string | undefined },
): Promise<{ sandboxes: ReturnType<typeof describeSandbox>[]; unavailable: { provider: ProviderKind; reason: string }[] }> {
  const kinds = filter.provider ? [filter.provider] : [...context.providers.keys()];
  const sandboxes: ReturnType<typeof describeSandbox>[] = [];
  const unavailable: { provider: ProviderKind; reason: string }[] = [];
  for (const kind of kinds) {
    const p = context.provider(kind);
    let all: SandboxSummary[];
    try {
      all = await p.list(filter.namespace !== undefined ? { namespace: filter.namespace } : {});
    } catch (err) {
      unavailable.push({ provider: kind, reason: err instanceof Error ? err.message : String(err) });
      continue;
    }
    // The listing is read now, labels included: a grant or revoke made since the last call counts.
    for (const s of all.slice(0, LIST_MAX)) {
      const createdHere = context.scope.createdHere(s.ref);
      if (createdHere || s.grantedToAgents === true) sandboxes.push(describeSandbox(s, { createdByThisServer: createdHere, grantedToAgents: s.grantedToAgents === true }));
    }
  }
  return { sandboxes, unavailable };
}

/** Where a new sandbox comes from, as the agent names it (sandbox_create's fields; the session tools take them too). */
export const sandboxSpecArgs = {
  provider: ProviderKindSchema.default('local').describe('Where the sandbox runs: "local" (this machine) or "kruntimes" (a Kubernetes cluster)'),
  runtime: z.string().min(1).max(253).optional().describe('local: "bubblewrap" (default) or "process"; kruntimes: the Runtime name (required)'),
  context: z.string().min(1).max(253).optional().describe('kruntimes: the kubeconfig context (default: the current one)'),
  namespace: z.string().min(1).max(253).optional().describe('The namespace of the Run (default "default")'),
};

/** The create spec of an agent's sandbox: a runtime the agent may use (the scope checks it), labelled as the agent's. */
export function agentCreateSpec(
  context: McpToolContext,
  args: { provider: ProviderKind; runtime?: string | undefined; context?: string | undefined; namespace?: string | undefined },
): SandboxCreateSpec {
  const runtime = args.runtime ?? (args.provider === 'local' ? 'bubblewrap' : undefined);
  if (runtime === undefined) throw new McpToolError('invalid_argument', 'a kruntimes sandbox needs a runtime: the name of a Runtime resource on the cluster');
  context.scope.checkRuntime(args.provider, runtime);
  return { provider: args.provider, runtime, namespace: args.namespace ?? 'default', labels: { ...AGENT_CREATED_LABELS }, ...(args.context !== undefined ? { context: args.context } : {}) };
}

export function registerSandboxTools(server: McpServer, context: McpToolContext): void {
  registerCreateTool(server, context);
  registerListTool(server, context);
  registerExecTool(server, context);
  registerFileTools(server, context);
  registerTerminateTools(server, context);
}

function registerCreateTool(server: McpServer, context: McpToolContext): void {
  const { scope, log, clients } = context;
  server.registerTool(
    'sandbox_create',
    {
      title: 'Create a sandbox',
      description:
        'Creates a sandbox (a session Run) and waits until it is Ready. provider "local" runs it on this machine (runtime "bubblewrap": ' +
        'Linux namespaces; "process": no isolation, refused unless the user allowed it); "kruntimes" creates a Run on the Kubernetes ' +
        'cluster of the current kubeconfig context (runtime: a Runtime name). The answer says which isolation the sandbox has.',
      inputSchema: {
        ...sandboxSpecArgs,
        leaseTimeoutSeconds: z
          .number()
          .int()
          .min(1)
          .max(86_400)
          .optional()
          .describe('Session lease: the sandbox ends this many seconds after this server stops using it (the server holds the lease while it runs)'),
        idleTimeoutSeconds: z.number().int().min(1).max(604_800).optional().describe('Local: the sandbox closes this long after its last command or file change'),
      },
      annotations: { title: 'Create a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    context.tool('sandbox_create', async (args, extra) => {
      const spec = agentCreateSpec(context, args);
      const progress = progressOf(extra);
      const sandbox = await context.provider(args.provider).create(
        {
          ...spec,
          ...(args.leaseTimeoutSeconds !== undefined ? { leaseTimeoutSeconds: args.leaseTimeoutSeconds } : {}),
          ...(args.idleTimeoutSeconds !== undefined ? { idleTimeoutSeconds: args.idleTimeoutSeconds } : {}),
        },
        { waitForReady: true, timeoutMs: CREATE_TIMEOUT_MS, signal: extra.signal, ...(progress ? { progress: (phase, message) => progress.send(message ?? phase) } : {}) },
      );
      await progress?.flushed();
      scope.markCreated(sandbox.ref);
      log.info('agent created a sandbox', { sandbox: sandbox.key, runtime: spec.runtime });
      // A leased sandbox lives while someone heartbeats: this server holds the lease from now on.
      if (sandbox.leaseTimeoutSeconds !== undefined) await clients.get(sandbox.ref);
      return json(describeSandbox(sandbox, { createdByThisServer: true, grantedToAgents: false }));
    }),
  );
}

function registerListTool(server: McpServer, context: McpToolContext): void {
  server.registerTool(
    'sandbox_list',
    {
      title: 'List sandboxes',
      description:
        'Lists the sandboxes this server may use: those it created, and those a person granted to agents ' +
        '(label sandbox-sessions.dev/agents=granted on the Run). Each entry says its phase and isolation.',
      inputSchema: {
        provider: ProviderKindSchema.optional().describe('Only this provider (default: every provider that answers)'),
        namespace: z.string().min(1).max(253).optional().describe('Only this namespace'),
      },
      annotations: { title: 'List sandboxes', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    context.tool('sandbox_list', async (args) => {
      const { sandboxes, unavailable } = await permittedSandboxes(context, args);
      return json({ sandboxes, ...(unavailable.length ? { unavailable } : {}) });
    }),
  );
}

function registerTerminateTools(server: McpServer, context: McpToolContext): void {
  const { log, clients } = context;
  const terminate = async (key: string, mode: TerminationMode, timeoutMs: number, extra: ToolExtra) => {
    const { ref } = await context.resolve(key);
    const progress = progressOf(extra);
    const done = await context.provider(ref.provider).terminate(ref, mode, {
      wait: true,
      timeoutMs,
      signal: extra.signal,
      ...(progress ? { progress: (phase, message) => progress.send(message ?? phase) } : {}),
    });
    await progress?.flushed();
    await clients.forget(ref);
    log.info(mode === 'Drain' ? 'agent closed a sandbox' : 'agent cancelled a sandbox', { sandbox: done.key, phase: done.phase });
    return done;
  };

  server.registerTool(
    'sandbox_close',
    {
      title: 'Close a sandbox (Drain)',
      description:
        'Closes the sandbox with Drain: running commands finish, new ones are refused, the top-level entries of $KRUNTIME_ARTIFACTS_DIR ' +
        'are exported as artifacts, and the sandbox ends Succeeded. Returns the artifacts with their sha256 digests.',
      inputSchema: {
        sandbox: sandboxArg,
        timeoutSeconds: z.number().int().min(1).max(1800).default(CLOSE_DEFAULT_TIMEOUT_S).describe('Wait at most this long for the sandbox to finish'),
      },
      annotations: { title: 'Close a sandbox (Drain)', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    context.tool('sandbox_close', async (args, extra) => {
      const done = await terminate(args.sandbox, 'Drain', args.timeoutSeconds * 1000, extra);
      return json({
        sandbox: done.key,
        phase: done.phase,
        artifacts: (done.artifacts ?? []).map((a) => ({ name: a.name, type: a.type, sizeBytes: a.sizeBytes, digest: a.digest })),
      });
    }),
  );

  server.registerTool(
    'sandbox_cancel',
    {
      title: 'Cancel a sandbox (Immediate)',
      description: 'Cancels the sandbox at once (Immediate): running commands are killed, nothing is exported, and the sandbox ends Cancelled.',
      inputSchema: { sandbox: sandboxArg },
      annotations: { title: 'Cancel a sandbox (Immediate)', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    context.tool('sandbox_cancel', async (args, extra) => {
      const done = await terminate(args.sandbox, 'Immediate', CANCEL_TIMEOUT_MS, extra);
      return json({ sandbox: done.key, phase: done.phase });
    }),
  );
}
