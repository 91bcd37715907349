// The MCP tools on a sandbox's files: read one (text or base64), write one, list a directory page by page —
// through the one session client, each bounded by the gateway's limits.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import { json, type McpToolContext } from './toolContext';
import { McpToolError } from './toolErrors';
import { sandboxArg } from './tools';

const pathArg = z.string().min(1).max(4096).describe('A workspace-relative path (no leading "/", no ".." segments)');

export function registerFileTools(server: McpServer, context: McpToolContext): void {
  registerSandboxReadFile(server, context);
  registerSandboxWriteFile(server, context);
  registerSandboxListFiles(server, context);
}

function registerSandboxReadFile(server: McpServer, context: McpToolContext): void {
  const { clients } = context;
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
    context.tool('sandbox_read_file', async (args, extra) => {
      const { ref } = await context.resolve(args.sandbox);
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
}

function registerSandboxWriteFile(server: McpServer, context: McpToolContext): void {
  const { clients } = context;
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
    context.tool('sandbox_write_file', async (args, extra) => {
      const bytes = args.encoding === 'base64' ? Buffer.from(args.contents, 'base64') : Buffer.from(args.contents, 'utf8');
      if (bytes.length > GatewayLimits.maxWriteBytes) {
        throw new McpToolError('too_large', `the file is ${bytes.length} bytes; one write takes at most ${GatewayLimits.maxWriteBytes} — write it in parts with sandbox_exec (e.g. cat part files)`);
      }
      const { ref } = await context.resolve(args.sandbox);
      const client = await clients.get(ref);
      await client.writeFile(args.path, bytes, { createParents: true }, { signal: extra.signal });
      return json({ path: args.path, bytesWritten: bytes.length });
    }),
  );
}

function registerSandboxListFiles(server: McpServer, context: McpToolContext): void {
  const { clients } = context;
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
    context.tool('sandbox_list_files', async (args, extra) => {
      const { ref } = await context.resolve(args.sandbox);
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
}
