// The window's sandbox file system while a local sandbox is Finalizing (a Drain waits for a running command): its
// gateway answers 409 to every call, so a file the window never read — a search result, say — is read through
// the companion server (`sandboxes/files/*`, the workspace read in place) instead — also by a window that has not
// heard of the Drain yet (the gateway's 409 sends it there). While the sandbox is Ready the gateway is used and the
// companion is not asked. A real companion server and local gateway; SandboxFiles as the
// window builds it, its connection's companion calls sent over JSON-RPC as the registry sends them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ResponseError } from 'vscode-jsonrpc/node';
import { FsError, SandboxFiles } from '../../../extension/fs/sandboxFiles';
import type { SandboxFileReads } from '../../../extension/fs/companionFileReads';
import type { LiveSandboxConnection } from '../../../extension/sandboxes/connection';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import type { RunPhase } from '../../../protocol/kruntimes/run';
import type { SandboxConnection, SandboxSummary } from '../../../protocol/sandboxes';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { StateLayout } from '../../../server/local/stateRoot';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';
import { until } from '../../fixtures/waits';

/** A companion failure as the extension's CompanionRequestError carries it: the stable code and cause. */
class CompanionFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
  }
}

describe('sandbox files of a Finalizing local sandbox (read through the companion)', function () {
  this.timeout(90_000);
  let work: string;
  let server: CompanionProcess;
  let sandbox: SandboxSummary;
  let client: GatewayClient;
  let running: Promise<unknown> | undefined;
  let hostDir: string;
  let phase: RunPhase = 'Ready';
  let companionCalls = 0;
  const big = Buffer.alloc(1_500_000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31) % 251;

  const request = async <T>(method: string, params: unknown): Promise<T> => {
    try {
      return (await server.connection.sendRequest(method, params)) as T;
    } catch (err) {
      if (!(err instanceof ResponseError)) throw err;
      const data = err.data as { code: string; cause?: string };
      throw new CompanionFailure(data.code, err.message, data.cause);
    }
  };

  function connection(withCompanion: boolean, knownPhase: () => RunPhase = () => phase): LiveSandboxConnection {
    const fileReads: SandboxFileReads = {
      list: (p, pageToken) => (companionCalls++, request('sandboxes/files/list', { ref: sandbox.ref, path: p, pageToken })),
      read: (p, offset, length) => (companionCalls++, request('sandboxes/files/read', { ref: sandbox.ref, path: p, offset, length })),
    };
    return {
      key: 'local/test',
      label: sandbox.ref.name,
      client: () => Promise.resolve(client),
      invalidate: () => undefined,
      capabilities: () => undefined,
      phase: knownPhase,
      hold: () => ({ dispose: () => undefined }),
      ...(withCompanion ? { fileReads } : {}),
    };
  }

  before(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'files-finalizing-'));
    server = spawnCompanion({ SANDBOX_SESSIONS_STATE_DIR: path.join(work, 'state') });
    await server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 });
    ({ sandbox } = await request<{ sandbox: SandboxSummary }>('sandboxes/create', { spec: { provider: 'local', runtime: 'process', namespace: 'default' } }));
    hostDir = new StateLayout(path.join(work, 'state')).workspaceDir(sandbox.uid as string);
    fs.mkdirSync(path.join(hostDir, 'src/deep'), { recursive: true });
    fs.writeFileSync(path.join(hostDir, 'src/seen.ts'), 'read while Ready\n');
    fs.writeFileSync(path.join(hostDir, 'src/deep/widgetFactory.ts'), 'line one\nconst finalNeedle = 1;\n');
    fs.writeFileSync(path.join(hostDir, 'src/deep/big.bin'), big);
    const c = await request<SandboxConnection>('sandboxes/open', { ref: sandbox.ref });
    client = new GatewayClient({ endpoint: c.endpoint, token: c.token });
  });

  after(async () => {
    if (hostDir) fs.writeFileSync(path.join(hostDir, 'release'), '');
    await running?.catch(() => undefined);
    await client?.close();
    await server?.stop();
    await stopGateway({ stateDir: path.join(work, 'state') });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('uses the gateway while Ready, then reads what it never read through the companion once Finalizing', async () => {
    const files = new SandboxFiles(connection(true));
    const bare = new SandboxFiles(connection(false));
    // A window that has not heard of the Drain yet (the phase arrives by notification).
    const behind = new SandboxFiles(connection(true, () => 'Ready'));
    // Ready: the Explorer lists the root and src, and one file is opened — all through the gateway.
    assert.deepEqual((await files.readDirectory('')).map(([n]) => n), ['src']);
    assert.equal(Buffer.from(await files.readFile('src/seen.ts')).toString(), 'read while Ready\n');
    assert.deepEqual((await bare.readDirectory('src')).map(([n]) => n).sort(), ['deep', 'seen.ts']);
    assert.equal(companionCalls, 0, 'a Ready sandbox is read through its gateway');
    const gatewayReads = files.counters.reads;

    // A command runs until the test lets it end; the Drain waits for it (Finalizing meanwhile).
    running = client.execute({ command: { shell: ': > started; while [ ! -e release ]; do sleep 0.05; done' } });
    await until('the command runs', () => fs.existsSync(path.join(hostDir, 'started')));
    await request('sandboxes/terminate', { ref: sandbox.ref, mode: 'Drain', wait: false });
    await until('the sandbox is Finalizing', async () => {
      phase = (await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: sandbox.ref })).sandbox.phase as RunPhase;
      return phase === 'Finalizing';
    });
    await assert.rejects(client.read('src/deep/widgetFactory.ts'), (e: unknown) => e instanceof GatewayError && e.status === 409, 'the gateway refuses reads now');

    // What the window never read before: a search result in a folder it never listed.
    const info = await files.stat('src/deep/widgetFactory.ts');
    assert.deepEqual([info.type, info.size, info.readonly], ['file', 32, true]);
    assert.equal(Buffer.from(await files.readFile('src/deep/widgetFactory.ts')).toString(), 'line one\nconst finalNeedle = 1;\n');
    assert.deepEqual((await files.readDirectory('src/deep')).sort(), [['big.bin', 'file'], ['widgetFactory.ts', 'file']].sort());
    // Larger than one read: in ranges, byte for byte.
    assert.ok(Buffer.from(await files.readFile('src/deep/big.bin')).equals(big));
    assert.ok(companionCalls >= 4, `read through the companion (${companionCalls} calls)`);
    assert.equal(files.counters.reads - gatewayReads, 1 + 2, 'widgetFactory.ts in one read, big.bin in two ranges');
    // What it read while Ready still answers from the cache; a missing file is not found; nothing can change.
    assert.equal(Buffer.from(await files.readFile('src/seen.ts')).toString(), 'read while Ready\n');
    await assert.rejects(files.stat('src/deep/missing.ts'), (e: unknown) => e instanceof FsError && e.kind === 'FileNotFound');
    await assert.rejects(files.writeFile('src/deep/new.ts', Buffer.from('x'), { create: true, overwrite: false }), (e: unknown) => e instanceof FsError && e.kind === 'NoPermissions');

    // A window that still thinks the sandbox is Ready: the gateway's 409 sends it to the companion too.
    const callsBefore = companionCalls;
    assert.deepEqual((await behind.readDirectory('src/deep')).map(([n]) => n).sort(), ['big.bin', 'widgetFactory.ts']);
    assert.equal(Buffer.from(await behind.readFile('src/deep/widgetFactory.ts')).toString(), 'line one\nconst finalNeedle = 1;\n');
    assert.equal(companionCalls - callsBefore, 2, 'one listing and one read through the companion');
    await assert.rejects(behind.stat('src/deep/missing.ts'), (e: unknown) => e instanceof FsError && e.kind === 'FileNotFound');

    // Without the companion's reads (the window before this fallback) the same file cannot be opened.
    await assert.rejects(bare.readFile('src/deep/widgetFactory.ts'), (e: unknown) => e instanceof FsError && e.kind === 'NoPermissions');
    assert.equal((await request<{ sandbox: SandboxSummary }>('sandboxes/get', { ref: sandbox.ref })).sandbox.phase, 'Finalizing', 'still Finalizing when read');
  });
});
