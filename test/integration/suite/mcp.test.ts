// Agent mode finds the MCP server with no configuration: inside a real VS Code the extension
// registers its MCP server definition provider (the package.json contribution and the API call
// agree, or VS Code would refuse it), the definition it returns starts `sandbox-sessions mcp` (the
// official SDK client lists its tools over that process's stdio), and a sandbox the agent creates
// through it is one the companion server — the Sandboxes view — sees: the same state root.
// The process-backend consent comes from the setting, not an environment variable. An agent's
// sandbox is marked in the Sandboxes view, and Grant to Agents / Revoke from Agents on a person's
// sandbox take effect in the MCP server that is already running.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import * as vscode from 'vscode';
import type { SandboxSummary } from '../../../protocol/sandboxes';
import { api, contextMenu, EXTENSION_ID, newLocalSandbox, until } from './helpers';

const SETTING = 'mcp.allowProcessBackend';

async function definitionNow(): Promise<vscode.McpStdioServerDefinition> {
  const { mcp } = await api();
  const token = new vscode.CancellationTokenSource().token;
  const listed = await mcp.provider.provideMcpServerDefinitions(token);
  assert.equal(listed?.length, 1, 'one server definition');
  const resolved = await mcp.provider.resolveMcpServerDefinition?.(listed![0]!, token);
  assert.ok(resolved instanceof vscode.McpStdioServerDefinition, 'a stdio server definition');
  return resolved;
}

/** Starts the definition as VS Code would: its command, args and env on top of this host's. */
async function start(definition: vscode.McpStdioServerDefinition): Promise<Client> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  for (const [k, v] of Object.entries(definition.env)) {
    if (v === null) delete env[k];
    else env[k] = String(v);
  }
  const transport = new StdioClientTransport({ command: definition.command, args: definition.args, env, stderr: 'ignore' });
  const client = new Client({ name: 'integration-test', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

describe('MCP server definition provider', function () {
  this.timeout(120_000);
  let client: Client | undefined;

  after(async () => {
    await client?.close();
    await vscode.workspace.getConfiguration('sandboxSessions').update(SETTING, undefined, vscode.ConfigurationTarget.Global);
  });

  it('is contributed in package.json and registered with VS Code', async () => {
    const contributed = (vscode.extensions.getExtension(EXTENSION_ID)?.packageJSON as { contributes?: { mcpServerDefinitionProviders?: { id: string }[] } })
      .contributes?.mcpServerDefinitionProviders;
    assert.deepEqual(contributed?.map((p) => p.id), ['sandboxSessions.mcp']);
    assert.equal((await api()).mcp.registered, true);
  });

  it('returns a definition that starts sandbox-sessions mcp, whose tools the SDK client lists', async () => {
    const definition = await definitionNow();
    assert.deepEqual(definition.args.slice(-2), ['mcp', '--stdio']);
    assert.equal(definition.env.SANDBOX_SESSIONS_STATE_DIR, process.env.SANDBOX_SESSIONS_STATE_DIR, 'the companion server state root');
    assert.equal(definition.env.SANDBOX_SESSIONS_MCP_ALLOW_PROCESS, '0');
    client = await start(definition);
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ['sandbox_create', 'sandbox_exec', 'sandbox_close', 'session_save', 'session_activate']) assert.ok(names.includes(name), name);
  });

  it('passes the process-backend consent from the setting, and the sandbox an agent creates is in the companion server', async () => {
    const { mcp, companion } = await api();
    let changes = 0;
    const listener = mcp.provider.onDidChangeMcpServerDefinitions?.(() => (changes += 1));
    await vscode.workspace.getConfiguration('sandboxSessions').update(SETTING, true, vscode.ConfigurationTarget.Global);
    await until(() => changes > 0, 'VS Code told that the definitions changed');
    listener?.dispose();
    const definition = await definitionNow();
    assert.equal(definition.env.SANDBOX_SESSIONS_MCP_ALLOW_PROCESS, '1');
    await client?.close();
    client = await start(definition);
    const result = (await client.callTool({ name: 'sandbox_create', arguments: { runtime: 'process' } })) as CallToolResult;
    assert.notEqual(result.isError, true, JSON.stringify(result.content));
    const key = (result.structuredContent as { sandbox: string }).sandbox;
    const { sandboxes } = await companion.request('sandboxes/list', { provider: 'local' });
    assert.ok(
      sandboxes.some((s) => s.key === key),
      `${key} among ${sandboxes.map((s) => s.key).join(', ')}`,
    );
    // The Sandboxes view marks it as the agent's: a robot icon and words in its row.
    const item = (await sandboxRow(key)) as vscode.TreeItem;
    assert.match(String(item.description), /^by agent · Ready · process$/);
    assert.match((item.tooltip as vscode.MarkdownString).value, /Agents: created by an agent/);
    assert.equal((item.iconPath as vscode.ThemeIcon).id, 'robot');
    await client.callTool({ name: 'sandbox_cancel', arguments: { sandbox: key } });
  });

  it('Grant to Agents lets the running MCP server use a person\'s sandbox, marked in the view; Revoke from Agents takes it back', async () => {
    assert.ok(client, 'the previous test started the MCP server');
    const mine = await newLocalSandbox();
    const exec = async () => (await client!.callTool({ name: 'sandbox_exec', arguments: { sandbox: mine.key, argv: ['echo', 'agent-was-here'] } })) as CallToolResult;
    const before = await exec();
    assert.equal(before.isError, true);
    assert.match(JSON.stringify(before.content), /not_granted/);
    assert.doesNotMatch(String((await sandboxRow(mine.key)).description), /agents/);

    const granted = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.grantToAgents', mine.key);
    assert.equal(granted?.grantedToAgents, true);
    const row = await sandboxRow(mine.key);
    assert.match(String(row.description), /^granted to agents · Ready/);
    assert.ok(contextMenu('sandboxSessions.sandboxes', row.contextValue).includes('sandboxSessions.revokeFromAgents'), 'the context menu offers Revoke from Agents');
    assert.ok(!contextMenu('sandboxSessions.sandboxes', row.contextValue).includes('sandboxSessions.grantToAgents'), 'and not Grant');
    const after = await exec();
    assert.notEqual(after.isError, true, JSON.stringify(after.content));
    assert.equal((after.structuredContent as { stdout: string }).stdout, 'agent-was-here\n');

    const revoked = await vscode.commands.executeCommand<SandboxSummary | undefined>('sandboxSessions.revokeFromAgents', mine.key);
    assert.equal(revoked?.grantedToAgents, undefined);
    const menu = contextMenu('sandboxSessions.sandboxes', (await sandboxRow(mine.key)).contextValue);
    assert.ok(menu.includes('sandboxSessions.grantToAgents') && !menu.includes('sandboxSessions.revokeFromAgents'), 'the context menu offers Grant to Agents again');
    assert.match(JSON.stringify((await exec()).content), /not_granted/);
    await vscode.commands.executeCommand('notifications.clearAll');
  });
});

/** The Sandboxes view's row of a local sandbox in the default namespace, as VS Code would render it. */
async function sandboxRow(key: string): Promise<vscode.TreeItem> {
  const { tree } = await api();
  const local = (await tree.getChildren()).find((n) => n.kind === 'provider' && n.provider.kind === 'local');
  assert.ok(local, 'the Local provider');
  const ns = (await tree.getChildren(local)).find((n) => n.kind === 'namespace' && n.namespace === 'default');
  assert.ok(ns, 'the default namespace');
  const node = (await tree.getChildren(ns)).find((n) => n.kind === 'sandbox' && n.sandbox.key === key);
  assert.ok(node, `${key} in the Sandboxes view`);
  return tree.getTreeItem(node);
}
