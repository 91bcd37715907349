// What an MCP tool answers when it cannot do what it was asked: an MCP tool error (`isError: true`)
// whose text starts with a stable code and says, in words, what the agent or its user can do next.
// Protocol-level JSON-RPC errors are kept for malformed requests (the SDK's own schema checks).
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import { SandboxError } from '../sandboxes/provider';

export type McpToolErrorCode =
  | 'invalid_argument'
  | 'not_found'
  | 'not_granted'
  | 'isolation_refused'
  | 'not_ready'
  | 'busy'
  | 'too_large'
  | 'unavailable'
  | 'outcome_unknown'
  | 'failed';

export class McpToolError extends Error {
  override readonly name = 'McpToolError';
  constructor(
    readonly code: McpToolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

function fromGatewayStatus(err: GatewayError): McpToolError {
  const m = err.message;
  switch (err.status) {
    case 400:
      return new McpToolError('invalid_argument', m);
    case 404:
      return new McpToolError('not_found', `${m} (check the path with sandbox_list_files)`);
    case 409:
      return new McpToolError('not_ready', `${m} — the sandbox is closing or closed; create a new one with sandbox_create`);
    case 413:
      return new McpToolError('too_large', m);
    case 429:
      return new McpToolError('busy', `${m} — the sandbox's command queue is full; wait for running commands to finish and try again`);
    case 503:
    case 504:
      return new McpToolError('unavailable', `${m} — the sandbox's gateway is not answering; try again shortly`);
    default:
      return new McpToolError('failed', m);
  }
}

/** Any thrown value as an McpToolError with an actionable message. */
export function toMcpToolError(err: unknown): McpToolError {
  if (err instanceof McpToolError) return err;
  if (err instanceof GatewayError) return fromGatewayStatus(err);
  if (err instanceof GatewayTransportError) {
    return err.code === 'outcome_unknown'
      ? new McpToolError('outcome_unknown', `${err.message}; check the sandbox (sandbox_list_files, sandbox_read_file) before repeating a change`)
      : new McpToolError('unavailable', `${err.message}; the sandbox's gateway cannot be reached — try again, or check the sandbox with sandbox_list`);
  }
  if (err instanceof SandboxError) {
    if (err.code === 'sandbox_not_found') return new McpToolError('not_found', `${err.message}; sandbox_list shows the sandboxes this server may use`);
    if (err.code === 'run_state' || err.code === 'sandbox_wait_timeout') return new McpToolError('not_ready', err.message);
    if (err.code === 'invalid_spec') return new McpToolError('invalid_argument', err.message);
    if (err.code === 'provider_unavailable' || err.code === 'port_forward_failed') return new McpToolError('unavailable', err.message);
    return new McpToolError('failed', err.message);
  }
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'run_state') return new McpToolError('not_ready', `${message}; only a Ready sandbox takes commands and file changes`);
  if (code === 'invalid_argument') return new McpToolError('invalid_argument', message);
  return new McpToolError('failed', message);
}

export function toolErrorResult(err: unknown): CallToolResult {
  const e = toMcpToolError(err);
  return { isError: true, content: [{ type: 'text', text: `${e.code}: ${e.message}` }], structuredContent: { error: { code: e.code, message: e.message } } };
}
