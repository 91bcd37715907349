// `sandbox-sessions mcp`: the Model Context Protocol face of the product, so any agent (VS Code's
// agent mode, CLI agents, other editors) works in the same sandboxes a person opens, watches and
// drains. Built on the official TypeScript SDK; one MCP server object per connection, all sharing
// one McpToolContext (scope, clients) per process. The sandbox tools live in tools.ts (search in
// searchTool.ts), the session
// tools in sessionTools.ts, files as resources in sandboxResources.ts, the scope rule in scope.ts;
// the transports are stdio (here) and Streamable HTTP (httpTransport.ts).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { SERVER_VERSION } from '../version';
import { registerSandboxResources } from './sandboxResources';
import { registerSearchTool } from './searchTool';
import { registerSessionTools } from './sessionTools';
import type { McpToolContext } from './toolContext';
import { registerSandboxTools } from './tools';

export const MCP_SERVER_NAME = 'sandbox-sessions';

/** One MCP server (one client connection) over the process's shared context. */
export function createSandboxMcpServer(context: McpToolContext): McpServer {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {}, resources: {} },
      instructions:
        'Sandboxes are isolated workspaces that run commands. Create one with sandbox_create, work in it with sandbox_exec and the ' +
        'sandbox_*_file tools (sandbox_search finds text or files), and end it with sandbox_close (Drain: exports artifacts) or sandbox_cancel. Paths are workspace-relative. ' +
        'session_save keeps a sandbox as a session revision; session_open_revision, session_fork and session_activate work on sessions. ' +
        'Files are also resources: sandbox://<sandbox key>/<path>. ' +
        'You may use only sandboxes you created here or that a person granted to agents.',
    },
  );
  registerSandboxTools(server, context);
  registerSearchTool(server, context);
  registerSessionTools(server, context);
  registerSandboxResources(server, context);
  return server;
}

/** Serves MCP on stdin/stdout until the client closes stdin (or the process is told to stop). */
export async function serveMcpOverStdio(options: { context: McpToolContext; input: NodeJS.ReadableStream; output: NodeJS.WritableStream }): Promise<void> {
  const { context } = options;
  const server = createSandboxMcpServer(context);
  const transport = new StdioServerTransport(options.input as typeof process.stdin, options.output as typeof process.stdout);
  const closed = new Promise<void>((resolve) => {
    options.input.once('end', resolve);
    options.input.once('close', resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await server.connect(transport);
  context.log.info('MCP server listening on stdio', { pid: process.pid, allowProcess: context.scope.allowProcess });
  await closed;
  context.log.info('MCP client closed the connection; exiting');
  await server.close().catch(() => undefined);
}
