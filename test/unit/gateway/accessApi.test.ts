// The access API beyond the golden cases: check order (404 route → 429 → 404/409 Run → 401 →
// 405 → 400/413), Go-decoder errors, file operation errors with the Bash runtime's codes, the
// queue limit, output caps, and the local extensions (ranged reads, cancel, capabilities).
import assert from 'node:assert/strict';
import { GatewayMessages } from '../../../protocol/kruntimes/gateway';
import type { Run } from '../../../protocol/kruntimes/run';
import { clockPast } from '../../fixtures/clock';
import { b64, call, createRun, patchTermination, readyRun, startTestGateway, waitCommandRunning, waitPhase, type TestGateway } from './harness';

const err = (message: string): string => JSON.stringify({ error: message }) + '\n';

describe('local gateway: access API details', function () {
  this.timeout(30_000);
  let t: TestGateway;
  let P: string;
  let run: Run;
  before(async () => {
    t = await startTestGateway();
    ({ run, P } = await readyRun(t.gw, { session: { queueSize: 2 } }));
  });
  after(async () => {
    await t.cleanup();
  });

  const exec = (body: unknown): ReturnType<typeof call> => call(t.gw, 'POST', `${P}/operations:execute`, { body });

  it('check order: unknown path 404 before auth; unknown Run 404 and non-Ready 409 before 401; then 401, then 405', async () => {
    assert.equal((await call(t.gw, 'GET', `${P}/nope`, { token: null })).text, err('endpoint not found'));
    assert.equal((await call(t.gw, 'GET', '/elsewhere', { token: null })).status, 404);
    assert.equal((await call(t.gw, 'GET', '/v1/namespaces/default/runtimes/process/sessions/nope', { token: null })).text, err('Session Run not found'));
    const ended = await createRun(t.gw, { runtime: 'process' });
    await waitPhase(t.gw, ended, ['Ready']);
    await patchTermination(t.gw, ended, 'Immediate');
    await waitPhase(t.gw, ended, ['Cancelled']);
    // A Run that is not Ready answers 409 even without a token (the lookup comes first).
    const notReady = await call(t.gw, 'GET', `/v1/namespaces/default/runtimes/process/sessions/${ended.metadata.uid}`, { token: null });
    assert.equal(notReady.text, err('Session Run is Cancelled, not Ready'));
    const noToken = await call(t.gw, 'GET', P, { token: null });
    assert.equal(noToken.status, 401);
    assert.equal(noToken.text, err(GatewayMessages.bearerRequired));
    const badToken = await call(t.gw, 'GET', P, { token: 'wrong' });
    assert.equal(badToken.text, err(GatewayMessages.bearerNotAuthenticated));
    const lower = await call(t.gw, 'GET', P, { token: null, headers: { authorization: `bearer   ${t.gw.token}  ` } });
    assert.equal(lower.status, 200, 'scheme is case-insensitive, token trimmed');
    assert.equal((await call(t.gw, 'POST', P)).text, err('method not allowed'));
    assert.equal((await call(t.gw, 'GET', `${P}/operations:execute`)).status, 405);
  });

  it('decodes bodies like Go: unknown fields, trailing data, base64, empty body', async () => {
    assert.equal((await exec({ command: { argv: ['true'], bogus: 1 } })).text, err('decode request: json: unknown field "bogus"'));
    assert.equal((await exec({ nope: {} })).text, err('decode request: json: unknown field "nope"'));
    const trailing = await call(t.gw, 'POST', `${P}/operations:execute`, { raw: '{"command":{"argv":["true"]}} {}' });
    assert.equal(trailing.text, err(GatewayMessages.oneJsonValue));
    const badB64 = await exec({ writeFile: { path: 'x', contents: 'abc' } });
    assert.equal(badB64.text, err('decode request: illegal base64 data at input byte 0'));
    const urlSafe = await exec({ writeFile: { path: 'x', contents: 'ab-_' } });
    assert.equal(urlSafe.text, err('decode request: illegal base64 data at input byte 2'));
    assert.equal((await call(t.gw, 'POST', `${P}/operations:execute`, { raw: '' })).text, err('decode request: EOF'));
    assert.equal((await exec({})).text, err(GatewayMessages.exactlyOneOperation));
    assert.equal((await exec({ command: { argv: ['true'], shell: 'true' } })).text, err(GatewayMessages.exactlyOneArgvOrShell));
    assert.equal((await exec({ command: {} })).text, err(GatewayMessages.exactlyOneArgvOrShell));
    const nullOp = await exec({ command: null, writeFile: { path: 'n.txt', contents: null } });
    assert.equal(nullOp.text, '{}\n', 'null is absent, as in Go');
  });

  it('paths: empty, absolute (also via %2F), root, escape', async () => {
    assert.equal((await exec({ writeFile: { path: '', contents: b64('x') } })).text, err(GatewayMessages.pathRequired));
    assert.equal((await exec({ writeFile: { path: '/etc/x', contents: b64('x') } })).text, err(GatewayMessages.pathRelative));
    assert.equal((await call(t.gw, 'GET', `${P}/files/%2Fetc%2Fpasswd`)).text, err(GatewayMessages.pathRelative));
    assert.equal((await exec({ deleteFile: { path: '.' } })).text, err(GatewayMessages.pathRoot));
    assert.equal((await exec({ renameFile: { sourcePath: 'a/../../x', destinationPath: 'y' } })).text, err(GatewayMessages.pathEscape));
  });

  it('file operations answer with the Bash runtime codes', async () => {
    const noParent = await exec({ writeFile: { path: 'missing/dir/f.txt', contents: b64('x') } });
    assert.equal(noParent.status, 400);
    assert.match((noParent.json() as { error: string }).error, /^resolve file parent: lstat .*\/missing: no such file or directory$/);
    const missing = await call(t.gw, 'GET', `${P}/files/nothing.txt`);
    assert.equal(missing.status, 404);
    assert.match((missing.json() as { error: string }).error, /^open session file: open .*\/nothing\.txt: no such file or directory$/);
    assert.equal((await exec({ createDirectory: { path: 'd/e' } })).text, '{}\n');
    const dirRead = await call(t.gw, 'GET', `${P}/files/d`);
    assert.equal(dirRead.status, 500);
    assert.match((dirRead.json() as { error: string }).error, /is a directory$/);
    assert.equal((await exec({ deleteFile: { path: 'd' } })).status, 409);
    assert.equal((await exec({ deleteFile: { path: 'd', recursive: true } })).text, '{}\n');
    await exec({ writeFile: { path: 'a.txt', contents: b64('a') } });
    await exec({ writeFile: { path: 'b.txt', contents: b64('b') } });
    const exists = await exec({ renameFile: { sourcePath: 'a.txt', destinationPath: 'b.txt' } });
    assert.equal(exists.status, 500);
    assert.equal(exists.text, err('destination already exists'));
    assert.equal((await exec({ renameFile: { sourcePath: 'a.txt', destinationPath: 'b.txt', overwrite: true } })).text, '{}\n');
    assert.equal((await call(t.gw, 'GET', `${P}/files/b.txt`)).text, `{"contents":"${b64('a')}","truncated":false}\n`);
    await exec({ writeFile: { path: 'empty.txt' } });
    assert.equal((await call(t.gw, 'GET', `${P}/files/empty.txt`)).text, '{"contents":null,"truncated":false}\n');
    const listMissing = await call(t.gw, 'GET', `${P}/files?path=nope`);
    assert.equal(listMissing.status, 404);
    const listFile = await call(t.gw, 'GET', `${P}/files?path=b.txt`);
    assert.equal(listFile.status, 500);
  });

  it('maxBytes truncates; ranged reads (offset, length) are a local extension', async () => {
    await exec({ writeFile: { path: 'digits.txt', contents: b64('0123456789') } });
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?maxBytes=4`)).text, `{"contents":"${b64('0123')}","truncated":true}\n`);
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?maxBytes=0`)).text, err(GatewayMessages.maxBytesPositive));
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?offset=3&length=4`)).text, `{"contents":"${b64('3456')}","truncated":true}\n`);
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?offset=6&length=4`)).text, `{"contents":"${b64('6789')}","truncated":false}\n`);
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?offset=20`)).text, '{"contents":null,"truncated":false}\n');
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?offset=-1`)).status, 400);
    assert.equal((await call(t.gw, 'GET', `${P}/files/digits.txt?length=0`)).status, 400);
  });

  it('stdout over 1 MiB is capped with the truncation marker', async () => {
    const r = await exec({ command: { shell: 'head -c 1100000 /dev/zero | tr "\\0" a', timeoutMillis: 10_000 } });
    // 1 MiB of output is ~1.4 MB of base64: over the response cap, exactly as kruntimes (413 after running).
    assert.equal(r.status, 413);
    const s = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { command: { shell: 'head -c 1100000 /dev/zero | tr "\\0" a' } } });
    const out = s.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; output?: { data: string } })
      .filter((e) => e.type === 'output')
      .map((e) => Buffer.from(e.output?.data ?? '', 'base64'));
    const all = Buffer.concat(out).toString();
    assert.equal(all.length, (1 << 20) + '\n[output truncated]\n'.length);
    assert.ok(all.endsWith('a\n[output truncated]\n'));
    assert.ok(out.every((c) => c.length <= 32 * 1024));
  });

  it('a full queue answers 429 session operation queue is full', async () => {
    const running = [exec({ command: { argv: ['sleep', '1'] } }), exec({ command: { argv: ['sleep', '1'] } })];
    await waitCommandRunning(t.gw, run);
    const third = await exec({ command: { argv: ['true'] } });
    assert.equal(third.status, 429);
    assert.equal(third.text, err('session operation queue is full'));
    // Reads bypass the queue.
    assert.equal((await call(t.gw, 'GET', `${P}/files`)).status, 200);
    for (const r of await Promise.all(running)) assert.equal(r.status, 200);
  });

  it('stdin, workingDirectory and shell (bash -c) reach the command', async () => {
    await exec({ createDirectory: { path: 'wd' } });
    const r = await exec({ command: { shell: 'pwd | sed "s#.*/##"; cat; echo "${BASH_VERSION:+bash}"', workingDirectory: 'wd', stdin: b64('from-stdin\n') } });
    assert.equal(Buffer.from((r.json() as { command: { stdout: string } }).command.stdout, 'base64').toString(), 'wd\nfrom-stdin\nbash\n');
    const bad = await exec({ command: { argv: ['true'], workingDirectory: 'nope' } });
    assert.equal(bad.status, 400);
    const enoent = await exec({ command: { argv: ['definitely-not-a-command'] } });
    assert.equal(enoent.status, 400);
    assert.match(enoent.text, /executable file not found/);
  });

  it('status is not activity; lastActivityUnixNano moves only with operations', async () => {
    const s1 = (await call(t.gw, 'GET', P)).text.match(/"lastActivityUnixNano":(\d+)/)?.[1];
    await call(t.gw, 'GET', `${P}/files`);
    const s2 = (await call(t.gw, 'GET', P)).text.match(/"lastActivityUnixNano":(\d+)/)?.[1];
    assert.equal(s1, s2);
    await clockPast(Date.now()); // a new activity stamp needs the clock to have moved
    await exec({ command: { argv: ['true'] } });
    const s3 = (await call(t.gw, 'GET', P)).text.match(/"lastActivityUnixNano":(\d+)/)?.[1];
    assert.ok(BigInt(s3 ?? '0') > BigInt(s2 ?? '0'));
  });

  it('stream: Idempotency-Key names the operation; bad keys and cursors are 400', async () => {
    const s = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { command: { argv: ['true'] } }, headers: { 'idempotency-key': 'my-op.1' } });
    assert.match(s.text, /^\{"sequence":1,"type":"accepted","accepted":\{"operationID":"my-op\.1"\}\}\n/);
    const bad = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { command: { argv: ['true'] } }, headers: { 'idempotency-key': 'a b' } });
    assert.equal(bad.text, err(GatewayMessages.idempotencyKeyCharacters));
    const cursor = await call(t.gw, 'POST', `${P}/operations:stream?after=-1`, { body: { command: { argv: ['true'] } } });
    assert.equal(cursor.text, err(GatewayMessages.cursorInvalid));
    const failed = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { writeFile: { path: 'nope/x', contents: b64('x') } } });
    const lines = failed.text.trim().split('\n').map((l) => JSON.parse(l) as { type: string; failed?: { code: number } });
    assert.deepEqual(lines.map((l) => l.type), ['accepted', 'failed']);
    assert.equal(lines[1]?.failed?.code, 3);
  });

  it('headers: 512 KiB pass (1 MiB limit), more than 1 MiB is 431', async () => {
    const ok = await call(t.gw, 'GET', P, { headers: { 'x-pad': 'a'.repeat(512 * 1024) } });
    assert.equal(ok.status, 200);
    const tooBig = await call(t.gw, 'GET', P, { headers: { 'x-pad': 'a'.repeat(1100 * 1024) } }).catch((e: Error) => e);
    assert.ok(!(tooBig instanceof Error), String(tooBig));
    assert.equal(tooBig.status, 431);
  });
});
