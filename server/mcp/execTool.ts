// `sandbox_exec`: an agent runs one command in a sandbox it may use, through the one session client, with its
// output capped (and streamed as progress when asked) and the wait bounded past the command's own timeout.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { GatewayLimits, httpStatusForGrpc, type SessionCommand } from '../../protocol/kruntimes/gateway';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { CappedOutput } from './cappedOutput';
import { json, type McpToolContext, progressOf } from './toolContext';
import { McpToolError } from './toolErrors';
import { sandboxArg } from './tools';

const EXEC_DEFAULT_TIMEOUT_MS = 60_000;
/** Past the command's own timeout, how long to wait for the gateway's answer before giving up on it. */
const EXEC_ANSWER_GRACE_MS = 30_000;
/** A progress notification carries at most this much output text (the result has all of it, capped). */
const PROGRESS_CHUNK_CHARS = 16 * 1024;

type CommandResult = { exitCode: number; timedOut?: boolean | undefined; stdout?: string | undefined; stderr?: string | undefined };

/** Streams the command's events into the two capped outputs (and progress); the completed result, if one came. */
async function streamCommand(
  client: GatewayClient,
  command: SessionCommand,
  signal: AbortSignal,
  out: { stdout: CappedOutput; stderr: CappedOutput; progress: ReturnType<typeof progressOf> },
): Promise<{ result: CommandResult | undefined; sawOutput: boolean }> {
  let sawOutput = false;
  for await (const event of client.stream({ command }, { signal })) {
    if (event.type === 'output' && event.output.data) {
      sawOutput = true;
      const kept = (event.output.stream === 'stderr' ? out.stderr : out.stdout).push(Buffer.from(event.output.data, 'base64'));
      if (out.progress && kept.length > 0) {
        const text = kept.toString('utf8');
        for (let i = 0; i < text.length; i += PROGRESS_CHUNK_CHARS) out.progress.send(text.slice(i, i + PROGRESS_CHUNK_CHARS));
      }
    } else if (event.type === 'failed') {
      throw new GatewayError(httpStatusForGrpc(event.failed.code), event.failed.message ?? `the command failed (gRPC code ${event.failed.code})`);
    } else if (event.type === 'completed') {
      return { result: event.completed.command, sawOutput };
    }
  }
  return { result: undefined, sawOutput };
}

export function registerExecTool(server: McpServer, context: McpToolContext): void {
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
    context.tool('sandbox_exec', async (args, extra) => {
      if ((args.argv === undefined) === (args.shell === undefined)) {
        throw new McpToolError('invalid_argument', 'give exactly one of argv (["ls","-la"]) or shell ("ls -la | head")');
      }
      const { ref } = await context.resolve(args.sandbox);
      const client = await context.clients.get(ref);
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
      let streamed: Awaited<ReturnType<typeof streamCommand>>;
      try {
        streamed = await streamCommand(client, command, signal, { stdout, stderr, progress });
      } catch (err) {
        if (bound.aborted && !extra.signal.aborted) {
          throw new McpToolError('outcome_unknown', `the sandbox gave no answer within ${Math.round((args.timeoutMs + EXEC_ANSWER_GRACE_MS) / 1000)} s; the command was cancelled`);
        }
        throw err;
      }
      const { result, sawOutput } = streamed;
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
}
