// `sandbox-sessions mcp` driven by the official MCP SDK's own Client over stdio, on the real local
// runtime: the tool list with schemas and annotations, every tool's happy path and a main error,
// live output as progress, the 1 MiB output cap, cancellation that kills the command in the
// sandbox, sandbox_search, the scope rule (a sandbox this server did not create is refused until
// granted, and again once revoked while the server runs) and the process backend refused to agents
// unless the user allowed it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { request } from 'undici';
import { MCP_HELP } from '../../../server/cli/mcpCommand';
import { findGateway, stopGateway } from '../../../server/gateway/daemonClient';
import { LocalGatewayClient } from '../../../server/gateway/localClient';
import { sessionRunBody } from '../../../server/sandboxes/sessionRunBody';
import { AGENT_GRANT_KEY, AGENT_GRANT_VALUE } from '../../../server/mcp/scope';
import { TRUNCATION_MARKER } from '../../../server/mcp/cappedOutput';
import { spawnCompanion } from '../../fixtures/companionProcess';
import { ok, running, startMcp, toolError, TOOLS, waitFor, type McpProcess } from './mcpTestClient';

interface Created {
  sandbox: string;
  name: string;
  phase: string;
  runtime: string;
  isolation: string;
}

describe('mcp server: sandbox tools over stdio (SDK client, local runtime)', function () {
  this.timeout(120_000);
  let work: string;
  let stateDir: string;
  let mcp: McpProcess;
  let sandbox: Created;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-server-'));
    stateDir = path.join(work, 'state');
    mcp = await startMcp(stateDir, { SANDBOX_SESSIONS_MCP_ALLOW_PROCESS: '1' });
  });

  after(async () => {
    await mcp?.close();
    await stopGateway({ stateDir });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => mcp.client.callTool({ name, arguments: args });

  it('lists every tool with its input schema and annotations', async () => {
    const { tools } = await mcp.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    // `sandbox-sessions mcp --help` names every tool an agent gets.
    for (const t of tools) assert.match(MCP_HELP.usage.replace(/\s+/g, ' '), new RegExp(`\\b${t.name}\\b`), `mcp --help lists ${t.name}`);
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.ok(t.description && t.description.length > 20, t.name);
      assert.equal(typeof t.annotations?.readOnlyHint, 'boolean', `${t.name} readOnlyHint`);
    }
    const exec = byName.get('sandbox_exec')!;
    assert.deepEqual(Object.keys(exec.inputSchema.properties ?? {}).sort(), ['argv', 'cwd', 'env', 'sandbox', 'shell', 'timeoutMs']);
    assert.deepEqual(exec.inputSchema.required, ['sandbox']);
    assert.equal(exec.annotations?.destructiveHint, true);
    assert.deepEqual((byName.get('sandbox_create')!.inputSchema.properties as Record<string, { enum?: string[] }>).provider?.enum, ['local', 'kruntimes']);
    for (const readOnly of ['sandbox_list', 'sandbox_read_file', 'sandbox_list_files', 'sandbox_search']) assert.equal(byName.get(readOnly)!.annotations?.readOnlyHint, true, readOnly);
    for (const idempotent of ['sandbox_close', 'sandbox_cancel', 'sandbox_write_file']) assert.equal(byName.get(idempotent)!.annotations?.idempotentHint, true, idempotent);
  });

  it('sandbox_create makes a Ready sandbox and says it has no isolation (process backend, allowed here)', async () => {
    sandbox = ok<Created>(await call('sandbox_create', { provider: 'local', runtime: 'process', leaseTimeoutSeconds: 600 }));
    assert.equal(sandbox.phase, 'Ready');
    assert.equal(sandbox.runtime, 'process');
    assert.match(sandbox.isolation, /no isolation/);
    assert.match(sandbox.sandbox, /^local\.local\.default\.sbx-/);
  });

  it('sandbox_create answers a tool error for a kruntimes sandbox without a runtime', async () => {
    assert.match(toolError(await call('sandbox_create', { provider: 'kruntimes' })), /^invalid_argument: .*needs a runtime/);
  });

  it('sandbox_list shows the sandbox it created, with its isolation', async () => {
    const { sandboxes } = ok<{ sandboxes: (Created & { createdByThisServer: boolean })[] }>(await call('sandbox_list', { provider: 'local' }));
    const mine = sandboxes.find((s) => s.sandbox === sandbox.sandbox);
    assert.ok(mine, JSON.stringify(sandboxes));
    assert.equal(mine.createdByThisServer, true);
    assert.match(mine.isolation, /no isolation/);
  });

  it('sandbox_write_file, sandbox_read_file and sandbox_list_files round-trip through the gateway', async () => {
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'src/a.txt', contents: 'héllo\n' }));
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'src/b.bin', contents: Buffer.from([0xff, 0x00, 0xfe]).toString('base64'), encoding: 'base64' }));
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'src/c.txt', contents: '' }));
    const text = ok<{ encoding: string; contents: string; truncated: boolean }>(await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'src/a.txt' }));
    assert.deepEqual([text.encoding, text.contents, text.truncated], ['utf8', 'héllo\n', false]);
    const bin = ok<{ encoding: string; contents: string }>(await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'src/b.bin' }));
    assert.deepEqual([bin.encoding, bin.contents], ['base64', Buffer.from([0xff, 0x00, 0xfe]).toString('base64')]);
    // Paged: two entries, then the rest with the gateway's page token.
    const first = ok<{ entries: { name: string }[]; nextPageToken: string }>(await call('sandbox_list_files', { sandbox: sandbox.sandbox, path: 'src', limit: 2 }));
    assert.deepEqual(first.entries.map((e) => e.name), ['a.txt', 'b.bin']);
    assert.notEqual(first.nextPageToken, '');
    const second = ok<{ entries: { name: string }[]; nextPageToken: string }>(
      await call('sandbox_list_files', { sandbox: sandbox.sandbox, path: 'src', limit: 2, pageToken: first.nextPageToken }),
    );
    assert.deepEqual(second.entries.map((e) => e.name), ['c.txt']);
    assert.equal(second.nextPageToken, '');
  });

  it('file tools answer actionable tool errors: missing file, path escape', async () => {
    assert.match(toolError(await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'src/missing.txt' })), /^not_found: /);
    assert.match(toolError(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: '../escape.txt', contents: 'x' })), /^invalid_argument: /);
  });

  it('sandbox_exec runs argv and shell (cwd, env), returning exit code and output', async () => {
    const a = ok<{ exitCode: number; stdout: string; stderr: string }>(await call('sandbox_exec', { sandbox: sandbox.sandbox, argv: ['cat', 'src/a.txt'] }));
    assert.deepEqual([a.exitCode, a.stdout, a.stderr], [0, 'héllo\n', '']);
    const s = ok<{ exitCode: number; stdout: string; stderr: string }>(
      await call('sandbox_exec', { sandbox: sandbox.sandbox, shell: 'pwd | sed "s#.*/##"; echo "$GREETING" >&2; exit 3', cwd: 'src', env: { GREETING: 'hi there' } }),
    );
    assert.deepEqual([s.exitCode, s.stdout, s.stderr], [3, 'src\n', 'hi there\n']);
  });

  it('sandbox_exec sends the output live as progress, while the command still runs', async () => {
    // The command prints, then waits for a file of this machine (the process backend shares the host) that
    // the test creates only once the printed line has arrived as progress: the output was live, not replayed.
    const go = path.join(work, 'go');
    const messages: string[] = [];
    const pending = mcp.client.callTool(
      {
        name: 'sandbox_exec',
        arguments: { sandbox: sandbox.sandbox, shell: 'echo live-one; while [ ! -e "$GO" ]; do sleep 0.05; done; echo live-two >&2', env: { GO: go } },
      },
      undefined,
      { onprogress: (p) => void (p.message && messages.push(p.message)) },
    );
    await waitFor('live-one as progress', () => (messages.join('').includes('live-one\n') ? true : undefined));
    fs.writeFileSync(go, '');
    const r = ok<{ exitCode: number; stdout: string; stderr: string }>(await pending);
    assert.deepEqual([r.exitCode, r.stdout, r.stderr], [0, 'live-one\n', 'live-two\n']);
  });

  it('sandbox_exec caps each stream at 1 MiB and says so', async () => {
    const r = ok<{ exitCode: number; stdout: string; stdoutTruncated: boolean }>(
      await call('sandbox_exec', { sandbox: sandbox.sandbox, shell: "head -c 3000000 /dev/zero | tr '\\0' a" }),
    );
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdoutTruncated, true);
    assert.equal(r.stdout.length, (1 << 20) + TRUNCATION_MARKER.length);
    assert.ok(r.stdout.endsWith(TRUNCATION_MARKER));
    assert.equal(r.stdout.slice(0, 1 << 20), 'a'.repeat(1 << 20));
  });

  it('sandbox_exec answers a tool error for argv and shell together, and for an unknown sandbox key', async () => {
    assert.match(toolError(await call('sandbox_exec', { sandbox: sandbox.sandbox, argv: ['true'], shell: 'true' })), /^invalid_argument: give exactly one of argv/);
    assert.match(toolError(await call('sandbox_exec', { sandbox: 'not-a-key', argv: ['true'] })), /^invalid_argument: .*sandbox_list/);
    assert.match(toolError(await call('sandbox_exec', { sandbox: sandbox.sandbox.replace(/sbx-[a-z0-9]+$/, 'sbx-gone0'), argv: ['true'] })), /^not_found: /);
  });

  it('cancelling sandbox_exec from the client kills the command in the sandbox', async () => {
    const controller = new AbortController();
    const pending = mcp.client.callTool(
      { name: 'sandbox_exec', arguments: { sandbox: sandbox.sandbox, shell: 'sleep 600 & echo $! > sleeper.pid; wait' } },
      undefined,
      { signal: controller.signal },
    );
    pending.catch(() => undefined);
    const pid = await waitFor('the sleeper pid', async () => {
      const r = (await call('sandbox_read_file', { sandbox: sandbox.sandbox, path: 'sleeper.pid' })) as CallToolResult;
      if (r.isError) return undefined;
      const text = (r.structuredContent as { contents: string }).contents.trim();
      return /^\d+$/.test(text) ? Number(text) : undefined;
    });
    assert.equal(running(pid), true, 'the command runs before the cancel');
    controller.abort();
    await assert.rejects(pending);
    await waitFor('the sleeper to be killed', () => (running(pid) ? undefined : true));
  });

  it('sandbox_search finds text (with match columns) and files by name, bounded, and refuses a bad regular expression', async () => {
    ok(await call('sandbox_write_file', { sandbox: sandbox.sandbox, path: 'src/notes.md', contents: 'one TODO here\nnothing\nTODO: two and TODO three\n' }));
    const found = ok<{ lines: { path: string; line: number; kind: string; columns: number[][] }[]; limitHit: boolean; truncated: boolean }>(
      await call('sandbox_search', { sandbox: sandbox.sandbox, pattern: 'todo' }),
    );
    assert.deepEqual(
      found.lines.map((l) => [l.path, l.line, l.columns]),
      [
        ['src/notes.md', 1, [[5, 9]]],
        ['src/notes.md', 3, [[1, 5], [15, 19]]],
      ],
    );
    assert.deepEqual([found.limitHit, found.truncated], [false, false]);
    const bounded = ok<{ lines: unknown[]; limitHit: boolean; stopped: string }>(await call('sandbox_search', { sandbox: sandbox.sandbox, pattern: 'TODO', maxResults: 1 }));
    assert.deepEqual([bounded.lines.length, bounded.limitHit, bounded.stopped], [1, true, 'results']);
    const files = ok<{ files: string[] }>(await call('sandbox_search', { sandbox: sandbox.sandbox, kind: 'files', pattern: 'nts' }));
    assert.deepEqual(files.files, ['src/notes.md']);
    assert.match(toolError(await call('sandbox_search', { sandbox: sandbox.sandbox, pattern: '(', isRegExp: true })), /^invalid_argument: /);
    assert.match(toolError(await call('sandbox_search', { sandbox: sandbox.sandbox, pattern: '' })), /^invalid_argument: a text search needs a pattern/);
  });

  it('refuses a sandbox it did not create, until a person grants it to agents', async () => {
    const handle = await findGateway(stateDir);
    assert.ok(handle, 'the MCP server started the local gateway');
    const api = new LocalGatewayClient(handle.url, handle.token);
    const other = await api.createRun('default', sessionRunBody({ provider: 'local', namespace: 'default', runtime: 'process' }));
    const name = other.metadata.name!;
    await api.waitPhase('default', name, ['Ready']);
    const key = `local.local.default.${name}`;
    const refusal = toolError(await call('sandbox_exec', { sandbox: key, argv: ['true'] }));
    assert.match(refusal, /^not_granted: sandbox .* was not created by this MCP server/);
    assert.ok(refusal.includes(`${AGENT_GRANT_KEY}=${AGENT_GRANT_VALUE}`), refusal);
    assert.match(toolError(await call('sandbox_close', { sandbox: key })), /^not_granted: /);
    const before = ok<{ sandboxes: { sandbox: string }[] }>(await call('sandbox_list', { provider: 'local' }));
    assert.ok(!before.sandboxes.some((s) => s.sandbox === key), 'an ungranted sandbox is not listed');

    // A person grants it (the label on its Run): now the agent may use it.
    const patched = await request(`${handle.url}/local/v1/namespaces/default/runs/${name}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${handle.token}`, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { [AGENT_GRANT_KEY]: AGENT_GRANT_VALUE } } }),
    });
    assert.equal(patched.statusCode, 200, await patched.body.text());
    const after = ok<{ sandboxes: { sandbox: string; grantedToAgents: boolean }[] }>(await call('sandbox_list', { provider: 'local' }));
    assert.equal(after.sandboxes.find((s) => s.sandbox === key)?.grantedToAgents, true);
    assert.equal(ok<{ stdout: string }>(await call('sandbox_exec', { sandbox: key, argv: ['echo', 'granted'] })).stdout, 'granted\n');

    // The person revokes it with Revoke from Agents (the companion's sandboxes/grantAgents), while this
    // MCP server runs and has used the sandbox: its next call is refused — the grant is read on use, not kept.
    const companion = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: stateDir, SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository') });
    try {
      await companion.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
      const ref = { provider: 'local', context: 'local', namespace: 'default', name };
      const revoked = (await companion.connection.sendRequest('sandboxes/grantAgents', { ref, granted: false })) as { sandbox: { grantedToAgents?: boolean } };
      assert.equal(revoked.sandbox.grantedToAgents, undefined);
      assert.match(toolError(await call('sandbox_exec', { sandbox: key, argv: ['true'] })), /^not_granted: /);
      assert.match(toolError(await call('sandbox_search', { sandbox: key, pattern: 'x' })), /^not_granted: /);
      const listed = ok<{ sandboxes: { sandbox: string }[] }>(await call('sandbox_list', { provider: 'local' }));
      assert.ok(!listed.sandboxes.some((s) => s.sandbox === key), 'a revoked sandbox is no longer listed');
      // Granted again (Grant to Agents): usable at once, and every client sees the mark.
      const regranted = (await companion.connection.sendRequest('sandboxes/grantAgents', { ref, granted: true })) as { sandbox: { grantedToAgents?: boolean } };
      assert.equal(regranted.sandbox.grantedToAgents, true);
      assert.equal(ok<{ stdout: string }>(await call('sandbox_exec', { sandbox: key, argv: ['echo', 'again'] })).stdout, 'again\n');
      // The agent's own sandbox carries the creator mark the Sandboxes view shows.
      const mine = (await companion.connection.sendRequest('sandboxes/list', { provider: 'local' })) as { sandboxes: { key: string; createdByAgent?: boolean }[] };
      assert.equal(mine.sandboxes.find((s) => s.key === sandbox.sandbox)?.createdByAgent, true);
      assert.equal(mine.sandboxes.find((s) => s.key === key)?.createdByAgent, undefined, 'a person\'s sandbox is not marked as an agent\'s');
      // A label Kubernetes would refuse is refused by the local Runs API too, with the field.
      const bad = await request(`${handle.url}/local/v1/namespaces/default/runs/${name}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${handle.token}`, 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ metadata: { labels: { 'bad key!': 'x' } } }),
      });
      assert.equal(bad.statusCode, 422);
      assert.match(await bad.body.text(), /metadata\.labels: Invalid value: \\"bad key!\\"/);
    } finally {
      await companion.stop();
    }
    assert.equal(ok<{ phase: string }>(await call('sandbox_cancel', { sandbox: key })).phase, 'Cancelled');
  });

  it('sandbox_close drains the sandbox and returns its artifacts with digests; then it takes no commands', async () => {
    ok(await call('sandbox_exec', { sandbox: sandbox.sandbox, shell: 'printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"' }));
    const closed = ok<{ phase: string; artifacts: { name: string; sizeBytes: number; digest: string }[] }>(await call('sandbox_close', { sandbox: sandbox.sandbox }));
    assert.equal(closed.phase, 'Succeeded');
    assert.deepEqual(
      closed.artifacts.map((a) => [a.name, a.sizeBytes]),
      [['report.txt', 6]],
    );
    assert.equal(closed.artifacts[0]!.digest, `sha256:${createHash('sha256').update('report').digest('hex')}`);
    assert.match(toolError(await call('sandbox_exec', { sandbox: sandbox.sandbox, argv: ['true'] })), /^not_ready: /);
  });
});

describe('mcp server: the process backend is refused to agents by default', function () {
  this.timeout(120_000);
  let work: string;
  let stateDir: string;
  let mcp: McpProcess;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-server-default-'));
    stateDir = path.join(work, 'state');
    mcp = await startMcp(stateDir, { SANDBOX_SESSIONS_MCP_ALLOW_PROCESS: '' });
  });

  after(async () => {
    await mcp?.close();
    await stopGateway({ stateDir });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('refuses runtime "process" with words that say how to allow it', async () => {
    const text = toolError(await mcp.client.callTool({ name: 'sandbox_create', arguments: { runtime: 'process' } }));
    assert.match(text, /^isolation_refused: the local "process" backend runs commands with no isolation/);
    assert.ok(text.includes('SANDBOX_SESSIONS_MCP_ALLOW_PROCESS=1'), text);
  });

  it('creates a bubblewrap sandbox by default and says which isolation it has', async () => {
    const created = ok<Created>(await mcp.client.callTool({ name: 'sandbox_create', arguments: {} }));
    assert.equal(created.runtime, 'bubblewrap');
    assert.match(created.isolation, /namespaces/);
    assert.equal(ok<{ phase: string }>(await mcp.client.callTool({ name: 'sandbox_cancel', arguments: { sandbox: created.sandbox } })).phase, 'Cancelled');
  });
});
