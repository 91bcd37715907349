// The 20 golden cases of shared/specs/opensandbox.md §8, driven through the official SDK
// (@alibaba-group/opensandbox 0.1.11) as the client. Where the SDK cannot produce the request
// (a multipart part without a filename, a non-numeric port) its own lifecycle/execd plumbing or
// the endpoint it resolved is used, so the bytes still go where the SDK sends them.
import assert from 'node:assert/strict';
import { SandboxApiException, SandboxManager, createDefaultAdapterFactory, type Sandbox } from '@alibaba-group/opensandbox';
import { connection, SandboxPool, startTarget, type Target } from './target';

async function apiError(p: Promise<unknown>): Promise<SandboxApiException> {
  try {
    await p;
  } catch (e) {
    if (e instanceof SandboxApiException) return e;
    throw e;
  }
  assert.fail('expected a SandboxApiException');
}

function raw(e: SandboxApiException): Record<string, unknown> {
  return (typeof e.rawBody === 'string' ? JSON.parse(e.rawBody) : e.rawBody) as Record<string, unknown>;
}

describe('opensandbox golden cases (spec §8) through the SDK', function () {
  this.timeout(60_000);
  let target: Target;
  let pool: SandboxPool;
  let sbx: Sandbox;

  before(async () => {
    target = await startTarget();
    pool = new SandboxPool(target);
    sbx = await pool.create();
  });
  after(async () => {
    await pool?.killAll();
    await target?.simulator?.close();
  });

  it('#1 a call without an API key is 401 MISSING_API_KEY', async () => {
    const mgr = SandboxManager.create({ connectionConfig: connection(target, { apiKey: '' }) });
    const e = await apiError(mgr.listSandboxInfos());
    assert.equal(e.statusCode, 401);
    assert.equal(e.error.code, 'MISSING_API_KEY');
    assert.equal(typeof raw(e).message, 'string');
    await mgr.close();
  });

  it('#2 a wrong API key is 401 INVALID_API_KEY', async () => {
    const mgr = SandboxManager.create({ connectionConfig: connection(target, { apiKey: `${target.apiKey}x` }) });
    const e = await apiError(mgr.getSandboxInfo(sbx.id));
    assert.equal(e.statusCode, 401);
    assert.equal(e.error.code, 'INVALID_API_KEY');
    await mgr.close();
  });

  it('#3 a timeout under 60 s is a FastAPI 422 {detail:[…]} (SDK code UNEXPECTED_RESPONSE)', async () => {
    const e = await apiError(pool.create({ timeoutSeconds: 10 }));
    assert.equal(e.statusCode, 422);
    assert.equal(e.error.code, 'UNEXPECTED_RESPONSE');
    const detail = raw(e).detail as { loc: unknown[] }[];
    assert.ok(Array.isArray(detail) && detail.length > 0);
    assert.ok(detail.some((d) => d.loc.includes('timeout')));
  });

  it('#4 create with the SDK default body answers 202 Running, without image', async () => {
    const conn = connection(target);
    const { sandboxes } = createDefaultAdapterFactory().createLifecycleStack({ connectionConfig: conn, lifecycleBaseUrl: conn.getBaseUrl() });
    const created = (await sandboxes.createSandbox({
      image: { uri: target.image },
      entrypoint: ['tail', '-f', '/dev/null'],
      resourceLimits: { cpu: '1', memory: '2Gi' },
      timeout: 600,
      env: {},
      metadata: { 'sandbox-sessions.test': 'opensandbox' },
      extensions: {},
      secureAccess: false,
    } as Parameters<typeof sandboxes.createSandbox>[0])) as unknown as Record<string, unknown>;
    try {
      assert.match(String(created.id), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal((created.status as { state: string }).state, 'Running');
      assert.deepEqual(created.metadata, { 'sandbox-sessions.test': 'opensandbox' });
      assert.deepEqual(created.entrypoint, ['tail', '-f', '/dev/null']);
      assert.ok(created.expiresAt && created.createdAt);
      assert.equal('image' in created, false);
    } finally {
      await sandboxes.deleteSandbox(String(created.id));
      await conn.closeTransport();
    }
  });

  it('#5 an unknown sandbox is 404 with exactly {code, message}', async () => {
    const mgr = SandboxManager.create({ connectionConfig: connection(target) });
    const e = await apiError(mgr.getSandboxInfo('missing'));
    assert.equal(e.statusCode, 404);
    assert.match(e.error.code, /::SANDBOX_NOT_FOUND$/);
    assert.deepEqual(Object.keys(raw(e)).sort(), ['code', 'message']);
    await mgr.close();
  });

  it('#6 use_server_proxy gives <host>/sandboxes/{id}/proxy/44772, and commands work through it', async () => {
    const conn = connection(target, { useServerProxy: true });
    const viaProxy = await pool.create({}, conn);
    const ep = await viaProxy.getEndpoint(44772);
    assert.ok(ep.endpoint.endsWith(`/sandboxes/${viaProxy.id}/proxy/44772`), ep.endpoint);
    assert.ok(!/^https?:/.test(ep.endpoint), 'no scheme');
    const run = await viaProxy.commands.run('echo through-proxy');
    assert.equal(run.logs.stdout.map((l) => l.text).join('\n'), 'through-proxy');
  });

  it('#7 use_server_proxy with expires is 400 SANDBOX::INVALID_PARAMETER', async () => {
    const conn = connection(target, { useServerProxy: true });
    const url = `${conn.getBaseUrl()}/sandboxes/${sbx.id}/endpoints/44772?use_server_proxy=true&expires=2000000000`;
    // The 0.1.11 signed-endpoint call never sets use_server_proxy; the query is the spec's.
    const res = await fetch(url, { headers: conn.headers });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { code: string }).code, 'SANDBOX::INVALID_PARAMETER');
    await conn.closeTransport();
  });

  it('#8 a non-numeric port is 422', async () => {
    const conn = connection(target);
    const { sandboxes } = createDefaultAdapterFactory().createLifecycleStack({ connectionConfig: conn, lifecycleBaseUrl: conn.getBaseUrl() });
    const e = await apiError(sandboxes.getSandboxEndpoint(sbx.id, 'abc' as unknown as number, false));
    assert.equal(e.statusCode, 422);
    await conn.closeTransport();
  });

  it('#9 renewing to a time in the past is 400 DOCKER::INVALID_EXPIRATION', async () => {
    const e = await apiError(sbx.renew(-365 * 24 * 3600));
    assert.equal(e.statusCode, 400);
    assert.match(e.error.code, /::INVALID_EXPIRATION$/);
  });

  it('#10 kill answers 204, then the sandbox is 404', async () => {
    const doomed = await pool.create();
    await doomed.kill();
    const e = await apiError(doomed.getInfo());
    assert.equal(e.statusCode, 404);
  });

  it('#11 execd /ping is 200 with an empty body', async () => {
    assert.equal(await sbx.isHealthy(), true);
    const ep = await sbx.getEndpoint(44772);
    const res = await fetch(`http://${ep.endpoint}/ping`, { headers: ep.headers ?? {} });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '');
  });

  it('#12 a failing command streams init, stdout, then error with evalue 3 (exitCode 3, no throw)', async () => {
    const events: { type: string }[] = [];
    const ex = await sbx.commands.run('echo hi; exit 3', {}, { onEvent: (ev) => void events.push(ev as { type: string }) });
    assert.equal(ex.exitCode, 3);
    assert.match(String(ex.id), /^[0-9a-f]{32}$/);
    assert.deepEqual(ex.logs.stdout.map((l) => l.text), ['hi']);
    assert.equal(ex.error?.value, '3');
    assert.deepEqual(ex.error?.traceback, ['exit status 3']);
    assert.equal(ex.complete, undefined);
    const types = events.map((e) => e.type).filter((t) => t !== 'ping');
    assert.deepEqual(types, ['init', 'stdout', 'error']);
  });

  it('#13 a succeeding command streams init, stdout, execution_complete (exitCode 0)', async () => {
    const ex = await sbx.commands.run('echo ok');
    assert.equal(ex.exitCode, 0);
    assert.deepEqual(ex.logs.stdout.map((l) => l.text), ['ok']);
    assert.ok(ex.complete);
    assert.equal(ex.error, undefined);
  });

  it('#14 a missing working directory is 400 INVALID_REQUEST_BODY "invalid request, validation error…"', async () => {
    const e = await apiError(sbx.commands.run('pwd', { workingDirectory: '/nope' }));
    assert.equal(e.statusCode, 400);
    assert.equal(e.error.code, 'INVALID_REQUEST_BODY');
    assert.match(String(e.error.message), /^invalid request, validation error/);
  });

  it('#15 interrupting an unknown command is 500 RUNTIME_ERROR', async () => {
    const e = await apiError(sbx.commands.interrupt('0123456789abcdef0123456789abcdef'));
    assert.equal(e.statusCode, 500);
    assert.equal(e.error.code, 'RUNTIME_ERROR');
  });

  it('#16 the status of an unknown command is 404 INVALID_REQUEST_BODY "command not found: <id>"', async () => {
    const e = await apiError(sbx.commands.getCommandStatus('nope'));
    assert.equal(e.statusCode, 404);
    assert.equal(e.error.code, 'INVALID_REQUEST_BODY');
    assert.equal(e.error.message, 'command not found: nope');
  });

  it('#17 an upload whose metadata part has no filename is 400 INVALID_FILE_METADATA', async () => {
    const ep = await sbx.getEndpoint(44772);
    const form = new FormData();
    form.append('metadata', JSON.stringify({ path: '/tmp/x' }));
    form.append('file', new Blob(['x']), 'x');
    const res = await fetch(`http://${ep.endpoint}/files/upload`, { method: 'POST', body: form, headers: ep.headers ?? {} });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), { code: 'INVALID_FILE_METADATA', message: 'metadata file is missing' });
  });

  it('#18 a Range download is 206 with Content-Range', async () => {
    await sbx.files.writeFiles([{ path: '/tmp/range.txt', data: '0123456789' }]);
    const bytes = await sbx.files.readBytes('/tmp/range.txt', { range: 'bytes=0-4' });
    assert.equal(Buffer.from(bytes).toString(), '01234');
    const ep = await sbx.getEndpoint(44772);
    const res = await fetch(`http://${ep.endpoint}/files/download?path=/tmp/range.txt`, { headers: { ...(ep.headers ?? {}), Range: 'bytes=0-4' } });
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), 'bytes 0-4/10');
    assert.equal(await res.text(), '01234');
  });

  it('#19 listing: depth 0 → [], missing → 404, a file → 400, depth -1 → 400', async () => {
    await sbx.files.createDirectories([{ path: '/tmp/listme' }]);
    assert.deepEqual(await sbx.files.listDirectory({ path: '/tmp/listme', depth: 0 }), []);
    assert.equal((await apiError(sbx.files.listDirectory({ path: '/not/exists' }))).statusCode, 404);
    assert.equal((await apiError(sbx.files.listDirectory({ path: '/tmp/range.txt' }))).statusCode, 400);
    assert.equal((await apiError(sbx.files.listDirectory({ path: '/tmp/listme', depth: -1 }))).statusCode, 400);
  });

  it('#20 info on a missing path is 404 FILE_NOT_FOUND', async () => {
    const e = await apiError(sbx.files.getFileInfo(['/missing']));
    assert.equal(e.statusCode, 404);
    assert.equal(e.error.code, 'FILE_NOT_FOUND');
  });

  it('extra: mv onto an existing destination is 500; background logs use byte cursors', async () => {
    await sbx.files.writeFiles([{ path: '/tmp/a1', data: 'a' }, { path: '/tmp/b1', data: 'b' }]);
    assert.equal((await apiError(sbx.files.moveFiles([{ src: '/tmp/a1', dest: '/tmp/b1' }]))).statusCode, 500);
    const bg = await sbx.commands.run('echo a; echo b', { background: true });
    const id = bg.id as string;
    for (let status = await sbx.commands.getCommandStatus(id); status.running; status = await sbx.commands.getCommandStatus(id)) {
      await new Promise((r) => setTimeout(r, 50)); // polling interval while the background command finishes
    }
    const logs = await sbx.commands.getBackgroundCommandLogs(id);
    assert.equal(logs.content, 'a\nb\n');
    assert.equal(logs.cursor, 4);
    const rest = await sbx.commands.getBackgroundCommandLogs(id, 2);
    assert.equal(rest.content, 'b\n');
  });
});
