// What the MCP suites share: the server started over stdio as an agent client starts it (the official
// SDK's client), the list of tools it must offer, and readers for a tool's answer that fail the test
// with the server's own words.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { REPO_ROOT } from '../../fixtures/companionProcess';

/** Every tool `sandbox-sessions mcp` offers, sorted. */
export const TOOLS = [
  'sandbox_cancel',
  'sandbox_close',
  'sandbox_create',
  'sandbox_exec',
  'sandbox_list',
  'sandbox_list_files',
  'sandbox_read_file',
  'sandbox_search',
  'sandbox_write_file',
  'session_activate',
  'session_diff',
  'session_fork',
  'session_open_revision',
  'session_save',
];

/** The server's command line from sources (the CLI a user runs, as `sandbox-sessions mcp`). */
export const MCP_SERVER_COMMAND = [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'server/main.ts'), 'mcp'];

export interface McpProcess {
  client: Client;
  stderr(): string;
  close(): Promise<void>;
}

/** `sandbox-sessions mcp` over stdio with `SANDBOX_SESSIONS_STATE_DIR=stateDir` (and `env`), connected. */
export async function startMcp(stateDir: string, env: Record<string, string> = {}): Promise<McpProcess> {
  const [command = process.execPath, ...args] = MCP_SERVER_COMMAND;
  const transport = new StdioClientTransport({
    command,
    args,
    cwd: REPO_ROOT,
    env: { ...(process.env as Record<string, string>), SANDBOX_SESSIONS_STATE_DIR: stateDir, SANDBOX_SESSIONS_LOG_LEVEL: 'debug', ...env },
    stderr: 'pipe',
  });
  let log = '';
  transport.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const client = new Client({ name: 'sandbox-sessions-test', version: '0.0.0' });
  await client.connect(transport);
  return { client, stderr: () => log, close: () => client.close() };
}

/** The JSON a tool answered (its structured content), asserting it was not a tool error. */
export function ok<T>(result: unknown): T {
  const r = result as CallToolResult;
  assert.notEqual(r.isError, true, JSON.stringify(r.content));
  return r.structuredContent as T;
}

/** The text of a tool error, asserting it was one. */
export function toolError(result: unknown): string {
  const r = result as CallToolResult;
  assert.equal(r.isError, true, `expected a tool error, got ${JSON.stringify(r.content).slice(0, 500)}`);
  const first = r.content[0];
  assert.ok(first && first.type === 'text');
  return first.text;
}

/** Polls `probe` until it gives a value (an observable condition), failing after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50)); // polling an observable condition
  }
}

/** Whether a pid still runs (a zombie runs nothing). */
export function running(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
