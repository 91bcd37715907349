// `sandboxes/files/*` (stat, list, read): a local sandbox's files read by the companion while it is Finalizing —
// when its gateway answers 409 to every call — over the real stdio server on the real local runtime, confined to
// the workspace (`..`, absolute paths and symbolic links leading out are refused and nothing outside is read);
// and a kruntimes sandbox (cluster simulator), whose files are not on this machine, gets the stable refusal.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { SANDBOX_FILES_UNREADABLE } from '../../../protocol/companion/files';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import type { SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import { CompanionError } from '../../../protocol/companion';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { StateLayout } from '../../../server/local/stateRoot';
import type { RequestContext } from '../../../server/rpc/companionServer';
import type { Services } from '../../../server/rpc/handlers/context';
import { fileHandlers } from '../../../server/rpc/handlers/files';
import { startClusterTarget, type ClusterTarget } from '../../fixtures/cluster/target';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';
import { until } from '../../fixtures/waits';

const SECRET = 'outside-secret-7f3a';

describe('companion server: a local sandbox’s files while it is Finalizing (sandboxes/files/*)', function () {
  this.timeout(90_000);
  let work: string;
  let outside: string;
  let server: CompanionProcess;
  let sandbox: SandboxSummary;
  let client: GatewayClient;
  let running: Promise<unknown>;
  let hostDir: string;

  const request = <T>(method: string, params: unknown) => server.connection.sendRequest(method, params) as Promise<T>;
  const rejectsWith = async (p: Promise<unknown>, code: string, cause?: string) => {
    await assert.rejects(p, (e: unknown) => {
      assert.ok(e instanceof ResponseError, String(e));
      const data = e.data as { code: string; cause?: string };
      assert.equal(data.code, code, e.message);
      if (cause !== undefined) assert.equal(data.cause, cause, e.message);
      assert.ok(!e.message.includes(SECRET), `nothing outside is read: ${e.message}`);
      return true;
    });
  };

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'companion-files-'));
    outside = path.join(work, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'secret.txt'), SECRET);
    server = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
    ({ sandbox } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default' } }));
    hostDir = new StateLayout(path.join(work, 'state')).workspaceDir(sandbox.uid as string);
    fs.mkdirSync(path.join(hostDir, 'src/deep'), { recursive: true });
    fs.writeFileSync(path.join(hostDir, 'src/deep/widget.ts'), 'line one\nconst finalNeedle = 1;\n');
    fs.writeFileSync(path.join(hostDir, 'big.bin'), Buffer.alloc(1_000_000, 7));
    fs.symlinkSync('src/deep/widget.ts', path.join(hostDir, 'inside-link'));
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(hostDir, 'out-file'));
    fs.symlinkSync(outside, path.join(hostDir, 'out-dir'));
    fs.symlinkSync('../../../../outside/secret.txt', path.join(hostDir, 'src/rel-out'));

    const connection = await request<SandboxConnection>('sandboxes/open', { ref: sandbox.ref });
    client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    // A command that runs until the test lets it end: the Drain waits for it (Finalizing meanwhile).
    running = client.execute({ command: { shell: ': > started; while [ ! -e release ]; do sleep 0.05; done; rm -f started release' } });
    await until('the command runs', () => fs.existsSync(path.join(hostDir, 'started')));
    await request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Drain', wait: false });
    await until('the sandbox is Finalizing', async () => (await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: sandbox.ref })).sandbox.phase === 'Finalizing');
  });

  after(async () => {
    if (hostDir) fs.writeFileSync(path.join(hostDir, 'release'), '');
    await running?.catch(() => undefined);
    await client?.close();
    await server?.stop();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('the gateway refuses reads meanwhile (why these methods exist)', async () => {
    await assert.rejects(client.read('src/deep/widget.ts'), (e: unknown) => e instanceof GatewayError && e.status === 409);
  });

  it('lists folders, stats and reads files in place', async () => {
    const root = await request<{ entries: { name: string; type: string; sizeBytes: number }[]; nextPageToken: string }>('sandboxes/files/list', {
      ref: sandbox.ref,
      path: '',
    });
    assert.equal(root.nextPageToken, '');
    assert.deepEqual(
      root.entries.map((e) => `${e.name}:${e.type}`),
      ['big.bin:file', 'inside-link:symlink', 'out-dir:symlink', 'out-file:symlink', 'src:directory', 'started:file'],
    );
    const stat = await request<{ type: string; sizeBytes: number }>('sandboxes/files/stat', { ref: sandbox.ref, path: 'src/deep/widget.ts' });
    assert.deepEqual([stat.type, stat.sizeBytes], ['file', 32]);
    assert.equal((await request<{ type: string }>('sandboxes/files/stat', { ref: sandbox.ref, path: 'src' })).type, 'directory');

    const read = await request<{ contents: string; size: number; truncated: boolean }>('sandboxes/files/read', { ref: sandbox.ref, path: 'src/deep/widget.ts' });
    assert.equal(Buffer.from(read.contents, 'base64').toString(), 'line one\nconst finalNeedle = 1;\n');
    assert.deepEqual([read.size, read.truncated], [32, false]);
    // A link that stays inside is followed, as the gateway's file API does.
    const viaLink = await request<{ contents: string }>('sandboxes/files/read', { ref: sandbox.ref, path: 'inside-link' });
    assert.equal(Buffer.from(viaLink.contents, 'base64').toString(), 'line one\nconst finalNeedle = 1;\n');
    assert.equal((await request<{ type: string }>('sandboxes/files/stat', { ref: sandbox.ref, path: 'inside-link' })).type, 'file');
  });

  it('reads a large file in bounded ranges', async () => {
    const first = await request<{ contents: string; size: number; truncated: boolean }>('sandboxes/files/read', { ref: sandbox.ref, path: 'big.bin' });
    assert.equal(Buffer.from(first.contents, 'base64').length, 786_000);
    assert.deepEqual([first.size, first.truncated], [1_000_000, true]);
    const rest = await request<{ contents: string; truncated: boolean }>('sandboxes/files/read', { ref: sandbox.ref, path: 'big.bin', offset: 786_000 });
    assert.equal(Buffer.from(rest.contents, 'base64').length, 214_000);
    assert.equal(rest.truncated, false);
    await rejectsWith(request('sandboxes/files/read', { ref: sandbox.ref, path: 'big.bin', length: 786_001 }), 'invalid_params');
  });

  it('pages a folder byte-wise by name', async () => {
    const first = await request<{ entries: { name: string }[]; nextPageToken: string }>('sandboxes/files/list', { ref: sandbox.ref, path: '', limit: 4 });
    assert.deepEqual(first.entries.map((e) => e.name), ['big.bin', 'inside-link', 'out-dir', 'out-file']);
    assert.notEqual(first.nextPageToken, '');
    const second = await request<{ entries: { name: string }[]; nextPageToken: string }>('sandboxes/files/list', {
      ref: sandbox.ref,
      path: '',
      limit: 4,
      pageToken: first.nextPageToken,
    });
    assert.deepEqual(second.entries.map((e) => e.name), ['src', 'started']);
    assert.equal(second.nextPageToken, '');
  });

  it('refuses `..`, absolute paths and symbolic links leading out; nothing outside is read', async () => {
    const ref = sandbox.ref;
    for (const p of ['../../../outside/secret.txt', 'src/../../x', '..']) {
      await rejectsWith(request('sandboxes/files/read', { ref, path: p }), 'invalid_params', 'path_refused');
      await rejectsWith(request('sandboxes/files/list', { ref, path: p }), 'invalid_params', 'path_refused');
    }
    await rejectsWith(request('sandboxes/files/read', { ref, path: path.join(outside, 'secret.txt') }), 'invalid_params', 'path_refused');
    await rejectsWith(request('sandboxes/files/stat', { ref, path: '/etc/passwd' }), 'invalid_params', 'path_refused');
    for (const p of ['out-file', 'out-dir/secret.txt', 'src/rel-out']) {
      await rejectsWith(request('sandboxes/files/read', { ref, path: p }), 'invalid_params', 'path_refused');
      await rejectsWith(request('sandboxes/files/stat', { ref, path: p }), 'invalid_params', 'path_refused');
    }
    await rejectsWith(request('sandboxes/files/list', { ref, path: 'out-dir' }), 'invalid_params', 'path_refused');
    await rejectsWith(request('sandboxes/files/read', { ref, path: 'src/missing.ts' }), 'not_found');
    await rejectsWith(request('sandboxes/files/read', { ref, path: 'src' }), 'invalid_params', 'is_a_directory');
  });

  it('still Finalizing when read (a Drain waits for the running command)', async () => {
    assert.equal((await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: sandbox.ref })).sandbox.phase, 'Finalizing');
  });
});

describe('sandboxes/files/*: a kruntimes sandbox’s files are not on this machine (simulator)', function () {
  this.timeout(120_000);
  let target: ClusterTarget;

  before(async () => {
    target = await startClusterTarget({ era: 'D' });
  });

  after(async () => {
    await target?.stop();
  });

  it('refuses with not_ready / sandbox_files_unreadable, even while Ready', async () => {
    const provider = target.provider();
    const { ref, phase } = await provider.create(target.spec(), { waitForReady: true });
    assert.equal(phase, 'Ready');
    const handlers = fileHandlers({ providers: new Map([['kruntimes', provider]]) } as unknown as Services);
    const ctx = {} as RequestContext;
    const refused = (e: unknown) => {
      assert.ok(e instanceof CompanionError, String(e));
      assert.equal(e.code, 'not_ready');
      assert.equal(e.causeCode, SANDBOX_FILES_UNREADABLE);
      assert.match(e.message, /read them through its gateway/);
      return true;
    };
    await assert.rejects(handlers['sandboxes/files/read']({ ref, path: 'a.txt', offset: 0, length: 10 }, ctx), refused);
    await assert.rejects(handlers['sandboxes/files/list']({ ref, path: '', limit: 10, pageToken: '' }, ctx), refused);
    await assert.rejects(handlers['sandboxes/files/stat']({ ref, path: '' }, ctx), refused);
  });
});
