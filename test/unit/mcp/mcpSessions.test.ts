// The MCP server's session tools and `sandbox://` resources, driven by the official SDK client over
// stdio on the real local runtime and file repository: save a sandbox as r1 then r2 (and a stale
// save refused as a conflict), list what it changed since a revision, open r1 in a new sandbox that holds r1's files, fork at a revision
// (idempotent), run an activation with the test agent, and read files and directories as
// resources. Both tools and resources refuse a sandbox the agent was not granted.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { findGateway, stopGateway } from '../../../server/gateway/daemonClient';
import { LocalGatewayClient } from '../../../server/gateway/localClient';
import { sessionRunBody } from '../../../server/sandboxes/sessionRunBody';
import { ok, startMcp, toolError } from './mcpTestClient';

const AGENT = path.resolve(__dirname, '../../fixtures/agent/agent.mts');

describe('mcp server: session tools and sandbox:// resources (SDK client over stdio)', function () {
  this.timeout(180_000);
  let work: string;
  let stateDir: string;
  let client: Client;
  let sandbox: string;

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-sessions-'));
    stateDir = path.join(work, 'state');
    client = (
      await startMcp(stateDir, {
        SANDBOX_SESSIONS_REPOSITORY: path.join(work, 'repository'),
        SANDBOX_SESSIONS_ACTIVATION_COMMAND: JSON.stringify([process.execPath, AGENT, 'activate']),
        SANDBOX_SESSIONS_MCP_ALLOW_PROCESS: '1',
      })
    ).client;
    sandbox = ok<{ sandbox: string }>(await call('sandbox_create', { runtime: 'process', leaseTimeoutSeconds: 600 })).sandbox;
    ok(await call('sandbox_write_file', { sandbox, path: 'src/app.txt', contents: 'version one\n' }));
    ok(await call('sandbox_write_file', { sandbox, path: 'src/blob.bin', contents: Buffer.from([0xff, 0xfe, 0x00]).toString('base64'), encoding: 'base64' }));
  });

  after(async () => {
    await client?.close();
    await stopGateway({ stateDir });
    fs.rmSync(work, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

  it('session_save keeps the sandbox as r1, then r2 on top of it; a save on a stale head is a conflict', async () => {
    const r1 = ok<{ sessionId: string; revision: string; bundle: { digest: string } }>(await call('session_save', { sandbox, sessionId: 'mcp-demo' }));
    assert.deepEqual([r1.sessionId, r1.revision], ['mcp-demo', 'r1']);
    assert.match(r1.bundle.digest, /^sha256:[0-9a-f]{64}$/);
    ok(await call('sandbox_write_file', { sandbox, path: 'src/app.txt', contents: 'version two\n' }));
    const r2 = ok<{ revision: string }>(await call('session_save', { sandbox, sessionId: 'mcp-demo', expectedRevision: 'r1' }));
    assert.equal(r2.revision, 'r2');
    // The sandbox now says it is r2, to this agent (the next save's expectedRevision) and to VS Code alike.
    const listed = ok<{ sandboxes: { sandbox: string; sessionRevision?: unknown }[] }>(await call('sandbox_list', {}));
    assert.deepEqual(listed.sandboxes.find((s) => s.sandbox === sandbox)?.sessionRevision, { sessionId: 'mcp-demo', revision: 'r2', how: 'saved' });
    assert.match(toolError(await call('session_save', { sandbox, sessionId: 'mcp-demo', expectedRevision: 'r1' })), /^conflict: .*revision_conflict/);
  });

  it('session_diff lists what the sandbox changed since a revision (default: the head), and commits nothing', async () => {
    type Diff = { sessionId: string; revision: string; changes: { path: string; status: string }[]; total: number; unchanged: number };
    const none = ok<Diff>(await call('session_diff', { sandbox, sessionId: 'mcp-demo' }));
    assert.deepEqual([none.revision, none.changes, none.unchanged], ['r2', [], 2]);
    const sinceR1 = ok<Diff>(await call('session_diff', { sandbox, sessionId: 'mcp-demo', revision: 'r1' }));
    assert.deepEqual(sinceR1.changes, [{ path: 'src/app.txt', status: 'modified' }]);
    ok(await call('sandbox_write_file', { sandbox, path: 'notes.md', contents: 'new\n' }));
    const added = ok<Diff>(await call('session_diff', { sandbox, sessionId: 'mcp-demo' }));
    assert.deepEqual([added.changes, added.total], [[{ path: 'notes.md', status: 'added' }], 1]);
    assert.match(toolError(await call('session_diff', { sandbox, sessionId: 'mcp-demo', revision: 'r9' })), /^not_found: /);
    assert.match(toolError(await call('session_diff', { sandbox, sessionId: 'no-such-session' })), /^not_found: /);
    ok(await call('sandbox_exec', { sandbox, argv: ['rm', 'notes.md'] }));
    const heads = ok<Diff>(await call('session_diff', { sandbox, sessionId: 'mcp-demo' }));
    assert.deepEqual([heads.revision, heads.total], ['r2', 0], 'the head is still r2: nothing was committed');
    // Without a session: the revision the sandbox was last saved as.
    const own = ok<Diff>(await call('session_diff', { sandbox }));
    assert.deepEqual([own.sessionId, own.revision, own.total], ['mcp-demo', 'r2', 0]);
  });

  it('session_diff of a sandbox with no revision: since it was opened (its opening snapshot, taken by the first call)', async () => {
    type SinceOpened = { since: string; openedAt: string; taken: boolean; changes: { path: string; status: string }[]; total: number; unchanged: number };
    const fresh = ok<{ sandbox: string }>(await call('sandbox_create', { runtime: 'process', leaseTimeoutSeconds: 600 })).sandbox;
    ok(await call('sandbox_write_file', { sandbox: fresh, path: 'plan.md', contents: 'step one\n' }));
    const first = ok<SinceOpened>(await call('session_diff', { sandbox: fresh }));
    assert.deepEqual([first.since, first.taken, first.changes, first.unchanged], ['opened', true, [], 1]);
    ok(await call('sandbox_write_file', { sandbox: fresh, path: 'plan.md', contents: 'step two\n' }));
    const later = ok<SinceOpened>(await call('session_diff', { sandbox: fresh }));
    assert.deepEqual([later.openedAt, later.taken, later.changes], [first.openedAt, false, [{ path: 'plan.md', status: 'modified' }]]);
    ok(await call('sandbox_cancel', { sandbox: fresh }));
  });

  it('session_open_revision opens r1 in a new sandbox of the agent, holding r1 files', async () => {
    const opened = ok<{ sandbox: string; revision: string; createdByThisServer: boolean; phase: string }>(
      await call('session_open_revision', { sessionId: 'mcp-demo', revision: 'r1', runtime: 'process' }),
    );
    assert.notEqual(opened.sandbox, sandbox);
    assert.deepEqual([opened.revision, opened.createdByThisServer, opened.phase], ['r1', true, 'Ready']);
    assert.deepEqual((opened as { sessionRevision?: unknown }).sessionRevision, { sessionId: 'mcp-demo', revision: 'r1', how: 'opened' });
    const file = ok<{ contents: string }>(await call('sandbox_read_file', { sandbox: opened.sandbox, path: 'src/app.txt' }));
    assert.equal(file.contents, 'version one\n');
    assert.match(toolError(await call('session_open_revision', { sessionId: 'mcp-demo', revision: 'r7', runtime: 'process' })), /^not_found: /);
  });

  it('session_fork forks at a named revision, and the same forkId returns the same target', async () => {
    const fork = ok<{ target: { sessionId: string; revision: string }; forkedFrom: { revision: string }; deduplicated: boolean }>(
      await call('session_fork', { forkId: 'f-1', sessionId: 'mcp-demo', revision: 'r1', targetSessionId: 'mcp-demo-fork' }),
    );
    assert.deepEqual([fork.target, fork.forkedFrom.revision, fork.deduplicated], [{ sessionId: 'mcp-demo-fork', revision: 'r1' }, 'r1', false]);
    const again = ok<{ target: { sessionId: string }; deduplicated: boolean }>(
      await call('session_fork', { forkId: 'f-1', sessionId: 'mcp-demo', revision: 'r1', targetSessionId: 'mcp-demo-fork' }),
    );
    assert.deepEqual([again.target.sessionId, again.deduplicated], ['mcp-demo-fork', true]);
    assert.match(toolError(await call('session_fork', { forkId: 'f-2', sessionId: 'mcp-demo', revision: 'r9' })), /^not_found: .*source_revision_not_available/);
  });

  it('session_activate runs one agent turn, streams its events as progress and commits', async () => {
    const messages: string[] = [];
    const result = ok<{ commit: string; revision: string; outcome: { status: string } }>(
      await client.callTool(
        { name: 'session_activate', arguments: { sessionId: 'mcp-agent', activationId: 'a-1', message: 'hello from MCP', runtime: 'process' } },
        undefined,
        { onprogress: (p) => void (p.message && messages.push(p.message)) },
      ),
    );
    assert.deepEqual([result.commit, result.revision, result.outcome.status], ['committed', 'r1', 'completed']);
    assert.ok(messages.some((m) => m.startsWith('{') && (JSON.parse(m) as { type?: string }).type === 'start'), messages.join('\n'));
    assert.match(toolError(await call('session_activate', { sessionId: 'mcp-agent', activationId: 'a-2', runtime: 'process' })), /^invalid_argument: give exactly one of message/);
  });

  it('lists the sandbox:// template and the sandboxes as resources, and reads files and directories', async () => {
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), ['sandbox://{sandbox}/', 'sandbox://{sandbox}/{+path}']);
    const { resources } = await client.listResources();
    assert.ok(resources.some((r) => r.uri === `sandbox://${sandbox}/`), JSON.stringify(resources));
    const text = await client.readResource({ uri: `sandbox://${sandbox}/src/app.txt` });
    assert.deepEqual(text.contents, [{ uri: `sandbox://${sandbox}/src/app.txt`, mimeType: 'text/plain', text: 'version two\n' }]);
    const blob = await client.readResource({ uri: `sandbox://${sandbox}/src/blob.bin` });
    assert.equal((blob.contents[0] as { blob?: string }).blob, Buffer.from([0xff, 0xfe, 0x00]).toString('base64'));
    const root = await client.readResource({ uri: `sandbox://${sandbox}/` });
    assert.equal((root.contents[0] as { text?: string }).text, 'src/\n');
    const dir = await client.readResource({ uri: `sandbox://${sandbox}/src/` });
    assert.equal((dir.contents[0] as { text?: string }).text, 'app.txt\nblob.bin\n');
    await assert.rejects(client.readResource({ uri: `sandbox://${sandbox}/src/missing.txt` }), (e: unknown) => e instanceof McpError && e.code === -32002 && /not_found/.test(e.message));
  });

  it('refuses to save, or read as a resource, a sandbox it neither created nor was granted', async () => {
    const handle = await findGateway(stateDir);
    assert.ok(handle);
    const api = new LocalGatewayClient(handle.url, handle.token);
    const other = await api.createRun('default', sessionRunBody({ provider: 'local', namespace: 'default', runtime: 'process' }));
    const name = other.metadata.name!;
    await api.waitPhase('default', name, ['Ready']);
    const key = `local.local.default.${name}`;
    assert.match(toolError(await call('session_save', { sandbox: key, sessionId: 'stolen' })), /^not_granted: /);
    assert.match(toolError(await call('session_diff', { sandbox: key, sessionId: 'mcp-demo' })), /^not_granted: /);
    await assert.rejects(client.readResource({ uri: `sandbox://${key}/` }), (e: unknown) => e instanceof McpError && /not_granted/.test(e.message));
    const { sessions } = { sessions: fs.existsSync(path.join(work, 'repository')) ? fs.readdirSync(path.join(work, 'repository'), { recursive: true }).map(String) : [] };
    assert.ok(!sessions.some((s) => s.includes('stolen')), 'no session was created for the refused save');
  });
});
