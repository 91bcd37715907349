// Backends and isolation for real: bubblewrap (Debian's `bwrap`, installed by
// scripts/install-test-deps.sh) with isolateNetwork cannot reach a server on the host's
// loopback, the host is read-only and the state dir (with the token) hidden, and a cancel
// kills every process of the namespace; the same network request on `process` is refused;
// a path escape through a symlink is refused on both.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BubblewrapBackend } from '../../../server/local/bubblewrapBackend';
import { b64, call, readyRun, startTestGateway, type TestGateway } from './harness';

function bwrapInstalled(): boolean {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/** Host pids whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      if (cmd.includes(marker) && !/\) Z /.test(stat)) found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

const execBody = (argv: string[], extra: Record<string, unknown> = {}): unknown => ({ command: { argv, ...extra } });

describe('local gateway: backends and isolation', function () {
  this.timeout(40_000);
  let t: TestGateway;
  let hostServer: http.Server;
  let hostPort: number;

  before(async () => {
    t = await startTestGateway({ writeStateFile: true });
    hostServer = http.createServer((_req, res) => res.end('host-secret'));
    await new Promise<void>((r) => hostServer.listen(0, '127.0.0.1', r));
    hostPort = (hostServer.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise((r) => hostServer.close(r));
    await t.cleanup();
  });

  for (const runtime of ['process', 'bubblewrap']) {
    it(`${runtime}: a path escape through a symlink is refused for reads, writes and listings`, async function () {
      // Never skipped: `npm test` installs bubblewrap first (scripts/install-test-deps.sh).
      if (runtime === 'bubblewrap') assert.ok(bwrapInstalled(), 'bwrap is not installed: run scripts/install-test-deps.sh');
      const { P } = await readyRun(t.gw, { runtime });
      const ln = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['sh', '-c', 'ln -s /etc etc-link && ln -s /etc/passwd pw && mkdir -p in && ln -s in ok-link && ln -s ../ up-link']) });
      assert.equal(ln.status, 200, ln.text);
      const escape = '{"error":"file path must not escape the session workspace"}\n';
      for (const [method, path, body] of [
        ['GET', `${P}/files/etc-link/passwd`, undefined],
        ['GET', `${P}/files/pw`, undefined],
        ['GET', `${P}/files?path=etc-link`, undefined],
        ['GET', `${P}/files?path=up-link`, undefined],
        ['POST', `${P}/operations:execute`, { writeFile: { path: 'etc-link/evil', contents: b64('x') } }],
        ['POST', `${P}/operations:execute`, { writeFile: { path: 'pw', contents: b64('x') } }],
        ['POST', `${P}/operations:execute`, { command: { argv: ['true'], workingDirectory: 'etc-link' } }],
      ] as const) {
        const r = await call(t.gw, method, path, body === undefined ? {} : { body });
        assert.equal(r.status, 400, `${method} ${path}`);
        assert.equal(r.text, escape, `${method} ${path}`);
      }
      // A symlink that stays inside the workspace is fine.
      const w = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { writeFile: { path: 'ok-link/f.txt', contents: b64('inside') } } });
      assert.equal(w.status, 200);
      const r = await call(t.gw, 'GET', `${P}/files/in/f.txt`);
      assert.equal(r.text, `{"contents":"${b64('inside')}","truncated":false}\n`);
    });
  }

  it('process: isolateNetwork is refused (409), never ignored', async () => {
    const { P } = await readyRun(t.gw, { runtime: 'process' });
    const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['true'], { isolateNetwork: true }) });
    assert.equal(r.status, 409);
    assert.match((r.json() as { error: string }).error, /^backend "process" cannot isolate the network/);
    const s = await call(t.gw, 'POST', `${P}/operations:stream`, { body: execBody(['true'], { isolateNetwork: true }) });
    assert.equal(s.status, 409, 'refused before the stream starts');
    // Without the flag it reaches the host loopback.
    const reach = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['bash', '-c', `exec 3<>/dev/tcp/127.0.0.1/${hostPort}`]) });
    assert.equal(reach.text, '{"command":{"exitCode":0}}\n');
  });

  describe('bubblewrap', () => {
    before(async function () {
      assert.ok(bwrapInstalled(), 'bwrap is not installed: run scripts/install-test-deps.sh');
      const probe = await new BubblewrapBackend().probe();
      assert.ok(probe.ok, `bwrap is installed but does not work here: ${probe.ok ? '' : probe.reason}`);
    });

    it('isolateNetwork: true cannot reach a server on the host loopback; false can', async () => {
      const { P } = await readyRun(t.gw, { runtime: 'bubblewrap' });
      const status = await call(t.gw, 'GET', P);
      assert.deepEqual((status.json() as { capabilities: unknown }).capabilities, {
        rangedReads: true,
        cancel: true,
        isolateNetwork: true,
        backend: 'bubblewrap',
        isolation: 'namespaces',
        terminal: true,
      });
      const probe = `exec 3<>/dev/tcp/127.0.0.1/${hostPort} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3`;
      const isolated = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['bash', '-c', probe], { isolateNetwork: true }) });
      assert.equal(isolated.status, 200);
      const res = (isolated.json() as { command: { exitCode: number; stdout?: string } }).command;
      assert.notEqual(res.exitCode, 0);
      assert.ok(!Buffer.from(res.stdout ?? '', 'base64').toString().includes('host-secret'));
      const links = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['sh', '-c', "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"], { isolateNetwork: true }) });
      assert.equal(Buffer.from((links.json() as { command: { stdout: string } }).command.stdout, 'base64').toString(), 'lo\n');
      const open = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['bash', '-c', probe]) });
      const openRes = (open.json() as { command: { exitCode: number; stdout?: string } }).command;
      assert.equal(openRes.exitCode, 0);
      assert.ok(Buffer.from(openRes.stdout ?? '', 'base64').toString().includes('host-secret'));
    });

    it('only the workspace is writable, and the state dir (with the token) is hidden', async () => {
      const { P } = await readyRun(t.gw, { runtime: 'bubblewrap' });
      const stateFile = `${t.stateDir}/gateway.json`;
      assert.ok(fs.existsSync(stateFile));
      const script = `touch /usr/sandbox-probe 2>/dev/null && echo usr-writable; test -e ${stateFile} && echo token-visible; echo ok > in-workspace.txt && echo ws-ok; echo a > "$KRUNTIME_ARTIFACTS_DIR/a" && echo artifacts-ok; echo t > /tmp/t && echo tmp-ok`;
      const r = await call(t.gw, 'POST', `${P}/operations:execute`, { body: execBody(['sh', '-c', script]) });
      assert.equal(Buffer.from((r.json() as { command: { stdout: string } }).command.stdout, 'base64').toString(), 'ws-ok\nartifacts-ok\ntmp-ok\n');
      assert.ok(!fs.existsSync('/usr/sandbox-probe'));
    });

    it("a cancel kills every process of the namespace (`sh -c 'sleep 600 & sleep 600'`)", async () => {
      const { P } = await readyRun(t.gw, { runtime: 'bubblewrap' });
      const marker = '600.4242';
      const pending = call(t.gw, 'POST', `${P}/operations:execute`, {
        body: execBody(['sh', '-c', `setsid sleep ${marker} & sleep ${marker} & sleep ${marker}`]),
        headers: { 'idempotency-key': 'bwrap-cancel' },
      });
      const deadline = Date.now() + 10_000;
      while (processesWith(`sleep\0${marker}`).length < 3) {
        assert.ok(Date.now() < deadline, 'sleeps did not start');
        await new Promise((r) => setTimeout(r, 25));
      }
      const c = await call(t.gw, 'POST', `${P}/operations/bwrap-cancel:cancel`);
      assert.equal(c.text, '{"result":"cancelled"}\n');
      const reply = await pending;
      assert.deepEqual(reply.json(), { command: { exitCode: -1, cancelled: true } });
      const until = Date.now() + 3000;
      while (processesWith(`sleep\0${marker}`).length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 25));
      assert.deepEqual(processesWith(`sleep\0${marker}`), [], 'even the setsid one is gone');
    });
  });
});
