// The interactive terminal of OpenSandbox Runs, end to end: the editor's client
// (protocol/kruntimes/terminalSocket.ts, through GatewayClient.openTerminal) → the real local
// gateway daemon's `GET P/pty` → the daemon's connection to execd's PTY socket in the
// simulator (a real pty: `script` inside the sandbox's bubblewrap root, host /usr). Everything
// the editor receives is recorded, to prove the OpenSandbox API key and execd's token never
// reach it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '@alibaba-group/opensandbox';
import { request } from 'undici';
import { WebSocket } from 'ws';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { Run } from '../../../protocol/kruntimes/run';
import { TerminalRefusedError, terminalSocketUrl } from '../../../protocol/kruntimes/terminalSocket';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { localBackends } from '../../../server/sandboxes/localBackends';
import { resolveConnection } from '../../../server/sandboxes/opensandbox/connection';
import { OpenSandboxClient } from '../../../server/sandboxes/opensandbox/opensandboxClient';
import { Term } from '../../fixtures/terminalTerm';
import { call, patchTermination, runsPath, waitPhase } from '../gateway/harness';
import { connection, startTarget, type Target } from './target';

const CANARY_KEY = `canary-key-${Date.now().toString(36)}-pty-never-to-the-editor`;

describe('OpenSandbox interactive terminal through the local gateway (GET P/pty)', function () {
  this.timeout(120_000);
  let target: Target;
  let gw: RunningGateway;
  let stateDir: string;
  let run: Run;
  let gc: GatewayClient;
  let execdToken: string | undefined;
  /** Every byte and message the editor side received, in any test. */
  const wire: string[] = [];
  const open: Term[] = [];

  before(async () => {
    target = await startTarget({ apiKey: CANARY_KEY, graceMs: 50 });
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-osb-pty-'));
    const env = { OPEN_SANDBOX_DOMAIN: target.domain, OPEN_SANDBOX_API_KEY: target.apiKey };
    gw = await startGateway({ stateDir, tickMs: 50, backends: localBackends(stateDir, env) });
    const r = await call(gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { generateName: 'pty-' }, spec: { runtime: 'opensandbox', mode: { session: {} } } },
    });
    assert.equal(r.status, 201, r.text);
    run = await waitPhase(gw, r.json() as Run, ['Ready', 'Failed'], 60_000);
    assert.equal(run.status?.phase, 'Ready', run.status?.message);
    gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    // What the daemon sends execd: the token the endpoint lookup hands out with the API key.
    const client = new OpenSandboxClient(resolveConnection({ domain: target.domain, apiKey: target.apiKey ?? '', env: {} }));
    const [mine] = await client.listOurs({ run: run.metadata.uid ?? '' });
    const sbx = await Sandbox.connect({ sandboxId: mine?.id ?? '', connectionConfig: connection(target) });
    execdToken = Object.values((await sbx.getEndpoint(44772)).headers ?? {})[0];
    await sbx.close();
  });

  afterEach(() => {
    for (const t of open.splice(0)) t.socket?.end();
  });

  after(async () => {
    await gc?.close();
    await gw?.close();
    await target?.simulator?.close();
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  async function openTerm(q: Parameters<GatewayClient['openTerminal']>[0] = {}): Promise<Term> {
    const t = new Term(wire);
    t.socket = await gc.openTerminal(q, t.handlers());
    open.push(t);
    return t;
  }

  /** A new terminal whose shell has started (its prompt, `$ ` or `# `, is on screen). */
  async function shell(q: Parameters<GatewayClient['openTerminal']>[0] = {}): Promise<Term> {
    const t = await openTerm(q);
    await t.see(/[$#] $/m);
    return t;
  }

  it('the status advertises the terminal for an OpenSandbox Run', async () => {
    const status = await gc.status();
    assert.equal(status.capabilities?.terminal, true);
    wire.push(JSON.stringify(status, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
  });

  it('the terminal has the editor’s size from the start (no resize frame sent), and `stty size` sees a resize', async () => {
    const t = await shell({ cols: 101, rows: 31 });
    await t.waitSize(31, 101);
    t.socket.resize(133, 41);
    await t.waitSize(41, 133);
  });

  it('Ctrl+C is a byte that interrupts `sleep` at once (the shell reports 130), and the shell lives on', async () => {
    const t = await shell();
    let mark = t.text.length;
    // The marker comes from the process that then execs sleep; the typed line never contains it.
    t.socket.write(`sh -c 'printf "sl%sping\\n" ee; exec sleep 60'\r`);
    await t.see(/^sleeping\r?$/m, mark);
    mark = t.text.length;
    t.socket.write(Buffer.of(0x03));
    await t.see(/\^C[\s\S]*[$#] $/, mark, 10_000); // the tty echoes ^C, the prompt is back long before 60 s
    mark = t.text.length;
    t.socket.write('echo "rc=$?"\r');
    await t.see(/rc=130/, mark);
    mark = t.text.length;
    t.socket.write('echo still-al""ive\r');
    await t.see(/still-alive/, mark);
  });

  it('a full-screen program (vi) runs: alternate screen, insert mode, :wq — the file is in the workspace', async () => {
    const t = await shell({ cols: 90, rows: 24 });
    const mark = t.text.length;
    t.socket.write('vi -u NONE vi-made.txt\r');
    await t.until('vi switches to the alternate screen', () => t.text.slice(mark).includes('\x1b[?1049h'));
    await t.see(/vi-made\.txt/, mark);
    t.socket.write('ihello from vi in the sandbox\x1b');
    t.socket.write(':wq\r');
    await t.until('vi leaves the alternate screen', () => t.text.slice(mark).includes('\x1b[?1049l'));
    await t.see(/[$#] $/m, t.text.lastIndexOf('\x1b[?'));
    const file = await gc.read('vi-made.txt');
    assert.equal(file.contents.toString('utf8'), 'hello from vi in the sandbox\n');
  });

  it('the exit code arrives as an exit frame, then the socket closes normally', async () => {
    const t = await shell();
    t.socket.write('exit 7\r');
    await t.until('exit frame and close', () => t.closeCode !== undefined);
    assert.equal(t.exitCode, 7);
    assert.equal(t.closeCode, 1000);
  });

  it('a second attach is refused with 409 unless it takes over; the evicted one is told and closed with 4001; replay and end', async () => {
    const a = await shell();
    a.socket.write('echo first-wi""ndow\r');
    await a.see(/first-window/);
    const session = a.socket.session;
    assert.match(session, /^[A-Za-z0-9_-]+$/);

    const refused = await openTerm({ session }).then(
      () => assert.fail('attached twice'),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof TerminalRefusedError, String(refused));
    assert.equal(refused.status, 409);
    assert.match(refused.message, /takeover/);

    const b = await openTerm({ session, takeover: true, since: 0 });
    await a.until('the evicted terminal closes', () => a.closeCode !== undefined);
    assert.equal(a.closeCode, 4001);
    assert.deepEqual(a.errors.map((e) => e.code), ['TAKEN_OVER']);
    assert.match(b.text, /first-window/, 'the taker replays what the terminal showed');
    const mark = b.text.length;
    b.socket.write('echo second-wi""ndow\r');
    await b.see(/second-window/, mark);

    // Detaching leaves the shell for a later attach; ending (close 1000) ends it.
    b.socket.detach();
    await b.until('detached', () => b.closeCode !== undefined);
    const c = await openTerm({ session });
    const m2 = c.text.length;
    c.socket.write('echo third-wi""ndow\r');
    await c.see(/third-window/, m2);
    c.socket.end();
    await c.until('ended', () => c.closeCode !== undefined);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const again = await openTerm({ session }).then(
        () => undefined,
        (err: unknown) => err,
      );
      if (again instanceof TerminalRefusedError && again.status === 404) break;
      assert.ok(Date.now() < deadline, `the ended terminal is still attachable: ${String(again)}`);
    }
  });

  it('an editor killed mid-session (its socket never closed) leaves the shell running: a reattach with takeover replays and goes on', async () => {
    // The editor is another process, SIGKILLed as a reloading window's extension host is: no close frame is sent.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import { GatewayClient } from ${JSON.stringify(path.resolve(__dirname, '../../../protocol/kruntimes/gatewayClient.ts'))};
        const gc = new GatewayClient({ endpoint: { url: process.env.PTY_URL }, token: process.env.PTY_TOKEN });
        let seen = '';
        const socket = await gc.openTerminal({}, { output: (b) => {
          seen += b.toString();
          if (/set:kept-42/.test(seen)) process.stdout.write('SESSION ' + socket.session + '\\n');
        } });
        socket.write('KEPT=kept-$((6*7)); echo "set:$KEPT"\\r');
        setInterval(() => undefined, 1000);`,
      ],
      { env: { ...process.env, PTY_URL: run.status?.endpoint?.url ?? '', PTY_TOKEN: gw.token }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const session = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const m = /SESSION (\S+)/.exec(out);
        if (m) resolve(m[1] as string);
      });
      child.once('exit', (code) => reject(new Error(`the editor process exited (${code}) before it attached: ${out}`)));
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    const back = await openTerm({ session, takeover: true, since: 0 });
    assert.match(back.text, /set:kept-42/, 'the output before the editor died is replayed');
    const mark = back.text.length;
    back.socket.write('echo "still:$KEPT"\r');
    await back.see(/still:kept-42/, mark);
  });

  it('refuses without the gateway token, with a wrong one, for an unknown Run, a bad query, and a plain GET', async () => {
    const url = run.status?.endpoint?.url ?? '';
    const attempt = (u: string, headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = new WebSocket(u, { headers });
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString('utf8')));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.once('open', () => {
          ws.terminate();
          reject(new Error(`upgraded: ${u}`));
        });
        ws.once('error', () => undefined);
      });
    const none = await attempt(terminalSocketUrl(url), {});
    assert.equal(none.status, 401);
    const wrong = await attempt(terminalSocketUrl(url), { Authorization: `Bearer ${gw.token}x` });
    assert.equal(wrong.status, 401);
    const other = await attempt(terminalSocketUrl(url.replace(run.metadata.uid ?? '', '00000000-0000-0000-0000-000000000000')), { Authorization: `Bearer ${gw.token}` });
    assert.equal(other.status, 404);
    const bad = await attempt(`${terminalSocketUrl(url)}?cols=0`, { Authorization: `Bearer ${gw.token}` });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /cols must be/);
    const foreign = await attempt(terminalSocketUrl(url), { Authorization: `Bearer ${gw.token}`, Origin: 'http://evil.example' });
    assert.equal(foreign.status, 403);
    const plain = await request(`${url}/pty`, { headers: { authorization: `Bearer ${gw.token}` } });
    assert.equal(plain.statusCode, 426);
    await plain.body.text();
    for (const r of [none, wrong, other, bad, foreign]) wire.push(r.body);
  });

  it('the OpenSandbox API key and execd token never reach the editor, not even through `env` in the sandbox', async () => {
    const t = await shell();
    const mark = t.text.length;
    t.socket.write('env; echo env-d""one\r');
    await t.see(/env-done/, mark);
    assert.ok(execdToken && execdToken.length > 8, 'the simulator hands out an execd token');
    const seen = wire.join('\n');
    assert.ok(seen.length > 1000, 'the editor saw a lot');
    assert.ok(!seen.includes(CANARY_KEY), 'the API key reached the editor');
    assert.ok(!seen.includes(execdToken), 'the execd token reached the editor');
  });

  it('Drain closes open terminals (SESSION_GONE) and new ones are refused', async () => {
    const t = await shell();
    const patched = await patchTermination(gw, run, 'Drain');
    assert.equal(patched.status, 200, patched.text);
    await t.until('the terminal is closed by the drain', () => t.closeCode !== undefined, 30_000);
    assert.equal(t.closeCode, 1011);
    assert.equal(t.errors.at(-1)?.code, 'SESSION_GONE');
    const after = await openTerm().then(
      () => assert.fail('a terminal on a drained Run'),
      (err: unknown) => err,
    );
    assert.ok(after instanceof TerminalRefusedError, String(after));
    assert.ok([404, 409].includes(after.status), `${after.status} ${after.message}`);
    const done = await waitPhase(gw, run, ['Succeeded', 'Failed'], 30_000);
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
  });
});
