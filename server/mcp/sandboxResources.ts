// Sandbox files as MCP resources: `sandbox://<sandbox key>/<workspace-relative path>`, so a client
// can attach a file of the sandbox an agent works in as context (VS Code's "Add Context…"). A path
// ending in "/" (or none) is a directory and reads as its listing. Reads go through the same
// session client and the same agent scope as the tools; every refusal is a JSON-RPC error whose
// message starts with the tools' stable code.
import { type McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import type { McpToolContext } from './toolContext';
import { McpToolError, toMcpToolError } from './toolErrors';
import { permittedSandboxes } from './tools';

export const SANDBOX_URI_SCHEME = 'sandbox:';
/** MCP's "resource not found" error code (the specification's, not JSON-RPC's). */
const RESOURCE_NOT_FOUND = -32002;
/** One directory read lists at most this many entries (the gateway's page limit). */
const DIRECTORY_PAGE = GatewayLimits.listMaxLimit;

/** The URI of a file (or, with a trailing "/", a directory) of a sandbox. */
export function sandboxUri(sandboxKey: string, path: string): string {
  return `sandbox://${sandboxKey}/${path.split('/').map(encodeURIComponent).join('/')}`;
}

/** The sandbox key and workspace-relative path of a `sandbox://` URI. */
export function parseSandboxUri(uri: URL): { sandbox: string; path: string; directory: boolean } {
  if (uri.protocol !== SANDBOX_URI_SCHEME || uri.host === '') {
    throw new McpToolError('invalid_argument', `${uri.href} is not a sandbox file URI; use sandbox://<sandbox key>/<workspace-relative path>`);
  }
  if (uri.search !== '' || uri.hash !== '') throw new McpToolError('invalid_argument', `${uri.href}: a sandbox file URI has no query or fragment`);
  let path: string;
  try {
    path = uri.pathname.replace(/^\//, '').split('/').map(decodeURIComponent).join('/');
  } catch {
    throw new McpToolError('invalid_argument', `${uri.href}: the path is not valid percent-encoding`);
  }
  return { sandbox: uri.host, path: path.replace(/\/$/, ''), directory: path === '' || path.endsWith('/') };
}

function asJsonRpcError(err: unknown): McpError {
  const e = toMcpToolError(err);
  const code = e.code === 'not_found' ? RESOURCE_NOT_FOUND : e.code === 'invalid_argument' || e.code === 'not_granted' ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, `${e.code}: ${e.message}`);
}

export function registerSandboxResources(server: McpServer, context: McpToolContext): void {
  const read = async (uri: URL, _variables: unknown, extra: { signal: AbortSignal }): Promise<ReadResourceResult> => {
    try {
      const { sandbox, path, directory } = parseSandboxUri(uri);
      const { ref } = await context.resolve(sandbox);
      const client = await context.clients.get(ref);
      if (directory) {
        const page = await client.listPage({ path, limit: DIRECTORY_PAGE }, { signal: extra.signal });
        const lines = page.entries.map((e) => (e.directory ? `${e.path}/` : e.path));
        if (page.nextPageToken !== '') lines.push(`[more entries: list them with sandbox_list_files and pageToken ${page.nextPageToken}]`);
        return { contents: [{ uri: uri.href, mimeType: 'text/directory', text: lines.join('\n') + (lines.length ? '\n' : '') }] };
      }
      const { contents, truncated } = await client.read(path, { maxBytes: GatewayLimits.maxReadBytes }, { signal: extra.signal });
      let text: string | undefined;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(contents);
      } catch {
        text = undefined;
      }
      return {
        contents: [
          text !== undefined
            ? { uri: uri.href, mimeType: 'text/plain', text, ...(truncated ? { _meta: { truncated } } : {}) }
            : { uri: uri.href, mimeType: 'application/octet-stream', blob: contents.toString('base64'), ...(truncated ? { _meta: { truncated } } : {}) },
        ],
      };
    } catch (err) {
      if (extra.signal.aborted) throw err;
      throw asJsonRpcError(err);
    }
  };

  // The workspace root of each sandbox the agent may use (listed), read as its top-level listing.
  server.registerResource(
    'sandbox-workspace',
    new ResourceTemplate('sandbox://{sandbox}/', {
      list: async () => {
        const { sandboxes } = await permittedSandboxes(context, {});
        return {
          resources: sandboxes.map((s) => ({
            uri: sandboxUri(s.sandbox, ''),
            name: `${s.name} workspace`,
            description: `The workspace of sandbox ${s.name} (${s.phase}; ${s.isolation})`,
            mimeType: 'text/directory',
          })),
        };
      },
    }),
    { title: 'The workspace of a sandbox', description: 'sandbox://<sandbox key>/: the top-level entries of a sandbox this server may use, one per line (directories end in "/").' },
    read,
  );
  server.registerResource(
    'sandbox-file',
    new ResourceTemplate('sandbox://{sandbox}/{+path}', { list: undefined }),
    {
      title: 'A file in a sandbox',
      description:
        'sandbox://<sandbox key>/<workspace-relative path>: a file of a sandbox this server may use (at most 786000 bytes per read); ' +
        'a path ending in "/" reads as the directory listing, one entry per line (directories end in "/").',
    },
    read,
  );
}
