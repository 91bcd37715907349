// The MCP tools an agent uses on sandboxes: create, list, exec, read/write/list files, close (Drain)
// and cancel (Immediate). Each has a zod input schema (the SDK lists it as JSON schema), MCP
// annotations, and bounded work (timeouts, capped output, paged listings). Lifecycle goes through
// the providers the companion server uses; data goes through the one session client (GatewayClient),
// so everything an agent does lands in the sandbox's audit trail like anything a person does.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { GatewayLimits, httpStatusForGrpc, type SessionCommand } from '../../protocol/kruntimes/gateway';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import type { Run, TerminationMode } from '../../protocol/kruntimes/run';
import { parseSandboxKey, type ProviderKind, ProviderKindSchema, type SandboxRef, type SandboxSummary } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { CappedOutput } from './cappedOutput';
import { SandboxClients } from './sandboxClients';
import { type AgentScope, isGrantedToAgents, isolationOf } from './scope';
import { McpToolError, toolErrorResult } from './toolErrors';

export interface ToolServices {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
  scope: AgentScope;
  log: Logger;
}

/** What every handler gets from the SDK that we use: the client's cancellation and progress token. */
interface ToolExtra {
  signal: AbortSignal;
  _meta?: { progressToken?: string | number } | undefined;
  sendNotification: (n: { method: 'notifications/progress'; params: { progressToken: string | number; progress: number; message?: string } }) => Promise<void>;
}

const CREATE_TIMEOUT_MS = 120_000;
const EXEC_DEFAULT_TIMEOUT_MS = 60_000;
/** Past the command's own timeout, how long to wait for the gateway's answer before giving up on it. */
const EXEC_ANSWER_GRACE_MS = 30_000;
const CLOSE_DEFAULT_TIMEOUT_S = 300;
const CANCEL_TIMEOUT_MS = 60_000;
/** A progress notification carries at most this much output text (the result has all of it, capped). */
const PROGRESS_CHUNK_CHARS = 16 * 1024;
/** sandbox_list checks grants on at most this many sandboxes per provider. */
const LIST_MAX = 500;

const sandboxArg = z
  .string()
  .min(1)
  .max(1100)
  .describe('The sandbox key, as sandbox_create and sandbox_list return it (e.g. "local.local.default.sbx-1a2b3")');
const pathArg = z.string().min(1).max(4096).describe('A workspace-relative path (no leading "/", no ".." segments)');

function json(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }], structuredContent: value as Record<string, unknown> };
}

/**
 * `notifications/progress` for the request, when the client sent a progress token. Sent in order;
 * `flushed()` resolves once all were written, so none arrives after the result (a client drops
 * progress for a request it already has the answer to).
 */
function progressOf(extra: ToolExtra): { send(message: string): void; flushed(): Promise<void> } | undefined {
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

function describeSandbox(s: SandboxSummary, extra: { createdByThisServer: boolean; grantedToAgents: boolean }) {
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
    ...extra,
  };
}

export function registerSandboxTools(server: McpServer, services: ToolServices): { dispose(): Promise<void> } {
  const { scope, log } = services;
  const provider = (kind: ProviderKind): SandboxProvider => {
    const p = services.providers.get(kind);
    if (!p) throw new McpToolError('unavailable', `the ${kind} provider is not available in this server`);
    return p;
  };
  const clients = new SandboxClients(provider);

  /** The sandbox behind a key, if this server may use it (else the refusal an agent can act on). */
  const resolve = async (key: string): Promise<{ ref: SandboxRef; run: Run }> => {
    const ref = parseSandboxKey(key);
    if (!ref) throw new McpToolError('invalid_argument', `"${key}" is not a sandbox key; sandbox_list shows the keys of the sandboxes you may use`);
    const { run } = await provider(ref.provider).get(ref);
    scope.authorize(ref, run);
    return { ref, run };
  };

  /** Runs a handler, turning any failure into an MCP tool error with words to act on. */
  const tool =
    <A>(name: string, fn: (args: A, extra: ToolExtra) => Promise<CallToolResult>) =>
    async (args: A, extra: ToolExtra): Promise<CallToolResult> => {
      try {
        return await fn(args, extra);
      } catch (err) {
        if (extra.signal.aborted) throw err; // the client cancelled: it expects no answer
        log.info('tool failed', { tool: name, error: err instanceof Error ? err.message : String(err) });
        return toolErrorResult(err);
      }
    };

  server.registerTool(
    'sandbox_create',
    {
      title: 'Create a sandbox',
      description:
        'Creates a sandbox (a session Run) and waits until it is Ready. provider "local" runs it on this machine (runtime "bubblewrap": ' +
        'Linux namespaces; "process": no isolation, refused unless the user allowed it); "kruntimes" creates a Run on the Kubernetes ' +
        'cluster of the current kubeconfig context (runtime: a Runtime name). The answer says which isolation the sandbox has.',
      inputSchema: {
        provider: ProviderKindSchema.default('local').describe('Where the sandbox runs: "local" (this machine) or "kruntimes" (a Kubernetes cluster)'),
        runtime: z.string().min(1).max(253).optional().describe('local: "bubblewrap" (default) or "process"; kruntimes: the Runtime name (required)'),
        context: z.string().min(1).max(253).optional().describe('kruntimes: the kubeconfig context (default: the current one)'),
        namespace: z.string().min(1).max(253).optional().describe('The namespace of the Run (default "default")'),
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
    tool('sandbox_create', async (args, extra) => {
      const runtime = args.runtime ?? (args.provider === 'local' ? 'bubblewrap' : undefined);
      if (runtime === undefined) throw new McpToolError('invalid_argument', 'a kruntimes sandbox needs a runtime: the name of a Runtime resource on the cluster');
      scope.checkRuntime(args.provider, runtime);
      const progress = progressOf(extra);
      const sandbox = await provider(args.provider).create(
        {
          provider: args.provider,
          runtime,
          namespace: args.namespace ?? 'default',
          ...(args.context !== undefined ? { context: args.context } : {}),
          ...(args.leaseTimeoutSeconds !== undefined ? { leaseTimeoutSeconds: args.leaseTimeoutSeconds } : {}),
          ...(args.idleTimeoutSeconds !== undefined ? { idleTimeoutSeconds: args.idleTimeoutSeconds } : {}),
        },
        { waitForReady: true, timeoutMs: CREATE_TIMEOUT_MS, signal: extra.signal, ...(progress ? { progress: (phase, message) => progress.send(message ?? phase) } : {}) },
      );
      await progress?.flushed();
      scope.markCreated(sandbox.ref);
      log.info('agent created a sandbox', { sandbox: sandbox.key, runtime });
      // A leased sandbox lives while someone heartbeats: this server holds the lease from now on.
      if (sandbox.leaseTimeoutSeconds !== undefined) await clients.get(sandbox.ref);
      return json(describeSandbox(sandbox, { createdByThisServer: true, grantedToAgents: false }));
    }),
  );

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
    tool('sandbox_list', async (args) => {
      const kinds = args.provider ? [args.provider] : [...services.providers.keys()];
      const sandboxes: ReturnType<typeof describeSandbox>[] = [];
      const unavailable: { provider: ProviderKind; reason: string }[] = [];
      for (const kind of kinds) {
        const p = provider(kind);
        let all: SandboxSummary[];
        try {
          all = await p.list(args.namespace !== undefined ? { namespace: args.namespace } : {});
        } catch (err) {
          unavailable.push({ provider: kind, reason: err instanceof Error ? err.message : String(err) });
          continue;
        }
        for (const s of all.slice(0, LIST_MAX)) {
          if (scope.createdHere(s.ref)) {
            sandboxes.push(describeSandbox(s, { createdByThisServer: true, grantedToAgents: false }));
            continue;
          }
          const run = await p.get(s.ref).then((g) => g.run, () => undefined);
          if (run && isGrantedToAgents(run)) sandboxes.push(describeSandbox(s, { createdByThisServer: false, grantedToAgents: true }));
        }
      }
      return json({ sandboxes, ...(unavailable.length ? { unavailable } : {}) });
    }),
  );

  server.registerTool(
    'sandbox_exec',
    {
      title: 'Run a command in a sandbox',
      description:
        'Runs one command in the sandbox (argv, or a shell line run with sh -c) and returns its exit code, stdout and stderr ' +
        '(each capped at 1 MiB, then "[output truncated]"). With a progress token, progress notifications carry the output live. ' +
        'Cancelling the request cancels the command in the sandbox. exitCode -1 with timedOut: the command hit its timeout.',
      inputSchema: {
        sandbox: sandboxArg,
        argv: z.array(z.string().max(65_536)).min(1).max(4096).optional().describe('The command and its arguments (give argv or shell)'),
        shell: z.string().min(1).max(65_536).optional().describe('A shell command line, run with sh -c (give argv or shell)'),
        cwd: z.string().min(1).max(4096).optional().describe('Workspace-relative working directory (default: the workspace root)'),
        env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(65_536)).optional().describe('Extra environment variables'),
        timeoutMs: z
          .number()
          .int()
          .min(1)
          .max(GatewayLimits.maxOperationTimeoutMs)
          .default(EXEC_DEFAULT_TIMEOUT_MS)
          .describe(`Kill the command after this many ms (default ${EXEC_DEFAULT_TIMEOUT_MS}, at most ${GatewayLimits.maxOperationTimeoutMs})`),
      },
      annotations: { title: 'Run a command in a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    tool('sandbox_exec', async (args, extra) => {
      if ((args.argv === undefined) === (args.shell === undefined)) {
        throw new McpToolError('invalid_argument', 'give exactly one of argv (["ls","-la"]) or shell ("ls -la | head")');
      }
      const { ref } = await resolve(args.sandbox);
      const client = await clients.get(ref);
      const command: SessionCommand = {
        ...(args.argv ? { argv: args.argv } : { shell: args.shell as string }),
        ...(args.cwd !== undefined ? { workingDirectory: args.cwd } : {}),
        ...(args.env !== undefined ? { env: args.env } : {}),
        timeoutMillis: args.timeoutMs,
      };
      const bound = AbortSignal.timeout(args.timeoutMs + EXEC_ANSWER_GRACE_MS);
      const signal = AbortSignal.any([extra.signal, bound]);
      const stdout = new CappedOutput();
      const stderr = new CappedOutput();
      const progress = progressOf(extra);
      let result: { exitCode: number; timedOut?: boolean | undefined; stdout?: string | undefined; stderr?: string | undefined } | undefined;
      let sawOutput = false;
      try {
        for await (const event of client.stream({ command }, { signal })) {
          if (event.type === 'output' && event.output.data) {
            sawOutput = true;
            const kept = (event.output.stream === 'stderr' ? stderr : stdout).push(Buffer.from(event.output.data, 'base64'));
            if (progress && kept.length > 0) {
              const text = kept.toString('utf8');
              for (let i = 0; i < text.length; i += PROGRESS_CHUNK_CHARS) progress.send(text.slice(i, i + PROGRESS_CHUNK_CHARS));
            }
          } else if (event.type === 'failed') {
            throw new GatewayError(httpStatusForGrpc(event.failed.code), event.failed.message ?? `the command failed (gRPC code ${event.failed.code})`);
          } else if (event.type === 'completed') {
            result = event.completed.command;
            break;
          }
        }
      } catch (err) {
        if (bound.aborted && !extra.signal.aborted) {
          throw new McpToolError('outcome_unknown', `the sandbox gave no answer within ${Math.round((args.timeoutMs + EXEC_ANSWER_GRACE_MS) / 1000)} s; the command was cancelled`);
        }
        throw err;
      }
      if (!result) throw new GatewayTransportError('the command ended without a result; its outcome is unknown', true);
      await progress?.flushed();
      // Era C may put the whole output in the result instead of output events.
      if (!sawOutput) {
        if (result.stdout) stdout.push(Buffer.from(result.stdout, 'base64'));
        if (result.stderr) stderr.push(Buffer.from(result.stderr, 'base64'));
      }
      return json({
        exitCode: result.exitCode,
        timedOut: result.timedOut === true,
        stdout: stdout.text(),
        stderr: stderr.text(),
        stdoutTruncated: stdout.truncated,
        stderrTruncated: stderr.truncated,
      });
    }),
  );

  server.registerTool(
    'sandbox_read_file',
    {
      title: 'Read a file in a sandbox',
      description: `Reads a workspace file (at most ${GatewayLimits.maxReadBytes} bytes per call; "truncated" says when there is more). UTF-8 text comes back as text, anything else as base64.`,
      inputSchema: {
        sandbox: sandboxArg,
        path: pathArg,
        maxBytes: z.number().int().min(1).max(GatewayLimits.maxReadBytes).default(GatewayLimits.maxReadBytes).describe('Read at most this many bytes'),
      },
      annotations: { title: 'Read a file in a sandbox', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    tool('sandbox_read_file', async (args, extra) => {
      const { ref } = await resolve(args.sandbox);
      const client = await clients.get(ref);
      const { contents, truncated } = await client.read(args.path, { maxBytes: args.maxBytes }, { signal: extra.signal });
      let text: string | undefined;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(contents);
      } catch {
        text = undefined;
      }
      return json({
        path: args.path,
        size: contents.length,
        truncated,
        ...(text !== undefined ? { encoding: 'utf8', contents: text } : { encoding: 'base64', contents: contents.toString('base64') }),
      });
    }),
  );

  server.registerTool(
    'sandbox_write_file',
    {
      title: 'Write a file in a sandbox',
      description: `Creates or replaces a workspace file (at most ${GatewayLimits.maxWriteBytes} bytes), creating missing parent directories.`,
      inputSchema: {
        sandbox: sandboxArg,
        path: pathArg,
        contents: z.string().max(2 * 1024 * 1024).describe('The new contents: text, or base64 when encoding is "base64"'),
        encoding: z.enum(['utf8', 'base64']).default('utf8').describe('How contents is written'),
      },
      annotations: { title: 'Write a file in a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    tool('sandbox_write_file', async (args, extra) => {
      const bytes = args.encoding === 'base64' ? Buffer.from(args.contents, 'base64') : Buffer.from(args.contents, 'utf8');
      if (bytes.length > GatewayLimits.maxWriteBytes) {
        throw new McpToolError('too_large', `the file is ${bytes.length} bytes; one write takes at most ${GatewayLimits.maxWriteBytes} — write it in parts with sandbox_exec (e.g. cat part files)`);
      }
      const { ref } = await resolve(args.sandbox);
      const client = await clients.get(ref);
      await client.writeFile(args.path, bytes, { createParents: true }, { signal: extra.signal });
      return json({ path: args.path, bytesWritten: bytes.length });
    }),
  );

  server.registerTool(
    'sandbox_list_files',
    {
      title: 'List files in a sandbox',
      description: 'Lists one directory of the workspace, one page at a time: pass nextPageToken back as pageToken for the next page ("" means the last page).',
      inputSchema: {
        sandbox: sandboxArg,
        path: z.string().max(4096).default('').describe('A workspace-relative directory ("" for the workspace root)'),
        limit: z.number().int().min(1).max(GatewayLimits.listMaxLimit).default(200).describe(`Entries per page (at most ${GatewayLimits.listMaxLimit})`),
        pageToken: z.string().max(4096).optional().describe('The nextPageToken of the previous page'),
      },
      annotations: { title: 'List files in a sandbox', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    tool('sandbox_list_files', async (args, extra) => {
      const { ref } = await resolve(args.sandbox);
      const client = await clients.get(ref);
      const page = await client.listPage(
        { path: args.path, limit: args.limit, ...(args.pageToken ? { pageToken: args.pageToken } : {}) },
        { signal: extra.signal },
      );
      return json({
        path: args.path,
        entries: page.entries.map((e) => ({ name: e.path, directory: e.directory === true, ...(e.sizeBytes !== undefined ? { sizeBytes: e.sizeBytes } : {}) })),
        nextPageToken: page.nextPageToken,
      });
    }),
  );

  const terminate = async (key: string, mode: TerminationMode, timeoutMs: number, extra: ToolExtra) => {
    const { ref } = await resolve(key);
    const progress = progressOf(extra);
    const done = await provider(ref.provider).terminate(ref, mode, {
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
    tool('sandbox_close', async (args, extra) => {
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
    tool('sandbox_cancel', async (args, extra) => {
      const done = await terminate(args.sandbox, 'Immediate', CANCEL_TIMEOUT_MS, extra);
      return json({ sandbox: done.key, phase: done.phase });
    }),
  );

  return { dispose: () => clients.dispose() };
}
