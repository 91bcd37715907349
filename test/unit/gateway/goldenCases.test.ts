// The data-plane golden cases of specs/kruntimes-access-api.md §6, against the local gateway
// with the real `process` backend: status codes and bodies as recorded (byte for byte where
// the spec gives bytes; paths inside error messages are the local ones).
import assert from 'node:assert/strict';
import { GatewayMessages } from '../../../protocol/kruntimes/gateway';
import { encodePageToken } from '../../../protocol/kruntimes/pageToken';
import type { Run } from '../../../protocol/kruntimes/run';
import { b64, call, patchTermination, readyRun, startTestGateway, waitCommandRunning, waitPhase, type TestGateway } from './harness';

const err = (message: string): string => JSON.stringify({ error: message }) + '\n';

describe('local gateway: spec §6 golden cases (process backend)', function () {
  this.timeout(30_000);
  let t: TestGateway;
  let P: string;
  let run: Run;

  before(async () => {
    t = await startTestGateway();
    ({ run, P } = await readyRun(t.gw, { env: [{ name: 'KRUNTIMES_SESSION_DEFAULT', value: 'registration' }] }));
  });
  after(async () => {
    await t.cleanup();
  });

  it('#1 GET P on a Ready Run → 200 SESSION_STATE_READY (+ local capabilities)', async () => {
    const r = await call(t.gw, 'GET', P);
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.match(r.text, /^\{"state":"SESSION_STATE_READY","lastActivityUnixNano":\d{19},"capabilities":\{/);
    assert.ok(r.text.endsWith('}\n'));
    const body = r.json() as { capabilities: Record<string, unknown> };
    // `terminal`: this machine makes ptys (util-linux's script; scripts/install-test-deps.sh has it), hostTerminal.ts.
    assert.deepEqual(body.capabilities, { rangedReads: true, cancel: true, isolateNetwork: false, backend: 'process', isolation: 'none', terminal: true });
  });

  it('#4 execute echo hello → exact bytes', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['echo', 'hello'] } } });
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"command":{"exitCode":0,"stdout":"aGVsbG8K"}}\n');
  });

  it('#5 sh -c "printf gateway-ok" → stdout Z2F0ZXdheS1vaw==', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'printf gateway-ok'] } } });
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"command":{"exitCode":0,"stdout":"Z2F0ZXdheS1vaw=="}}\n');
  });

  it('#6 Run env then command env → registration:command', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, {
      body: {
        command: {
          argv: ['sh', '-c', `printf '%s:%s' "$KRUNTIMES_SESSION_DEFAULT" "$KRUNTIMES_SESSION_COMMAND"`],
          env: { KRUNTIMES_SESSION_COMMAND: 'command' },
        },
      },
    });
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"command":{"exitCode":0,"stdout":"cmVnaXN0cmF0aW9uOmNvbW1hbmQ="}}\n');
  });

  it('#7 writeFile with createParents → 200 {}', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { writeFile: { path: 'notes/result.txt', contents: 'Z2F0ZXdheS1maWxl', createParents: true } },
    });
    assert.equal(r.status, 200);
    assert.equal(r.text, '{}\n');
  });

  it('#8 writeFile ../outside.txt → 400 escape', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { writeFile: { path: '../outside.txt', contents: 'ZXNjYXBl', createParents: true } },
    });
    assert.equal(r.status, 400);
    assert.equal(r.text, err('file path must not escape the workspace'));
  });

  it('#9 list notes → result.txt, 12 bytes, last page', async () => {
    const r = await call(t.gw, 'GET', `${P}/files?path=notes`);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"entries":[{"path":"result.txt","directory":false,"sizeBytes":12}],"nextPageToken":""}\n');
  });

  it('#10 read notes/result.txt → contents, not truncated', async () => {
    const r = await call(t.gw, 'GET', `${P}/files/notes/result.txt`);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"contents":"Z2F0ZXdheS1maWxl","truncated":false}\n');
  });

  it('#11 a middle page of notes with limit and pageToken → exact bytes', async () => {
    for (const [name, body] of [
      ['build.log', 'twelve bytes'],
      ['zzz.txt', 'z'],
    ]) {
      const w = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { writeFile: { path: `notes/${name}`, contents: b64(body as string) } } });
      assert.equal(w.status, 200);
    }
    // notes: build.log, result.txt, zzz.txt. A page of 1 after "a" is build.log, with a next token.
    const r = await call(t.gw, 'GET', `${P}/files?path=notes&limit=1&pageToken=${encodePageToken('notes', 'a')}`);
    assert.equal(r.status, 200);
    assert.equal(r.text, `{"entries":[{"path":"build.log","directory":false,"sizeBytes":12}],"nextPageToken":"${encodePageToken('notes', 'build.log')}"}\n`);
  });

  it('#12 limit=0 → 400 limit must be a positive integer', async () => {
    const r = await call(t.gw, 'GET', `${P}/files?limit=0`);
    assert.equal(r.status, 400);
    assert.equal(r.text, err(GatewayMessages.limitPositive));
  });

  it('#13 limit=1001 → 400 limit must be between 1 and 1000', async () => {
    const r = await call(t.gw, 'GET', `${P}/files?limit=1001`);
    assert.equal(r.status, 400);
    assert.equal(r.text, err(GatewayMessages.limitRange));
  });

  it('#14 pageToken=not-a-token → 400 page token is invalid', async () => {
    const r = await call(t.gw, 'GET', `${P}/files?pageToken=not-a-token`);
    assert.equal(r.status, 400);
    assert.equal(r.text, err('page token is invalid'));
  });

  it('#15 a token for "" used on path=other → 400 mismatch', async () => {
    const r = await call(t.gw, 'GET', `${P}/files?path=other&pageToken=${encodePageToken('', 'b')}`);
    assert.equal(r.status, 400);
    assert.equal(r.text, err('page token does not match the requested directory'));
  });

  it('#16 files z,b,a,é in pages of 2, byte-wise order, the golden token', async () => {
    const { P: P2 } = await readyRun(t.gw);
    for (const name of ['z', 'b', 'a', 'é']) {
      const w = await call(t.gw, 'POST', `${P2}/operations:execute`, { body: { writeFile: { path: name, contents: b64(name) } } });
      assert.equal(w.status, 200);
    }
    const p1 = await call(t.gw, 'GET', `${P2}/files?limit=2`);
    assert.equal(p1.status, 200);
    const page1 = p1.json() as { entries: Array<{ path: string }>; nextPageToken: string };
    assert.deepEqual(page1.entries.map((e) => e.path), ['a', 'b']);
    assert.equal(page1.nextPageToken, 'eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0');
    const p2 = await call(t.gw, 'GET', `${P2}/files?limit=2&pageToken=eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0`);
    const page2 = p2.json() as { entries: Array<{ path: string }>; nextPageToken: string };
    assert.deepEqual(page2.entries.map((e) => e.path), ['z', 'é']);
    assert.equal(page2.nextPageToken, '');
  });

  it('#17 read a nested path artifacts/test/output.log → exact bytes', async () => {
    const w = await call(t.gw, 'POST', `${P}/operations:execute`, {
      body: { command: { argv: ['sh', '-c', 'mkdir -p artifacts/test && echo done > artifacts/test/output.log'] } },
    });
    assert.equal(w.status, 200);
    const r = await call(t.gw, 'GET', `${P}/files/artifacts/test/output.log`);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"contents":"ZG9uZQo=","truncated":false}\n');
  });

  it('#19 two operation keys → 400 exactly one session operation is required', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: 'true' }, deleteFile: { path: 'x' } } });
    assert.equal(r.status, 400);
    assert.equal(r.text, err(GatewayMessages.exactlyOneOperation));
  });

  it('#20 a body over MaxRequestBodyBytes=64 → 413, nothing runs', async () => {
    const small = await startTestGateway({ maxRequestBodyBytes: 64 });
    try {
      const { P: Ps } = await readyRun(small.gw);
      const r = await call(small.gw, 'POST', `${Ps}/operations:execute`, {
        body: { command: { argv: ['sh', '-c', `touch ran; echo ${'x'.repeat(80)}`] } },
      });
      assert.equal(r.status, 413);
      assert.equal(r.text, err(GatewayMessages.requestTooLarge));
      const l = await call(small.gw, 'GET', `${Ps}/files`);
      assert.equal((l.json() as { entries: unknown[] }).entries.length, 0);
    } finally {
      await small.cleanup();
    }
  });

  it('#21 a response over MaxResponseBodyBytes=64 → 413 exactly, no partial JSON', async () => {
    const small = await startTestGateway({ maxResponseBodyBytes: 64 });
    try {
      const { P: Ps } = await readyRun(small.gw);
      const r = await call(small.gw, 'POST', `${Ps}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'head -c 128 /dev/zero | tr "\\0" x'] } } });
      assert.equal(r.status, 413);
      assert.equal(r.text, '{"error":"gateway response exceeds configured limit"}\n');
    } finally {
      await small.cleanup();
    }
  });

  it('#23 MaxConcurrentRequests=1: a second request → 429 while /healthz stays 200', async () => {
    const small = await startTestGateway({ maxConcurrentRequests: 1 });
    try {
      const { run: slowRun, P: Ps } = await readyRun(small.gw);
      const slow = call(small.gw, 'POST', `${Ps}/operations:execute`, { body: { command: { argv: ['sleep', '1'] } } });
      await waitCommandRunning(small.gw, slowRun); // the Runs API is outside the concurrency limit
      const second = await call(small.gw, 'GET', Ps);
      assert.equal(second.status, 429);
      assert.equal(second.text, err(GatewayMessages.concurrencyLimit));
      const health = await call(small.gw, 'GET', '/healthz', { token: null });
      assert.equal(health.status, 200);
      assert.equal(health.text, '');
      assert.equal((await slow).status, 200);
      assert.equal((await call(small.gw, 'GET', Ps)).status, 200);
    } finally {
      await small.cleanup();
    }
  });

  it('#24 GET P after Immediate → 409 Session Run is Cancelled, not Ready', async () => {
    const { run: r2, P: P2 } = await readyRun(t.gw);
    assert.equal((await patchTermination(t.gw, r2, 'Immediate')).status, 200);
    const done = await waitPhase(t.gw, r2, ['Cancelled']);
    assert.equal(done.status?.message, 'cancelled by user');
    const r = await call(t.gw, 'GET', P2);
    assert.equal(r.status, 409);
    assert.equal(r.text, err('Session Run is Cancelled, not Ready'));
  });

  it('#25 Drain while a command runs: the command → 200, a new write → 409, Run Succeeded', async () => {
    const { run: r2, P: P2 } = await readyRun(t.gw);
    const running = call(t.gw, 'POST', `${P2}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'sleep 1; printf drained'] } } });
    await waitCommandRunning(t.gw, r2);
    assert.equal((await patchTermination(t.gw, r2, 'Drain')).status, 200);
    const rejected = await call(t.gw, 'POST', `${P2}/operations:execute`, { body: { writeFile: { path: 'rejected.txt', contents: 'cmVqZWN0ZWQ=' } } });
    assert.equal(rejected.status, 409);
    assert.equal(rejected.text, err('Session Run is Finalizing, not Ready'));
    const done = await running;
    assert.equal(done.status, 200);
    assert.equal(done.text, `{"command":{"exitCode":0,"stdout":"${b64('drained')}"}}\n`);
    const final = await waitPhase(t.gw, r2, ['Succeeded', 'Failed']);
    assert.equal(final.status?.phase, 'Succeeded');
    assert.equal(final.status?.message, 'session finalized');
  });

  it('#26 Immediate while sleep 20 runs: the request fails (500), then GET P → 409', async () => {
    const { run: r2, P: P2 } = await readyRun(t.gw);
    const started = Date.now();
    const running = call(t.gw, 'POST', `${P2}/operations:execute`, { body: { command: { argv: ['sleep', '20'] } } });
    await waitCommandRunning(t.gw, r2);
    assert.equal((await patchTermination(t.gw, r2, 'Immediate')).status, 200);
    const res = await running;
    assert.equal(res.status, 500);
    assert.equal(res.text, err('session closed'));
    assert.ok(Date.now() - started < 10_000, 'the command was killed, not waited for');
    await waitPhase(t.gw, r2, ['Cancelled']);
    const r = await call(t.gw, 'GET', P2);
    assert.equal(r.status, 409);
  });

  it('#27 operations:stream echo done → NDJSON accepted, output, completed', async () => {
    const r = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { command: { argv: ['echo', 'done'] } } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'application/x-ndjson; charset=utf-8');
    const lines = r.text.split('\n');
    assert.equal(lines.pop(), '');
    assert.equal(lines.length, 3);
    assert.match(lines[0] as string, /^\{"sequence":1,"type":"accepted","accepted":\{"operationID":"[0-9a-f]{32}"\}\}$/);
    assert.equal(lines[1], '{"sequence":2,"type":"output","output":{"stream":"stdout","data":"ZG9uZQo="}}');
    assert.equal(lines[2], '{"sequence":3,"type":"completed","completed":{"command":{"exitCode":0}}}');
  });

  it('#28 stream output arrives before completion; completed carries no stdout', async () => {
    const { request } = await import('undici');
    const res = await request(`${t.gw.url}${P}/operations:stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.gw.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command: { argv: ['sh', '-c', 'printf stream-first; sleep 2; printf stream-last'] } }),
      signal: AbortSignal.timeout(15_000),
    });
    assert.equal(res.statusCode, 200);
    const t0 = Date.now();
    const events: Array<{ at: number; ev: { type: string; output?: { data: string }; completed?: { command: Record<string, unknown> } } }> = [];
    let buf = '';
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        events.push({ at: Date.now() - t0, ev: JSON.parse(buf.slice(0, i)) as (typeof events)[number]['ev'] });
        buf = buf.slice(i + 1);
      }
    }
    const outputs = events.filter((e) => e.ev.type === 'output');
    const completed = events.find((e) => e.ev.type === 'completed');
    assert.ok(completed);
    assert.equal(outputs.map((e) => Buffer.from(e.ev.output?.data ?? '', 'base64').toString()).join(''), 'stream-firststream-last');
    assert.ok((outputs[0]?.at ?? Infinity) < completed.at - 1000, 'the first output arrived well before completion');
    assert.deepEqual(completed.ev.completed?.command, { exitCode: 0 });
  });

  it('#32 idleTimeoutSeconds: 1 with no operations → Timeout within 10 s', async () => {
    const { run: r2 } = await readyRun(t.gw, { session: { idleTimeoutSeconds: 1 } });
    const done = await waitPhase(t.gw, r2, ['Timeout'], 10_000);
    assert.equal(done.status?.message, 'session idle timeout exceeded');
    assert.equal(done.status?.conditions?.find((c) => c.type === 'Completed')?.reason, 'Timeout');
  });

  it('#35 an unknown uid, or the wrong runtime segment → 404 Session Run not found', async () => {
    const r = await call(t.gw, 'GET', '/v1/namespaces/default/runtimes/process/sessions/task-uid');
    assert.equal(r.status, 404);
    assert.equal(r.text, err('Session Run not found'));
    const wrongRuntime = await call(t.gw, 'GET', P.replace('/runtimes/process/', '/runtimes/bash/'));
    assert.equal(wrongRuntime.status, 404);
    assert.equal(wrongRuntime.text, err('Session Run not found'));
    assert.ok(run.metadata.uid);
  });
});
