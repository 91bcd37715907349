// What an MCP tool answers when it cannot do what it was asked: an MCP tool error (`isError: true`)
// whose text starts with a stable code and says, in words, what the agent or its user can do next.
// Protocol-level JSON-RPC errors are kept for malformed requests (the SDK's own schema checks).
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SandboxSessionsError } from '../../protocol/errors';
import { type McpToolErrorCode, routeError } from '../errorMapping';

export type { McpToolErrorCode } from '../errorMapping';

export class McpToolError extends SandboxSessionsError<McpToolErrorCode> {
  override readonly name = 'McpToolError';
  readonly service = 'mcp';
}

/** Any thrown value as an McpToolError with an actionable message (the route comes from server/errorMapping.ts). */
export function toMcpToolError(err: unknown): McpToolError {
  if (err instanceof McpToolError) return err;
  const { route, cause } = routeError(err);
  const message = err instanceof Error ? err.message : String(err);
  const shown = route.mcpShowsCode === true && cause !== undefined ? ` (${cause})` : '';
  return new McpToolError(route.mcp, `${message}${shown}${route.mcpNote ?? ''}`);
}

export function toolErrorResult(err: unknown): CallToolResult {
  const e = toMcpToolError(err);
  return { isError: true, content: [{ type: 'text', text: `${e.code}: ${e.message}` }], structuredContent: { error: { code: e.code, message: e.message } } };
}
