// `sandbox-sessions mcp`: starts the MCP server over stdio (what an MCP client's config names as
// its command), or over Streamable HTTP on a loopback address with a bearer token (`--http`).
// Logs go to stderr; over stdio, stdout carries only MCP messages; over HTTP, stdout carries one
// line saying where to connect (and, when no token file was named, the token: the only time it is shown).
import { createCompanionServices } from '../companionServices';
import { createLogger } from '../log';
import { McpHttpSetupError, generateToken, startMcpHttpServer, tokenFromFile } from '../mcp/httpTransport';
import { serveMcpOverStdio } from '../mcp/mcpServer';
import { ALLOW_PROCESS_ENV, allowProcessFromEnv } from '../mcp/scope';
import { McpToolContext } from '../mcp/toolContext';
import { bool, flag, parseArgs, UsageError, writeLine } from './args';
import type { CommandHelp } from './args';
import type { CommandIo } from './io';

const USAGE = `usage: sandbox-sessions mcp [--stdio | --http [--port N] [--host 127.0.0.1] [--token-file PATH]] [--allow-process]
  the Model Context Protocol server for agents (docs/mcp.md). Tools: sandbox_create, sandbox_list, sandbox_exec,
  sandbox_read_file, sandbox_write_file, sandbox_list_files, sandbox_search, sandbox_close, sandbox_cancel,
  session_save, session_diff, session_open_revision, session_fork, session_activate; sandbox files as resources
  (sandbox://<key>/<path>).
  Agents may use only sandboxes this server created or that carry the label sandbox-sessions.dev/agents=granted.
  Logs go to stderr.
  --stdio            serve over stdin/stdout (the default)
  --http             serve Streamable HTTP at http://127.0.0.1:<port>/mcp; every request needs
                     Authorization: Bearer <token>. Prints one JSON line {url, token | tokenFile} on stdout
  --port N           the HTTP port (default 0: a free one, printed)
  --host ADDR        a loopback address to listen on (127.0.0.1 by default, or ::1); others are refused
  --token-file PATH  read the bearer token from PATH (0600, yours), or create it there when missing;
                     without it a new token is printed once on stdout
  --allow-process    let agents use the local "process" backend, which has no isolation
                     (also: ${ALLOW_PROCESS_ENV}=1)`;
export const MCP_HELP: CommandHelp = { usage: USAGE };

interface McpArgs {
  http: boolean;
  port: number;
  host: string;
  tokenFile: string | undefined;
  allowProcess: boolean;
}

function parseMcpArgs(argv: string[]): McpArgs {
  const args = parseArgs(argv, { booleans: ['stdio', 'http', 'allow-process'], values: ['port', 'host', 'token-file'] });
  if (args.positionals.length > 0 || args.rest.length > 0) throw new UsageError(`unexpected argument ${[...args.positionals, ...args.rest][0] ?? ''}`);
  const http = bool(args, 'http');
  if (http && bool(args, 'stdio')) throw new UsageError('--stdio and --http exclude each other');
  const portText = flag(args, 'port');
  const host = flag(args, 'host');
  const tokenFile = flag(args, 'token-file');
  if (!http && (portText !== undefined || host !== undefined || tokenFile !== undefined)) throw new UsageError('--port, --host and --token-file go with --http');
  const port = portText === undefined ? 0 : Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError(`--port must be a port number (0-65535), not ${portText ?? ''}`);
  return { http, port, host: host ?? '127.0.0.1', tokenFile, allowProcess: bool(args, 'allow-process') || allowProcessFromEnv() };
}

export async function runMcpCommand(argv: string[], io: CommandIo): Promise<number> {
  let args: McpArgs;
  try {
    args = parseMcpArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`sandbox-sessions mcp: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  const log = createLogger(io.stderr);
  const services = createCompanionServices(log);
  const context = new McpToolContext(services, args.allowProcess, log);
  try {
    if (!args.http) {
      await serveMcpOverStdio({ context, input: process.stdin, output: io.stdout });
      process.stdin.destroy();
      return 0;
    }
    let token: string;
    let tokenFile: string | undefined;
    try {
      if (args.tokenFile !== undefined) {
        token = tokenFromFile(args.tokenFile).token;
        tokenFile = args.tokenFile;
      } else {
        token = generateToken();
      }
      const server = await startMcpHttpServer({ context, host: args.host, port: args.port, token, log });
      // The one place the token is shown: the caller's stdout, never the log.
      writeLine(io.stdout, JSON.stringify({ url: server.url, ...(tokenFile !== undefined ? { tokenFile } : { token }) }));
      await new Promise<void>((resolve) => {
        process.once('SIGTERM', resolve);
        process.once('SIGINT', resolve);
      });
      log.info('MCP HTTP server stopping');
      await server.close();
      return 0;
    } catch (err) {
      if (!(err instanceof McpHttpSetupError) && (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      io.stderr.write(`sandbox-sessions mcp: ${err instanceof Error ? err.message : String(err)}\n`);
      return 2;
    }
  } finally {
    await context.dispose();
    await services.dispose();
  }
}
