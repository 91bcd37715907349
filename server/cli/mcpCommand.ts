// `sandbox-sessions mcp`: starts the MCP server over stdio (what an MCP client's config names as
// its command). Logs go to stderr; stdout carries only MCP messages.
import { createLogger } from '../log';
import { serveMcpOverStdio } from '../mcp/mcpServer';
import { ALLOW_PROCESS_ENV, allowProcessFromEnv } from '../mcp/scope';
import { KruntimesSandboxProvider } from '../sandboxes/kruntimes/kruntimesProvider';
import { LocalSandboxProvider } from '../sandboxes/localProvider';
import type { SandboxProvider } from '../sandboxes/provider';
import type { ProviderKind } from '../../protocol/sandboxes';
import { bool, parseArgs, UsageError } from './args';
import type { CommandHelp } from './args';
import type { CommandIo } from './io';

const USAGE = `usage: sandbox-sessions mcp [--stdio] [--allow-process]
  the Model Context Protocol server for agents, over stdin/stdout (docs/mcp.md). Tools: sandbox_create,
  sandbox_list, sandbox_exec, sandbox_read_file, sandbox_write_file, sandbox_list_files, sandbox_close,
  sandbox_cancel. Agents may use only sandboxes this server created or that carry the label
  sandbox-sessions.dev/agents=granted. Logs go to stderr.
  --stdio          serve over stdin/stdout (the default and, for now, the only transport)
  --allow-process  let agents use the local "process" backend, which has no isolation
                   (also: ${ALLOW_PROCESS_ENV}=1)`;
export const MCP_HELP: CommandHelp = { usage: USAGE };

export async function runMcpCommand(argv: string[], io: CommandIo): Promise<number> {
  let allowProcess: boolean;
  try {
    const args = parseArgs(argv, { booleans: ['stdio', 'allow-process'], values: [] });
    if (args.positionals.length > 0 || args.rest.length > 0) throw new UsageError(`unexpected argument ${[...args.positionals, ...args.rest][0] ?? ''}`);
    allowProcess = bool(args, 'allow-process') || allowProcessFromEnv();
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`sandbox-sessions mcp: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  const log = createLogger(io.stderr);
  const providers = new Map<ProviderKind, SandboxProvider>([
    ['local', new LocalSandboxProvider({ log })],
    ['kruntimes', new KruntimesSandboxProvider({ log })],
  ]);
  try {
    await serveMcpOverStdio({ providers, allowProcess, log, input: process.stdin, output: io.stdout });
  } finally {
    await Promise.all([...providers.values()].map((p) => p.dispose()));
    process.stdin.destroy();
  }
  return 0;
}
