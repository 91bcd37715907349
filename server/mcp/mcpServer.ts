// `sandbox-sessions mcp`: the Model Context Protocol face of the product, so any agent (VS Code's
// agent mode, CLI agents, other editors) works in the same sandboxes a person opens, watches and
// drains. Built on the official TypeScript SDK over stdio; the tools live in tools.ts, the scope
// rule in scope.ts. The providers are the companion server's own (local and kruntimes).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { ProviderKind } from '../../protocol/sandboxes';
import type { Logger } from '../log';
import type { SandboxProvider } from '../sandboxes/provider';
import { SERVER_VERSION } from '../version';
import { AgentScope } from './scope';
import { registerSandboxTools } from './tools';

export const MCP_SERVER_NAME = 'sandbox-sessions';

export interface McpServerOptions {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
  allowProcess: boolean;
  log: Logger;
}

export function createSandboxMcpServer(options: McpServerOptions): { server: McpServer; dispose(): Promise<void> } {
  const server = new McpServer(
    { name: MCP_SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {} },
      instructions:
        'Sandboxes are isolated workspaces that run commands. Create one with sandbox_create, work in it with sandbox_exec and the ' +
        'sandbox_*_file tools, and end it with sandbox_close (Drain: exports artifacts) or sandbox_cancel. Paths are workspace-relative. ' +
        'You may use only sandboxes you created here or that a person granted to agents.',
    },
  );
  const tools = registerSandboxTools(server, { providers: options.providers, scope: new AgentScope(options.allowProcess), log: options.log });
  return { server, dispose: () => tools.dispose() };
}

/** Serves MCP on stdin/stdout until the client closes stdin (or the process is told to stop). */
export async function serveMcpOverStdio(options: McpServerOptions & { input: NodeJS.ReadableStream; output: NodeJS.WritableStream }): Promise<void> {
  const { server, dispose } = createSandboxMcpServer(options);
  const transport = new StdioServerTransport(options.input as typeof process.stdin, options.output as typeof process.stdout);
  const closed = new Promise<void>((resolve) => {
    options.input.once('end', resolve);
    options.input.once('close', resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await server.connect(transport);
  options.log.info('MCP server listening on stdio', { pid: process.pid, allowProcess: options.allowProcess });
  await closed;
  options.log.info('MCP client closed the connection; exiting');
  await server.close().catch(() => undefined);
  await dispose();
}
