// The Sandbox terminal's behaviour against a loopback gateway: live output, exit codes, cd,
// Ctrl+C cancelling the running operation, the unary fallback, and errors in words; and, against
// a real local gateway, that Ctrl+C ends the sandbox's process (seen in /proc), not just the screen.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { TerminalSession } from '../../../extension/terminal/terminalSession';
import { FixedConnection } from '../../fixtures/fakeConnection';
import { ReplayGateway, type ReceivedRequest } from '../../fixtures/replayGateway';
import { readyRun, startTestGateway, type TestGateway } from '../gateway/harness';

// eslint-disable-next-line no-control-regex -- terminal input is control characters
const strip = (s: string) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/\x1b\]633;[^\x07]*\x07/g, '');
const b64 = (s: string) => Buffer.from(s).toString('base64');
/** Waits (bounded, 5 s) for `cond`, running `refresh` (e.g. a read of the sandbox) before each check. */
const until = async (cond: () => boolean, what: string, refresh?: () => Promise<void>) => {
  const deadline = Date.now() + 5000;
  for (;;) {
    await refresh?.();
    if (cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('sandbox terminal session', () => {
  const gateway = new ReplayGateway();
  let connection: FixedConnection;
  let screen: string;
  let closedWith: number | undefined;
  let finished: string[];
  let accepted: string[];
  let session: TerminalSession;

  before(async () => {
    await gateway.start();
    connection = new FixedConnection(gateway.endpoint, 'tok', 'sbx', { cancel: true });
  });
  after(async () => {
    await connection.close();
    await gateway.stop();
  });
  beforeEach(() => {
    gateway.received.length = 0;
    screen = '';
    closedWith = undefined;
    finished = [];
    accepted = [];
    session = new TerminalSession({
      connection,
      write: (d) => (screen += d),
      close: (c) => (closedWith = c),
      onCommandFinished: (cwd) => finished.push(cwd),
      onCommandStarted: () => ({ accepted: (id) => accepted.push(id), output: () => undefined, finished: () => undefined }),
      showIntroduction: true,
    });
    session.open();
  });

  const streamOf = (...events: object[]) => ({
    status: 200,
    headers: { 'content-type': 'application/x-ndjson; charset=utf-8' },
    body: events.map((e, i) => JSON.stringify({ sequence: i + 1, ...e }) + '\n'),
  });

  it('introduces itself as line-based and shows a prompt with sandbox and cwd', () => {
    assert.match(strip(screen), /line-based/);
    assert.match(strip(screen), /sbx:\/\$ $/);
  });

  it('streams a command and shows its output and a failing exit code', async () => {
    gateway.respondWith(
      streamOf(
        { type: 'accepted', accepted: { operationID: 'op1' } },
        { type: 'output', output: { stream: 'stdout', data: b64('one\ntwo\n') } },
        { type: 'output', output: { stream: 'stderr', data: b64('oops\n') } },
        { type: 'completed', completed: { command: { exitCode: 3 } } },
      ),
    );
    session.handleInput('ls; false\r');
    await until(() => finished.length === 1, 'command end');
    const text = strip(screen);
    assert.match(text, /one\r\ntwo\r\noops\r\n\[exit 3\]\r\n/);
    // PYTHONUNBUFFERED: without a tty, Python would hold a server's "Serving HTTP on …" line in its buffer.
    assert.deepEqual(JSON.parse(gateway.received[0]!.body), { command: { shell: 'ls; false', env: { PYTHONUNBUFFERED: '1' } } });
    assert.match(text, /sbx:\/\$ $/);
  });

  it('marks prompts, command lines and exit codes for VS Code (OSC 633: A, B, E, C, D) around the output', async () => {
    const marks = () => [...screen.matchAll(/\x1b\]633;([^\x07]*)\x07/g)].map((m) => m[1]); // eslint-disable-line no-control-regex
    assert.deepEqual(marks(), ['A', 'B']);
    gateway.respondWith(streamOf({ type: 'output', output: { stream: 'stdout', data: b64('x\n') } }, { type: 'completed', completed: { command: { exitCode: 3 } } }));
    session.handleInput('echo a;b \\ c\r');
    await until(() => finished.length === 1, 'command end');
    assert.deepEqual(marks(), ['A', 'B', 'E;echo\\x20a\\x3bb\\x20\\\\\\x20c', 'C', 'D;3', 'A', 'B']);
    // The output lies between C and D; the next prompt between A and B.
    assert.match(screen, /\x1b\]633;C\x07x\r\n.*\x1b\]633;D;3\x07\x1b\]633;A\x07.*sbx.*\$ .*\x1b\]633;B\x07$/s); // eslint-disable-line no-control-regex
    gateway.respondWith({ status: 404, body: '{"error":"list session file: no such file"}\n' });
    session.handleInput('cd nope\r');
    await until(() => marks().length === 12, 'the failed cd marked, and the next prompt');
    assert.deepEqual(marks().slice(7), ['E;cd\\x20nope', 'C', 'D;1', 'A', 'B']);
  });

  it('cd validates with a listing and runs later commands there', async () => {
    gateway.respondWith((req: ReceivedRequest) =>
      req.url.includes('/files?')
        ? { status: 200, body: '{"entries":[],"nextPageToken":""}\n' }
        : streamOf({ type: 'accepted', accepted: { operationID: 'op2' } }, { type: 'completed', completed: { command: { exitCode: 0 } } }),
    );
    session.handleInput('cd src/lib\r');
    await until(() => strip(screen).endsWith('sbx:/src/lib$ '), 'cd prompt');
    assert.match(gateway.received[0]!.url, /files\?path=src%2Flib&limit=1$/);
    session.handleInput('pwd\r');
    await until(() => finished.length === 1, 'command end');
    assert.deepEqual(JSON.parse(gateway.received[1]!.body), { command: { shell: 'pwd', workingDirectory: 'src/lib', env: { PYTHONUNBUFFERED: '1' } } });
    assert.deepEqual(finished, ['src/lib']);
  });

  it('refuses cd to a missing directory and outside the workspace', async () => {
    gateway.respondWith({ status: 404, body: '{"error":"list session file: no such file"}\n' });
    session.handleInput('cd nope\r');
    await until(() => /no such directory/.test(screen), 'cd error');
    session.handleInput('cd ../..\r');
    await until(() => /outside the workspace/.test(screen), 'escape refusal');
    assert.match(strip(screen), /sbx:\/\$ $/);
  });

  it('Ctrl+C cancels the running operation (explicit cancel and stream abort)', async () => {
    gateway.respondWith((req, res) => {
      if (req.url.endsWith(':cancel')) return { status: 200, body: '{"result":"cancelled"}\n' };
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' });
      res.write(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: 'op-sleep' } }) + '\n');
      return 'handled';
    });
    session.handleInput('sleep 60\r');
    await until(() => gateway.received.length === 1, 'stream start');
    await until(() => accepted.includes('op-sleep'), 'the accepted event (the operation id Ctrl+C cancels)');
    session.handleInput('\x03');
    await until(() => finished.length === 1, 'cancel');
    assert.match(strip(screen), /\^C\r\n\[cancelled\]\r\n/);
    assert.match(screen, /\x1b\]633;D;130\x07/, 'a cancelled command ends with 130, as in a shell'); // eslint-disable-line no-control-regex
    await until(() => gateway.received.some((r) => r.url.endsWith('/operations/op-sleep:cancel')), 'explicit cancel');
  });

  it('keeps keys typed while a command runs and replays them at the next prompt, where Tab completes', async () => {
    let first: import('node:http').ServerResponse | undefined;
    gateway.respondWith((req, res) => {
      if (req.url.includes('/files?')) return { status: 200, body: '{"entries":[{"path":"src","directory":true}],"nextPageToken":""}\n' };
      if (first === undefined) {
        first = res;
        res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' });
        res.write(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: 'op-cat' } }) + '\n');
        return 'handled';
      }
      return streamOf({ type: 'accepted', accepted: { operationID: 'op-ls' } }, { type: 'completed', completed: { command: { exitCode: 0 } } });
    });
    session.handleInput('cat big\r');
    await until(() => accepted.includes('op-cat'), 'the first command running');
    // Typed ahead, key by key, before the first command ended (its output may already be on screen).
    for (const key of 'ls sr\t') session.handleInput(key);
    assert.equal(gateway.received.length, 1, 'nothing typed ahead runs or lists while the command runs');
    first?.end(JSON.stringify({ sequence: 2, type: 'completed', completed: { command: { exitCode: 0 } } }) + '\n');
    await until(() => strip(screen).endsWith('sbx:/$ ls src/'), 'the typed-ahead line, completed at the new prompt');
    session.handleInput('\r');
    await until(() => finished.length === 2, 'the second command');
    assert.equal(JSON.parse(gateway.received.at(-1)!.body).command.shell, 'ls src/');
  });

  it('drops what was typed ahead when Ctrl+C cancels the command, as a terminal does', async () => {
    gateway.respondWith((req, res) => {
      if (req.url.endsWith(':cancel')) return { status: 200, body: '{"result":"cancelled"}\n' };
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' });
      res.write(JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: 'op-sleep2' } }) + '\n');
      return 'handled';
    });
    session.handleInput('sleep 60\r');
    await until(() => accepted.includes('op-sleep2'), 'the command running');
    session.handleInput('rm -rf build\r');
    session.handleInput('\x03');
    await until(() => finished.length === 1, 'cancel');
    await until(() => strip(screen).endsWith('sbx:/$ '), 'an empty prompt');
    assert.equal(gateway.received.filter((r) => !r.url.endsWith(':cancel')).length, 1, 'the typed-ahead command never ran');
  });

  it('falls back to operations:execute where streaming does not exist', async () => {
    // Era A/B parse paths by hand and answer an unknown suffix 405 (spec §2.3); a 404
    // `endpoint not found` there would mean era D, whose operations go over operations:ws.
    gateway.respondWith((req) =>
      req.url.endsWith('operations:stream')
        ? { status: 405, body: '{"error":"method not allowed"}\n' }
        : { status: 200, body: `{"command":{"exitCode":0,"stdout":"${b64('hi\n')}"}}\n` },
    );
    session.handleInput('echo hi\r');
    await until(() => finished.length === 1, 'fallback');
    assert.match(strip(screen), /hi\r\n/);
    assert.deepEqual(
      gateway.received.map((r) => new URL(r.url, 'http://x').pathname.split('/').pop()),
      ['operations:stream', 'operations:execute'],
    );
  });

  it('explains a full queue and a draining sandbox in words', async () => {
    gateway.respondWith({ status: 429, body: '{"error":"session operation queue is full"}\n' });
    session.handleInput('true\r');
    await until(() => finished.length === 1, 'queue full');
    assert.match(screen, /busy: its operation queue is full/);
    gateway.respondWith({ status: 409, body: '{"error":"Session Run is Finalizing, not Ready"}\n' });
    session.handleInput('true\r');
    await until(() => finished.length === 2, 'finalizing');
    assert.match(screen, /is closing \(Drain\)/);
  });

  it('closes on exit and on Ctrl+D', () => {
    session.handleInput('exit\r');
    assert.equal(closedWith, 0);
  });
});

describe('sandbox terminal session after the gateway moved (daemon restarted)', () => {
  it('runs the command over a new connection when the old address refuses it, without the address on screen', async () => {
    const gateway = new ReplayGateway();
    await gateway.start();
    // A port nothing listens on: the endpoint of a daemon that stopped.
    const dead = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const stale = new FixedConnection(`http://127.0.0.1:${dead}/v1/namespaces/default/runtimes/bash/sessions/u1`, 'tok', 'sbx');
    const fresh = new FixedConnection(gateway.endpoint, 'tok', 'sbx');
    let current = stale;
    const connection = Object.assign(Object.create(fresh) as FixedConnection, {
      client: () => current.client(),
      invalidate: () => {
        current = fresh;
      },
    });
    gateway.respondWith({
      status: 200,
      headers: { 'content-type': 'application/x-ndjson; charset=utf-8' },
      body: [
        JSON.stringify({ sequence: 1, type: 'accepted', accepted: { operationID: 'op' } }) + '\n',
        JSON.stringify({ sequence: 2, type: 'output', output: { stream: 'stdout', data: b64('back\n') } }) + '\n',
        JSON.stringify({ sequence: 3, type: 'completed', completed: { command: { exitCode: 0 } } }) + '\n',
      ],
    });
    let screen = '';
    let done = 0;
    const session = new TerminalSession({ connection, write: (d) => (screen += d), close: () => undefined, onCommandFinished: () => (done += 1), showIntroduction: false });
    try {
      session.open();
      const started = Date.now();
      session.handleInput('echo back\r');
      await until(() => done === 1, 'the command');
      assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
      const text = strip(screen);
      assert.match(text, /Reconnecting to sbx…\r\nback\r\n/);
      assert.doesNotMatch(text, /ECONNREFUSED|127\.0\.0\.1|exit/);
      assert.equal(gateway.received.length, 1, 'sent once, to the new address');
    } finally {
      session.close();
      await stale.close();
      await fresh.close();
      await gateway.stop();
    }
  });
});

/** Whether a pid still runs (a zombie runs nothing). */
function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('sandbox terminal session against a real local gateway', function () {
  this.timeout(30_000);
  let t: TestGateway;
  let connection: FixedConnection | undefined;
  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    // Here, not in the test: a connection whose cancel is still in flight closes only when it is answered.
    await connection?.close();
    await t.cleanup();
  });

  it('Ctrl+C ends the sandbox process of `sleep 60`, and the terminal is usable after', async () => {
    const { P } = await readyRun(t.gw);
    connection = new FixedConnection(t.gw.url + P, t.gw.token, 'sbx', { cancel: true });
    const client = await connection.client();
    let screen = '';
    let finished = 0;
    const session = new TerminalSession({ connection, write: (d) => (screen += d), close: () => undefined, onCommandFinished: () => (finished += 1), showIntroduction: false });
    try {
      session.open();
      const started = Date.now();
      // The process runtime runs the command on this machine: it writes its pid, then becomes `sleep 60`.
      session.handleInput("sh -c 'echo $$ > ctrlc.pid; exec sleep 60'\r");
      let pid = 0;
      const pidOf = async () => Number((await client.read('ctrlc.pid').catch(() => undefined))?.contents.toString('utf8').trim() || 0);
      await until(() => pid > 1 && alive(pid), 'the command to start', async () => void (pid = await pidOf()));
      session.handleInput('\x03');
      await until(() => finished === 1, 'the command to end on Ctrl+C');
      assert.match(strip(screen), /\^C\r\n\[cancelled\]\r\n/);
      // Not just the screen: the sandbox's process is gone (the gateway answers a cancel once its group is gone).
      await until(() => !alive(pid), `the sandbox's sleep (pid ${pid}) to end`);
      assert.ok(Date.now() - started < 10_000, 'well before 60 s');
      session.handleInput('echo still-here\r');
      await until(() => finished === 2, 'the next command');
      assert.match(strip(screen), /still-here\r\n/);
    } finally {
      session.close();
    }
  });
});
