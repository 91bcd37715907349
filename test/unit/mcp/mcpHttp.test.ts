// `sandbox-sessions mcp --http` driven by the official MCP SDK's Streamable HTTP client on the real
// local runtime: tools and a sandbox over HTTP with the bearer token, cancellation that kills the
// command in the sandbox, and the refusals that keep it a loopback, token-only door (no token, a
// wrong token, a foreign Host header, a non-loopback listen address, a token file others can read).
// The token is printed once on stdout and never appears in the log.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { request } from 'undici';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { REPO_ROOT } from '../../fixtures/companionProcess';
import { ok, running, waitFor } from './mcpTestClient';

interface HttpMcp {
  child: ChildProcessWithoutNullStreams;
  ready: { url: string; token?: string; tokenFile?: string };
  stderr(): string;
  stop(): Promise<void>;
}

function spawnMcp(args: string[], env: Record<string, string>): { child: ChildProcessWithoutNullStreams; stderr(): string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'server/main.ts'), 'mcp', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, SANDBOX_SESSIONS_LOG_LEVEL: 'debug', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stderr: () => log, exited };
}

async function startHttpMcp(args: string[], env: Record<string, string>): Promise<HttpMcp> {
  const { child, stderr, exited } = spawnMcp(['--http', ...args], env);
  const lines = readline.createInterface({ input: child.stdout });
  const first = await Promise.race([
    new Promise<string>((resolve) => lines.once('line', resolve)),
    exited.then((code) => {
      throw new Error(`mcp --http exited (${code}) before it was ready: ${stderr()}`);
    }),
  ]);
  return {
    child,
    ready: JSON.parse(first) as HttpMcp['ready'],
    stderr,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function connect(url: string, token: string | undefined): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(url), token === undefined ? {} : { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'sandbox-sessions-http-test', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

describe('mcp server over Streamable HTTP (SDK client, bearer token, loopback only)', function () {
  this.timeout(120_000);
  let work: string;
  let stateDir: string;
  let mcp: HttpMcp;
  let client: Client;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-http-'));
    stateDir = path.join(work, 'state');
    mcp = await startHttpMcp([], { SANDBOX_SESSIONS_STATE_DIR: stateDir, SANDBOX_SESSIONS_MCP_ALLOW_PROCESS: '1' });
  });

  after(async () => {
    await client?.close().catch(() => undefined);
    await mcp?.stop();
    await stopGateway({ stateDir });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('prints the loopback URL and a fresh token once on stdout', () => {
    assert.match(mcp.ready.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.ok(mcp.ready.token && mcp.ready.token.length >= 32, JSON.stringify(mcp.ready));
  });

  it('with the token: lists the tools, creates a sandbox, runs a command and reads a file as a resource', async () => {
    client = await connect(mcp.ready.url, mcp.ready.token);
    const { tools } = await client.listTools();
    for (const name of ['sandbox_create', 'sandbox_exec', 'session_save', 'session_open_revision', 'session_fork', 'session_activate']) {
      assert.ok(tools.some((t) => t.name === name), name);
    }
    const created = ok<{ sandbox: string }>(await client.callTool({ name: 'sandbox_create', arguments: { runtime: 'process', leaseTimeoutSeconds: 600 } }));
    const r = ok<{ exitCode: number; stdout: string }>(
      await client.callTool({ name: 'sandbox_exec', arguments: { sandbox: created.sandbox, shell: 'echo over-http | tee note.txt' } }),
    );
    assert.deepEqual([r.exitCode, r.stdout], [0, 'over-http\n']);
    const read = await client.readResource({ uri: `sandbox://${created.sandbox}/note.txt` });
    assert.deepEqual(read.contents, [{ uri: `sandbox://${created.sandbox}/note.txt`, mimeType: 'text/plain', text: 'over-http\n' }]);
  });

  it('cancelling sandbox_exec over HTTP kills the command in the sandbox', async () => {
    const created = ok<{ sandbox: string }>(await client.callTool({ name: 'sandbox_create', arguments: { runtime: 'process' } }));
    const controller = new AbortController();
    const pending = client.callTool(
      { name: 'sandbox_exec', arguments: { sandbox: created.sandbox, shell: 'sleep 600 & echo $! > sleeper.pid; wait' } },
      undefined,
      { signal: controller.signal },
    );
    pending.catch(() => undefined);
    const pid = await waitFor('the sleeper pid', async () => {
      const res = (await client.callTool({ name: 'sandbox_read_file', arguments: { sandbox: created.sandbox, path: 'sleeper.pid' } })) as CallToolResult;
      if (res.isError) return undefined;
      const text = (res.structuredContent as { contents: string }).contents.trim();
      return /^\d+$/.test(text) ? Number(text) : undefined;
    });
    assert.equal(running(pid), true, 'the command runs before the cancel');
    controller.abort();
    await assert.rejects(pending);
    await waitFor('the sleeper to be killed', () => (running(pid) ? undefined : true));
  });

  it('refuses a client without a token, and one with a wrong token of the same length (401)', async () => {
    await assert.rejects(connect(mcp.ready.url, undefined), (e: unknown) => e instanceof StreamableHTTPError && e.code === 401);
    const token = mcp.ready.token!;
    const wrong = (token[0] === 'A' ? 'B' : 'A') + token.slice(1);
    await assert.rejects(connect(mcp.ready.url, wrong), (e: unknown) => e instanceof StreamableHTTPError && e.code === 401);
    const raw = await request(mcp.ready.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(raw.statusCode, 401);
    assert.match(String(raw.headers['www-authenticate']), /^Bearer /);
    await raw.body.dump();
  });

  it('refuses a request through a non-loopback Host name (DNS rebinding) or from a foreign Origin, even with the token (403)', async () => {
    const port = new URL(mcp.ready.url).port;
    const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const headers = { authorization: `Bearer ${mcp.ready.token!}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const rebound = await request(mcp.ready.url, { method: 'POST', headers: { ...headers, host: `attacker.example:${port}` }, body: init });
    assert.equal(rebound.statusCode, 403, await rebound.body.text());
    const page = await request(mcp.ready.url, { method: 'POST', headers: { ...headers, origin: 'https://attacker.example' }, body: init });
    assert.equal(page.statusCode, 403, await page.body.text());
  });

  it('never writes the token to its log', () => {
    assert.ok(mcp.stderr().length > 0, 'the server logged something');
    assert.ok(!mcp.stderr().includes(mcp.ready.token!), 'the token is in the log');
  });
});

describe('mcp --http: where it listens and where the token comes from', function () {
  this.timeout(60_000);
  let work: string;

  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-http-setup-'));
  });

  after(async () => {
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('refuses to listen on a non-loopback address', async () => {
    const { exited, stderr } = spawnMcp(['--http', '--host', '0.0.0.0'], { SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    assert.equal(await exited, 2);
    assert.match(stderr(), /refusing to listen on 0\.0\.0\.0: the MCP server listens on a loopback address only/);
  });

  it('refuses a token file that others can read', async () => {
    const file = path.join(work, 'open-token');
    fs.writeFileSync(file, `${'x'.repeat(40)}\n`, { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    const { exited, stderr } = spawnMcp(['--http', '--token-file', file], { SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    assert.equal(await exited, 2);
    assert.match(stderr(), /readable by others \(mode 644\); run chmod 600/);
  });

  it('creates a missing token file 0600, names it instead of printing the token, and accepts that token', async () => {
    const file = path.join(work, 'token');
    const mcp = await startHttpMcp(['--token-file', file], { SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    try {
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.deepEqual(Object.keys(mcp.ready).sort(), ['tokenFile', 'url']);
      const client = await connect(mcp.ready.url, fs.readFileSync(file, 'utf8').trim());
      assert.ok((await client.listTools()).tools.length >= 12);
      await client.close();
    } finally {
      await mcp.stop();
    }
  });
});
