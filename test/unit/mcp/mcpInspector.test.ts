// A client nobody here wrote: the MCP Inspector's CLI (@modelcontextprotocol/inspector-cli, pinned)
// lists and calls the server's tools and reads a resource, over stdio (it starts the server) and
// over Streamable HTTP with the bearer token. The sandbox it works in is one a person granted to
// agents (the label on its Run), since each Inspector call is a new server process.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { ensureGateway, stopGateway } from '../../../server/gateway/daemonClient';
import { LocalGatewayClient } from '../../../server/gateway/localClient';
import { AGENT_GRANT_KEY, AGENT_GRANT_VALUE } from '../../../server/mcp/scope';
import { sessionRunBody } from '../../../server/sandboxes/sessionRunBody';
import { gatewayCommand } from '../../fixtures/activation/harness';
import { REPO_ROOT } from '../../fixtures/companionProcess';
import { MCP_SERVER_COMMAND, TOOLS } from './mcpTestClient';

const INSPECTOR_BUILD = path.join(REPO_ROOT, 'node_modules/@modelcontextprotocol/inspector-cli/build');
const SERVER = MCP_SERVER_COMMAND;

/**
 * Runs `mcp-inspector-cli --cli …` and parses the JSON it prints. Its working directory is its own
 * build folder: inspector-cli 1.0.3 finds its package.json relative to the working directory.
 * `node` on PATH is this Node (the CLI runs its client with `node`).
 */
function inspector(args: string[], env: Record<string, string>): Promise<unknown> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(INSPECTOR_BUILD, 'cli.js'), '--cli', ...args],
      {
        cwd: INSPECTOR_BUILD,
        env: { ...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`, ...env },
        timeout: 90_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`inspector failed: ${err.message}\n${stderr}`));
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(new Error(`inspector printed no JSON:\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

describe('MCP Inspector CLI against sandbox-sessions mcp', function () {
  this.timeout(180_000);
  let work: string;
  let stateDir: string;
  let key: string;
  let env: Record<string, string>;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-inspector-'));
    stateDir = path.join(work, 'state');
    env = { SANDBOX_SESSIONS_STATE_DIR: stateDir, SANDBOX_SESSIONS_MCP_ALLOW_PROCESS: '1' };
    const gateway = await ensureGateway({ stateDir, command: gatewayCommand() });
    const api = new LocalGatewayClient(gateway.url, gateway.token);
    const body = sessionRunBody({ provider: 'local', namespace: 'default', runtime: 'process' });
    body.metadata = { ...body.metadata, labels: { ...body.metadata?.labels, [AGENT_GRANT_KEY]: AGENT_GRANT_VALUE } };
    const run = await api.createRun('default', body);
    await api.waitPhase('default', run.metadata.name!, ['Ready']);
    key = `local.local.default.${run.metadata.name!}`;
  });

  after(async () => {
    await stopGateway({ stateDir });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('tools/list over stdio lists every tool with its schema', async () => {
    const { tools } = (await inspector([...SERVER, '--method', 'tools/list'], env)) as { tools: { name: string; inputSchema: { type: string } }[] };
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    assert.ok(tools.every((t) => t.inputSchema.type === 'object'));
  });

  it('tools/call over stdio runs a command in a granted sandbox, and resources/read reads its output', async () => {
    const result = (await inspector(
      [...SERVER, '--method', 'tools/call', '--tool-name', 'sandbox_exec', '--tool-arg', `sandbox=${key}`, '--tool-arg', 'shell=echo from-inspector | tee seen.txt'],
      env,
    )) as { isError?: boolean; structuredContent: { exitCode: number; stdout: string } };
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.deepEqual([result.structuredContent.exitCode, result.structuredContent.stdout], [0, 'from-inspector\n']);
    const read = (await inspector([...SERVER, '--method', 'resources/read', '--uri', `sandbox://${key}/seen.txt`], env)) as { contents: { text: string }[] };
    assert.equal(read.contents[0]?.text, 'from-inspector\n');
  });

  it('tools/call over Streamable HTTP with the bearer token', async () => {
    const child = spawn(SERVER[0]!, [...SERVER.slice(1), '--http'], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      const first = await new Promise<string>((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
      const { url, token } = JSON.parse(first) as { url: string; token: string };
      const result = (await inspector(
        [url, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, '--method', 'tools/call', '--tool-name', 'sandbox_list'],
        {},
      )) as { structuredContent: { sandboxes: { sandbox: string; grantedToAgents: boolean }[] } };
      assert.deepEqual(
        result.structuredContent.sandboxes.map((s) => [s.sandbox, s.grantedToAgents]),
        [[key, true]],
      );
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
