// The interactive terminal of local sandboxes (process and bubblewrap backends), end to end: the editor's client
// (GatewayClient.openTerminal) → the real local gateway's `GET P/pty` → a pty made by util-linux's `script` on this
// machine, the shell launched by the Run's backend. What a person relies on: the shell starts in the workspace with
// the Run's environment, has the editor's size and follows a resize, Ctrl+C interrupts, a full-screen program runs,
// the exit code comes back, one window holds a terminal at a time (takeover, replay, detach, end), bubblewrap's
// isolation holds in it, and closing the sandbox ends its terminals and every process they started.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import type { Run } from '../../../protocol/kruntimes/run';
import { TerminalRefusedError } from '../../../protocol/kruntimes/terminalSocket';
import { startGateway, type RunningGateway } from '../../../server/gateway/daemon';
import { Term } from '../../fixtures/terminalTerm';
import { until } from '../../fixtures/waits';
import { call, patchTermination, runsPath, waitPhase } from './harness';

/** Pids of live processes whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker) && !/^\S+ \(\S+\) Z/.test(fs.readFileSync(`/proc/${name}/stat`, 'utf8'))) out.push(Number(name));
    } catch {
      // ended meanwhile
    }
  }
  return out;
}

async function startRun(gw: RunningGateway, runtime: string): Promise<Run> {
  const r = await call(gw, 'POST', runsPath(), {
    body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { generateName: `pty-${runtime}-` }, spec: { runtime, mode: { session: {} } } },
  });
  assert.equal(r.status, 201, r.text);
  const run = await waitPhase(gw, r.json() as Run, ['Ready', 'Failed'], 60_000);
  assert.equal(run.status?.phase, 'Ready', run.status?.message);
  return run;
}

for (const runtime of ['process', 'bubblewrap'] as const) {
  describe(`interactive terminal of a local sandbox (${runtime} backend, GET P/pty)`, function () {
    this.timeout(120_000);
    let gw: RunningGateway;
    let stateDir: string;
    let run: Run;
    let gc: GatewayClient;
    const wire: string[] = [];
    const open: Term[] = [];

    before(async () => {
      stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `ss-local-pty-${runtime}-`));
      gw = await startGateway({ stateDir, tickMs: 50 });
      run = await startRun(gw, runtime);
      gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    });

    afterEach(() => {
      for (const t of open.splice(0)) t.socket?.end();
    });

    after(async () => {
      await gc?.close();
      await gw?.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    });

    async function openTerm(q: Parameters<GatewayClient['openTerminal']>[0] = {}): Promise<Term> {
      const t = new Term(wire);
      t.socket = await gc.openTerminal(q, t.handlers());
      open.push(t);
      return t;
    }

    /** A new terminal whose shell has started (its prompt, ending in `$ ` or `# `, is on screen). */
    async function shell(q: Parameters<GatewayClient['openTerminal']>[0] = {}): Promise<Term> {
      const t = await openTerm(q);
      await t.see(/[$#] $/m);
      return t;
    }

    /** Types `line` and returns what the shell printed up to `done` (a marker the typed line does not contain). */
    async function typed(t: Term, line: string): Promise<string> {
      const mark = t.text.length;
      t.socket.write(`${line}; echo do""ne-$((40+2))\r`);
      await t.see(/done-42/, mark);
      return t.text.slice(mark);
    }

    it("is advertised; the shell starts in the workspace (or a folder of it) with the Run's environment", async () => {
      assert.equal((await gc.status()).capabilities?.terminal, true);
      const t = await shell();
      const here = await typed(t, 'pwd; echo "art=$KRUNTIME_ARTIFACTS_DIR term=$TERM"');
      assert.match(here, /\/runs\/[^/]+\/workspace\r?\n/);
      assert.match(here, /art=\/\S+\/artifacts term=xterm-256color/);
      await gc.createDirectory('sub');
      const inSub = await shell({ cwd: 'sub' });
      assert.match(await typed(inSub, 'pwd'), /\/workspace\/sub\r?\n/);
    });

    it('has the editor’s size from the start and follows a resize', async () => {
      const t = await shell({ cols: 101, rows: 31 });
      await t.waitSize(31, 101);
      t.socket.resize(133, 41);
      await t.waitSize(41, 133);
    });

    it('Ctrl+C is a byte that interrupts `sleep` (the shell reports 130); a SIGINT frame does the same', async () => {
      const t = await shell();
      for (const interrupt of [() => t.socket.write(Buffer.of(0x03)), () => t.socket.signal('SIGINT')]) {
        let mark = t.text.length;
        t.socket.write(`sh -c 'printf "sl%sping\\n" ee; exec sleep 60'\r`);
        await t.see(/^sleeping\r?$/m, mark);
        mark = t.text.length;
        interrupt();
        await t.see(/[$#] $/, mark, 10_000); // the prompt is back long before 60 s
        assert.match(await typed(t, 'echo "rc=$?"'), /rc=130/);
      }
    });

    it('a full-screen program (vi) runs: alternate screen, insert mode, :wq — the file is in the workspace', async () => {
      const t = await shell({ cols: 90, rows: 24 });
      const mark = t.text.length;
      t.socket.write('vi -u NONE vi-made.txt\r');
      await t.until('vi switches to the alternate screen', () => t.text.slice(mark).includes('\x1b[?1049h'));
      t.socket.write('ihello from vi in the sandbox\x1b');
      t.socket.write(':wq\r');
      await t.until('vi leaves the alternate screen', () => t.text.slice(mark).includes('\x1b[?1049l'));
      await t.see(/[$#] $/m, t.text.lastIndexOf('\x1b[?'));
      assert.equal((await gc.read('vi-made.txt')).contents.toString('utf8'), 'hello from vi in the sandbox\n');
    });

    it('the exit code arrives as an exit frame, then the socket closes normally', async () => {
      const t = await shell();
      t.socket.write('exit 7\r');
      await t.until('exit frame and close', () => t.closeCode !== undefined);
      assert.equal(t.exitCode, 7);
      assert.equal(t.closeCode, 1000);
    });

    it('one connection at a time: 409 without takeover; the evicted one is told (4001); replay, detach, reattach, end', async () => {
      const a = await shell();
      await typed(a, 'echo first-wi""ndow');
      const session = a.socket.session;
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
      await typed(b, 'echo second-wi""ndow');

      // Detaching leaves the shell running for a later attach; ending (close 1000) ends it.
      b.socket.detach();
      await b.until('detached', () => b.closeCode !== undefined);
      const c = await openTerm({ session });
      assert.doesNotMatch(c.text, /second-window/, 'no replay unless asked for');
      await typed(c, 'echo third-wi""ndow');
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

    if (runtime === 'bubblewrap') {
      it("bubblewrap's isolation holds in the terminal: the host is read-only, the workspace writable, its own pids", async () => {
        const t = await shell();
        assert.match(await typed(t, 'touch /usr/ss-pty-escape 2>&1'), /Read-only file system/);
        assert.equal(fs.existsSync('/usr/ss-pty-escape'), false);
        await typed(t, 'echo inside > made-in-pty.txt');
        assert.equal((await gc.read('made-in-pty.txt')).contents.toString('utf8'), 'inside\n');
        assert.match(await typed(t, 'echo "pid=$$"'), /pid=[1-9]\r?\n/, 'the shell is one of the first pids of its own namespace');
      });
    }

    it('closing the sandbox ends its terminals (SESSION_GONE), with every process they started; new ones are refused', async () => {
      const t = await shell();
      const marker = `zz${process.pid}${runtime}pty`;
      // A job that ignores the hang-up a closing terminal sends: only the sandbox's end takes it.
      await typed(t, `nohup bash -c 'exec -a ${marker} sleep 300' >/dev/null 2>&1 & true`);
      await until('the job runs', () => processesWith(marker).length > 0);
      const patched = await patchTermination(gw, run, 'Drain');
      assert.equal(patched.status, 200, patched.text);
      await t.until('the terminal is closed by the drain', () => t.closeCode !== undefined, 30_000);
      assert.equal(t.closeCode, 1011);
      assert.equal(t.errors.at(-1)?.code, 'SESSION_GONE');
      await until('no process of the terminal is left', () => processesWith(marker).length === 0, 10_000);
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
}

describe('a local sandbox where this machine makes no pty', function () {
  this.timeout(60_000);
  it('advertises no terminal and refuses one in words', async () => {
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-local-nopty-'));
    const gw = await startGateway({ stateDir, tickMs: 50, hostTerminals: false });
    const run = await startRun(gw, 'process');
    const gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    try {
      assert.equal((await gc.status()).capabilities?.terminal, undefined, 'no terminal advertised');
      const refused = await gc.openTerminal({}, new Term([]).handlers()).then(
        () => assert.fail('a terminal without a pty'),
        (err: unknown) => err,
      );
      assert.ok(refused instanceof TerminalRefusedError, String(refused));
      assert.equal(refused.status, 409);
      assert.match(refused.message, /no interactive terminal/);
      assert.match(refused.message, /line-based Sandbox terminal/);
    } finally {
      await gc.close();
      await gw.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
