// The companion server over real stdio: the handshake, and that bad input — unknown methods,
// invalid params, malformed JSON, huge or unframed garbage — is answered or skipped while the
// server stays up for the next valid request.
import assert from 'node:assert/strict';
import { ResponseError } from 'vscode-jsonrpc/node';
import { companionMethods, DEFAULT_CLIENT_NAME, JsonRpcErrorNumber } from '../../../protocol/companion';
import { type CompanionProcess, spawnCompanion } from '../../fixtures/companionProcess';

const frame = (body: string | Buffer) => {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([Buffer.from(`Content-Length: ${bytes.length}\r\n\r\n`), bytes]);
};

describe('companion server: JSON-RPC over stdio', function () {
  this.timeout(30_000);
  let server: CompanionProcess;

  const initialize = () =>
    server.connection.sendRequest('initialize', { clientName: 'test', protocolVersion: 1 }) as Promise<{ methods: string[]; protocolVersion: number }>;

  before(async () => {
    server = spawnCompanion();
    await initialize();
  });
  after(async () => {
    const code = await server.stop();
    assert.equal(code, 0, `server exited with ${code}; log:\n${server.stderr()}`);
  });

  it('answers initialize with its versions and method table', async () => {
    const result = await initialize();
    assert.equal(result.protocolVersion, 1);
    assert.deepEqual(result.methods.sort(), Object.keys(companionMethods).sort());
  });

  it('answers an unknown method with MethodNotFound', async () => {
    await assert.rejects(server.connection.sendRequest('sandboxes/explode', {}), (e: unknown) => {
      assert.ok(e instanceof ResponseError);
      assert.equal(e.code, JsonRpcErrorNumber.MethodNotFound);
      assert.deepEqual(e.data, { code: 'not_found' });
      return true;
    });
  });

  it('answers invalid params with the zod issue paths', async () => {
    await assert.rejects(server.connection.sendRequest('initialize', { clientName: '', protocolVersion: 2 }), (e: unknown) => {
      assert.ok(e instanceof ResponseError);
      assert.equal(e.code, JsonRpcErrorNumber.InvalidParams);
      const data = e.data as { code: string; issues: { path: string }[] };
      assert.equal(data.code, 'invalid_params');
      assert.deepEqual(data.issues.map((i) => i.path).sort(), ['clientName', 'protocolVersion']);
      return true;
    });
    await initialize();
  });

  it('replies ParseError to a malformed JSON frame and stays up', async () => {
    server.writeRaw(frame('{"jsonrpc":"2.0","id":99,"method":'));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stdout(), /"id":null,"error":\{"code":-32700,"message":"message body is not valid UTF-8 JSON"\}/);
  });

  it('skips a 10 MB garbage frame without buffering it, and stays up', async () => {
    const garbage = Buffer.alloc(10 * 1024 * 1024, 0x7a);
    server.writeRaw(frame(garbage));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stdout(), /"id":null,"error":\{"code":-32700,"message":"message of 10485760 bytes exceeds the \d+-byte limit"\}/);
  });

  it('resynchronises after unframed garbage and answers the next request', async () => {
    server.writeRaw(Buffer.concat([Buffer.from('GET / HTTP/1.1\r\n\r\n'), Buffer.alloc(20_000, 0x41)]));
    assert.equal((await initialize()).protocolVersion, 1);
    assert.match(server.stderr(), /not a Content-Length frame/);
  });

  it('never writes a token into its log', () => {
    assert.doesNotMatch(server.stderr(), /Bearer [A-Za-z0-9]/);
  });
});

describe('companion server: LSP lifecycle (as vscode-languageclient drives it)', function () {
  this.timeout(30_000);
  it('accepts LSP InitializeParams without clientInfo (optional in LSP) and logs the client as unknown', async () => {
    const server = spawnCompanion();
    try {
      // Exactly what a minimal LSP client sends: no clientInfo, no clientName of ours.
      const result = (await server.connection.sendRequest('initialize', {
        processId: process.pid,
        rootUri: null,
        capabilities: {},
      })) as { protocolVersion: number; serverInfo: { name: string }; methods: string[] };
      assert.equal(result.protocolVersion, 1);
      assert.equal(result.serverInfo.name, 'sandbox-sessions');
      assert.ok(result.methods.includes('sandboxes/list'));
      const connected = server
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"client connected"'))
        .map((l) => JSON.parse(l) as { client: { name: string } });
      assert.deepEqual(connected.map((l) => l.client.name), [DEFAULT_CLIENT_NAME]);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });

  it('accepts LSP initialize params, then shutdown and exit end the process with 0', async () => {
    const server = spawnCompanion();
    const exited = new Promise<number | null>((resolve) => server.child.on('exit', (c) => resolve(c)));
    try {
      const result = (await server.connection.sendRequest('initialize', {
        processId: process.pid,
        clientInfo: { name: 'Visual Studio Code', version: '1.139.0' },
        rootUri: null,
        capabilities: {},
      })) as { capabilities: object; serverInfo: { name: string } };
      assert.deepEqual(result.capabilities, {});
      assert.equal(result.serverInfo.name, 'sandbox-sessions');
      await server.connection.sendNotification('initialized', {});
      assert.equal(await server.connection.sendRequest('shutdown'), null);
      await server.connection.sendNotification('exit');
      assert.equal(await exited, 0);
    } finally {
      await server.stop();
    }
  });
});
