// Publishes `sandbox-sessions mcp` to VS Code's agent mode (and any other MCP client of this
// editor) through the MCP server definition provider, so agents find the sandbox tools with no
// configuration. The server is started like the companion server: the same Node, the same
// dist/server.js, and the same environment (state root, repository, kubeconfig, activation
// command), so an agent's sandboxes are the ones the Sandboxes view shows. The repository password
// (SecretStorage) is added only when VS Code starts the server, never to the listed definition.
import * as vscode from 'vscode';
import { serverCommand, serverEnvironment } from '../companion/companionClient';

export const MCP_PROVIDER_ID = 'sandboxSessions.mcp';
export const MCP_SERVER_LABEL = 'Sandbox Sessions';
const ALLOW_PROCESS_SETTING = 'mcp.allowProcessBackend';
/** Variables that pin where the product keeps its things (server/locations.ts), passed on explicitly. */
const LOCATION_VARIABLES = ['SANDBOX_SESSIONS_STATE_DIR', 'SANDBOX_SESSIONS_REPOSITORY', 'KUBECONFIG', 'XDG_STATE_HOME', 'XDG_DATA_HOME'];

export interface McpServerPublication {
  /** Whether VS Code accepted the provider (false on a VS Code without the MCP API). */
  registered: boolean;
  provider: vscode.McpServerDefinitionProvider<vscode.McpStdioServerDefinition>;
}

/**
 * The environment the server gets on top of the extension host's: what the companion's settings
 * set (serverEnvironment), the location variables, Electron run as Node, and the agents' consent
 * to the `process` backend. Without the repository password unless `withSecrets`.
 */
async function mcpEnvironment(context: vscode.ExtensionContext, withSecrets: boolean): Promise<Record<string, string>> {
  const full = await serverEnvironment(context);
  const env: Record<string, string> = { ELECTRON_RUN_AS_NODE: '1' };
  for (const [key, value] of Object.entries(full)) {
    if (value === undefined) continue;
    if (value !== process.env[key] || LOCATION_VARIABLES.includes(key)) env[key] = value;
  }
  if (!withSecrets && env.SANDBOX_SESSIONS_REPOSITORY !== undefined && /^postgres(ql)?:\/\//i.test(env.SANDBOX_SESSIONS_REPOSITORY)) {
    const url = new URL(env.SANDBOX_SESSIONS_REPOSITORY);
    url.password = '';
    env.SANDBOX_SESSIONS_REPOSITORY = url.toString();
  }
  const allowProcess = vscode.workspace.getConfiguration('sandboxSessions').get<boolean>(ALLOW_PROCESS_SETTING, false);
  env.SANDBOX_SESSIONS_MCP_ALLOW_PROCESS = allowProcess ? '1' : '0';
  return env;
}

async function definition(context: vscode.ExtensionContext, withSecrets: boolean): Promise<vscode.McpStdioServerDefinition> {
  const { command, args } = serverCommand(context, ['mcp', '--stdio']);
  const env = await mcpEnvironment(context, withSecrets);
  // The version changes with the extension and with the process-backend consent, so VS Code restarts the server when either does.
  const version = `${String(context.extension.packageJSON.version)}${env.SANDBOX_SESSIONS_MCP_ALLOW_PROCESS === '1' ? '+process' : ''}`;
  return new vscode.McpStdioServerDefinition(MCP_SERVER_LABEL, command, args, env, version);
}

export function registerMcpServerProvider(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): McpServerPublication {
  const changed = new vscode.EventEmitter<void>();
  context.subscriptions.push(
    changed,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('sandboxSessions')) changed.fire();
    }),
  );
  const provider: vscode.McpServerDefinitionProvider<vscode.McpStdioServerDefinition> = {
    onDidChangeMcpServerDefinitions: changed.event,
    provideMcpServerDefinitions: async () => {
      try {
        return [await definition(context, false)];
      } catch (err) {
        log.warn(`the MCP server is not offered to agents: ${err instanceof Error ? err.message : String(err)}`);
        return [];
      }
    },
    // Called when VS Code starts the server: now the repository password may be added.
    resolveMcpServerDefinition: async (server) => {
      server.env = (await definition(context, true)).env;
      return server;
    },
  };
  // An older VS Code (or a host without agent mode) has no MCP API: everything else still works.
  if (typeof vscode.lm?.registerMcpServerDefinitionProvider !== 'function') {
    log.info('this VS Code has no MCP server definition API; agents can still start `sandbox-sessions mcp` themselves (docs/mcp.md)');
    return { registered: false, provider };
  }
  context.subscriptions.push(vscode.lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, provider));
  return { registered: true, provider };
}
