// Golden cases of kruntimes-access-api.md §6 that are about responses, replayed byte for byte
// from a loopback server: the client must parse each 200 and map each error exactly.
import assert from 'node:assert/strict';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../../protocol/kruntimes/gatewayErrors';
import { StreamEventSchema, type StreamEvent } from '../../../protocol/kruntimes/gateway';
import { ReplayGateway, type ReceivedRequest, type RecordedResponse } from '../../fixtures/replayGateway';

const P = '/v1/namespaces/default/runtimes/bash/sessions/session-uid';
const json = (status: number, body: string): RecordedResponse => ({ status, body });
const ndjson = (lines: string[]): RecordedResponse => ({
  status: 200,
  headers: { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-cache' },
  body: lines.map((l) => l + '\n'),
});

interface GoldenCase {
  id: number;
  title: string;
  response: RecordedResponse;
  call: (client: GatewayClient) => Promise<unknown>;
  /** The value the client returns (deep-equal), or the error it throws. */
  expect: { value: unknown } | { error: { status: number; message: string } };
  sent?: (req: ReceivedRequest) => void;
}

async function collect(iter: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const e of iter) out.push(e);
  return out;
}

const cases: GoldenCase[] = [
  {
    id: 1,
    title: 'GET P on a Ready Run',
    response: json(200, '{"state":"SESSION_STATE_READY"}\n'),
    call: (c) => c.status(),
    expect: { value: { state: 'SESSION_STATE_READY' } },
    sent: (r) => {
      assert.equal(r.method, 'GET');
      assert.equal(r.url, P);
      assert.equal(r.headers.authorization, 'Bearer golden-token');
    },
  },
  {
    id: 4,
    title: 'execute echo hello',
    response: json(200, '{"command":{"exitCode":0,"stdout":"aGVsbG8K"}}\n'),
    call: (c) => c.runCommand({ argv: ['echo', 'hello'] }),
    expect: { value: { exitCode: 0, stdout: Buffer.from('hello\n'), stderr: Buffer.alloc(0), timedOut: false } },
    sent: (r) => {
      assert.equal(r.method, 'POST');
      assert.equal(r.url, `${P}/operations:execute`);
      assert.equal(r.headers['content-type'], 'application/json');
      assert.deepEqual(JSON.parse(r.body), { command: { argv: ['echo', 'hello'] } });
    },
  },
  {
    id: 5,
    title: 'execute printf gateway-ok',
    response: json(200, '{"command":{"exitCode":0,"stdout":"Z2F0ZXdheS1vaw=="}}\n'),
    call: async (c) => (await c.runCommand({ argv: ['sh', '-c', 'printf gateway-ok'] })).stdout.toString(),
    expect: { value: 'gateway-ok' },
  },
  {
    id: 7,
    title: 'writeFile with createParents',
    response: json(200, '{}\n'),
    call: (c) => c.writeFile('notes/result.txt', Buffer.from('gateway-file'), { createParents: true }),
    expect: { value: undefined },
    sent: (r) =>
      assert.deepEqual(JSON.parse(r.body), {
        writeFile: { path: 'notes/result.txt', contents: 'Z2F0ZXdheS1maWxl', createParents: true },
      }),
  },
  {
    id: 8,
    title: 'writeFile escaping the workspace',
    response: json(400, '{"error":"file path must not escape the workspace"}\n'),
    call: (c) => c.writeFile('../outside.txt', Buffer.from('escape'), { createParents: true }),
    expect: { error: { status: 400, message: 'file path must not escape the workspace' } },
  },
  {
    id: 9,
    title: 'list notes after the write',
    response: json(200, '{"entries":[{"path":"result.txt","directory":false,"sizeBytes":12}],"nextPageToken":""}\n'),
    call: (c) => c.listPage({ path: 'notes' }),
    expect: { value: { entries: [{ path: 'result.txt', directory: false, sizeBytes: 12 }], nextPageToken: '' } },
    sent: (r) => assert.equal(r.url, `${P}/files?path=notes`),
  },
  {
    id: 10,
    title: 'read notes/result.txt',
    response: json(200, '{"contents":"Z2F0ZXdheS1maWxl","truncated":false}\n'),
    call: async (c) => {
      const r = await c.read('notes/result.txt');
      return { text: r.contents.toString(), truncated: r.truncated };
    },
    expect: { value: { text: 'gateway-file', truncated: false } },
    sent: (r) => assert.equal(r.url, `${P}/files/notes/result.txt?maxBytes=786000`),
  },
  {
    id: 11,
    title: 'list one page with limit and token',
    response: json(200, '{"entries":[{"path":"build.log","directory":false,"sizeBytes":12}],"nextPageToken":"next-notes"}\n'),
    call: (c) => c.listPage({ path: 'notes', limit: 2, pageToken: 'after-notes' }),
    expect: {
      value: { entries: [{ path: 'build.log', directory: false, sizeBytes: 12 }], nextPageToken: 'next-notes' },
    },
    sent: (r) => {
      const url = new URL(r.url, 'http://x');
      assert.equal(url.pathname, `${P}/files`);
      assert.equal(url.searchParams.get('path'), 'notes');
      assert.equal(url.searchParams.get('limit'), '2');
      assert.equal(url.searchParams.get('pageToken'), 'after-notes');
    },
  },
  {
    id: 12,
    title: 'limit=0',
    response: json(400, '{"error":"limit must be a positive integer"}\n'),
    call: (c) => c.listPage({ limit: 0 }),
    expect: { error: { status: 400, message: 'limit must be a positive integer' } },
    sent: (r) => assert.equal(r.url, `${P}/files?limit=0`),
  },
  {
    id: 13,
    title: 'limit=1001',
    response: json(400, '{"error":"limit must be between 1 and 1000"}\n'),
    call: (c) => c.listPage({ limit: 1001 }),
    expect: { error: { status: 400, message: 'limit must be between 1 and 1000' } },
  },
  {
    id: 14,
    title: 'an invalid page token',
    response: json(400, '{"error":"page token is invalid"}\n'),
    call: (c) => c.listPage({ pageToken: 'not-a-token' }),
    expect: { error: { status: 400, message: 'page token is invalid' } },
  },
  {
    id: 15,
    title: 'a token issued for another directory',
    response: json(400, '{"error":"page token does not match the requested directory"}\n'),
    call: (c) => c.listPage({ path: 'other', pageToken: 'eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0' }),
    expect: { error: { status: 400, message: 'page token does not match the requested directory' } },
  },
  {
    id: 16,
    title: 'paging z,b,a,é two at a time in byte order',
    response: {
      status: 200,
      body: '', // replaced by the responder below
    },
    call: async (c) => {
      const names: string[] = [];
      for await (const e of c.list('', { limit: 2 })) names.push(e.path);
      return names;
    },
    expect: { value: ['a', 'b', 'z', 'é'] },
  },
  {
    id: 17,
    title: 'read a nested path',
    response: json(200, '{"contents":"ZG9uZQo=","truncated":false}\n'),
    call: async (c) => (await c.read('artifacts/test/output.log')).contents.toString(),
    expect: { value: 'done\n' },
    sent: (r) => assert.equal(new URL(r.url, 'http://x').pathname, `${P}/files/artifacts/test/output.log`),
  },
  {
    id: 19,
    title: 'two operations in one body',
    response: json(400, '{"error":"exactly one session operation is required"}\n'),
    call: (c) => c.execute({ command: { shell: 'true' }, deleteFile: { path: 'x' } }),
    expect: { error: { status: 400, message: 'exactly one session operation is required' } },
  },
  {
    id: 20,
    title: 'request body over the limit',
    response: json(413, '{"error":"gateway request body exceeds configured limit"}\n'),
    call: (c) => c.runCommand({ argv: ['echo', 'x'.repeat(80)] }),
    expect: { error: { status: 413, message: 'gateway request body exceeds configured limit' } },
  },
  {
    id: 21,
    title: 'response over the limit, no partial JSON',
    response: json(413, '{"error":"gateway response exceeds configured limit"}\n'),
    call: (c) => c.runCommand({ argv: ['sh', '-c', 'head -c 128 /dev/zero'] }),
    expect: { error: { status: 413, message: 'gateway response exceeds configured limit' } },
  },
  {
    id: 23,
    title: 'concurrency limit',
    response: json(429, '{"error":"gateway request concurrency limit reached"}\n'),
    call: (c) => c.status(),
    expect: { error: { status: 429, message: 'gateway request concurrency limit reached' } },
  },
  {
    id: 24,
    title: 'status of a Cancelled Run',
    response: json(409, '{"error":"Session Run is Cancelled, not Ready"}\n'),
    call: (c) => c.status(),
    expect: { error: { status: 409, message: 'Session Run is Cancelled, not Ready' } },
  },
  {
    id: 25,
    title: 'a write while Finalizing',
    response: json(409, '{"error":"Session Run is Finalizing, not Ready"}\n'),
    call: (c) => c.writeFile('rejected.txt', Buffer.from('rejected')),
    expect: { error: { status: 409, message: 'Session Run is Finalizing, not Ready' } },
    sent: (r) => assert.deepEqual(JSON.parse(r.body), { writeFile: { path: 'rejected.txt', contents: 'cmVqZWN0ZWQ=' } }),
  },
  {
    id: 27,
    title: 'operations:stream accepted / progress / completed',
    response: ndjson([
      '{"sequence":1,"type":"accepted","accepted":{"operationID":"3c9f0e4b8a2d4f6e9b1c7a5d3e2f1a0b"}}',
      '{"sequence":2,"type":"progress","progress":{"kind":"text_delta","message":"working"}}',
      '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0,"stdout":"ZG9uZQo="}}}',
    ]),
    call: (c) => collect(c.stream({ command: { argv: ['echo', 'done'] } })),
    expect: {
      value: [
        { sequence: 1, type: 'accepted', accepted: { operationID: '3c9f0e4b8a2d4f6e9b1c7a5d3e2f1a0b' } },
        { sequence: 2, type: 'progress', progress: { kind: 'text_delta', message: 'working' } },
        { sequence: 3, type: 'completed', completed: { command: { exitCode: 0, stdout: 'ZG9uZQo=' } } },
      ],
    },
    sent: (r) => assert.equal(r.url, `${P}/operations:stream`),
  },
  {
    id: 28,
    title: 'stream output arrives before completion, completed carries no stdout',
    response: {
      ...ndjson([
        '{"sequence":1,"type":"accepted","accepted":{"operationID":"op-28"}}',
        '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"c3RyZWFtLWZpcnN0"}}',
        '{"sequence":3,"type":"output","output":{"stream":"stdout","data":"c3RyZWFtLWxhc3Q="}}',
        '{"sequence":4,"type":"completed","completed":{"command":{"exitCode":0}}}',
      ]),
      delayMs: 50,
    },
    call: async (c) => {
      let stdout = '';
      let completed: unknown;
      for await (const e of c.stream({ command: { shell: 'printf stream-first; sleep 2; printf stream-last' } })) {
        if (e.type === 'output') {
          assert.equal(completed, undefined, 'output after completion');
          stdout += Buffer.from(e.output.data ?? '', 'base64').toString();
        }
        if (e.type === 'completed') completed = e.completed;
      }
      return { stdout, completed };
    },
    expect: { value: { stdout: 'stream-firststream-last', completed: { command: { exitCode: 0 } } } },
  },
  {
    id: 35,
    title: 'a task Run or unknown UID',
    response: json(404, '{"error":"Session Run not found"}\n'),
    call: (c) => c.status(),
    expect: { error: { status: 404, message: 'Session Run not found' } },
  },
];

describe('gateway client: golden response cases (spec §6)', () => {
  const gateway = new ReplayGateway();
  let client: GatewayClient;

  before(async () => {
    await gateway.start();
    client = new GatewayClient({ endpoint: { url: gateway.endpoint }, token: 'golden-token' });
  });
  after(async () => {
    await client.close();
    await gateway.stop();
  });

  for (const c of cases) {
    it(`#${c.id} ${c.title}`, async () => {
      gateway.received.length = 0;
      if (c.id === 16) {
        // Two pages served by the same rules as the Bash runtime.
        gateway.respondWith((req) => {
          const token = new URL(req.url, 'http://x').searchParams.get('pageToken');
          return token === null
            ? json(
                200,
                '{"entries":[{"path":"a","directory":false,"sizeBytes":0},{"path":"b","directory":false,"sizeBytes":0}],"nextPageToken":"eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0"}\n',
              )
            : (assert.equal(token, 'eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0'),
              json(
                200,
                '{"entries":[{"path":"z","directory":false,"sizeBytes":0},{"path":"é","directory":false,"sizeBytes":0}],"nextPageToken":""}\n',
              ));
        });
      } else {
        gateway.respondWith(c.response);
      }
      if ('value' in c.expect) {
        assert.deepEqual(await c.call(client), c.expect.value);
      } else {
        const expected = c.expect.error;
        await assert.rejects(c.call(client), (err: unknown) => {
          assert.ok(err instanceof GatewayError, `expected GatewayError, got ${String(err)}`);
          assert.equal(err.status, expected.status);
          assert.equal(err.message, expected.message);
          assert.equal(err.code, 'gateway_http');
          return true;
        });
      }
      assert.ok(gateway.received.length >= 1, 'the client sent a request');
      c.sent?.(gateway.received[0]!);
    });
  }

  it('#29 WebSocket frames parse as the same stream events', () => {
    const frames = [
      '{"sequence":1,"type":"accepted","accepted":{"operationID":"operation-1"}}',
      '{"sequence":2,"type":"completed","completed":{"command":{"exitCode":0,"stdout":"ZG9uZQo="}}}',
    ];
    const events = frames.map((f) => StreamEventSchema.parse(JSON.parse(f)));
    assert.equal(events[0]!.type, 'accepted');
    assert.equal(events[0]!.type === 'accepted' && events[0]!.accepted.operationID, 'operation-1');
    assert.equal(events[1]!.type, 'completed');
    assert.throws(() => StreamEventSchema.parse({ sequence: 3, type: 'heartbeat' }));
  });
});
