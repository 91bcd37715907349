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
import { expectEndedByDrain, TerminalOpener, terminalContract } from '../../fixtures/terminalContract';
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
    const terms = new TerminalOpener(() => gc);
    const { openTerm, shell } = terms;

    before(async () => {
      stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `ss-local-pty-${runtime}-`));
      gw = await startGateway({ stateDir, tickMs: 50 });
      run = await startRun(gw, runtime);
      gc = new GatewayClient({ endpoint: { url: run.status?.endpoint?.url ?? '' }, token: gw.token });
    });

    afterEach(() => terms.endAll());

    after(async () => {
      await gc?.close();
      await gw?.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
    });

    it("is advertised; the shell starts in the workspace (or a folder of it) with the Run's environment", async () => {
      assert.equal((await gc.status()).capabilities?.terminal, true);
      const t = await shell();
      const here = await t.typed('pwd; echo "art=$KRUNTIME_ARTIFACTS_DIR term=$TERM"');
      assert.match(here, /\/runs\/[^/]+\/workspace\r?\n/);
      assert.match(here, /art=\/\S+\/artifacts term=xterm-256color/);
      await gc.createDirectory('sub');
      const inSub = await shell({ cwd: 'sub' });
      assert.match(await inSub.typed('pwd'), /\/workspace\/sub\r?\n/);
    });

    terminalContract(() => ({ openTerm, shell, read: async (rel) => (await gc.read(rel)).contents.toString('utf8'), url: run.status?.endpoint?.url ?? '', token: gw.token }));

    if (runtime === 'bubblewrap') {
      it("bubblewrap's isolation holds in the terminal: the host is read-only, the workspace writable, its own pids", async () => {
        const t = await shell();
        assert.match(await t.typed('touch /usr/ss-pty-escape 2>&1'), /Read-only file system/);
        assert.equal(fs.existsSync('/usr/ss-pty-escape'), false);
        await t.typed('echo inside > made-in-pty.txt');
        assert.equal((await gc.read('made-in-pty.txt')).contents.toString('utf8'), 'inside\n');
        assert.match(await t.typed('echo "pid=$$"'), /pid=[1-9]\r?\n/, 'the shell is one of the first pids of its own namespace');
      });
    }

    it('closing the sandbox ends its terminals (SESSION_GONE), with every process they started; new ones are refused', async () => {
      const t = await shell();
      const marker = `zz${process.pid}${runtime}pty`;
      // A job that ignores the hang-up a closing terminal sends: only the sandbox's end takes it.
      await t.typed(`nohup bash -c 'exec -a ${marker} sleep 300' >/dev/null 2>&1 & true`);
      await until('the job runs', () => processesWith(marker).length > 0);
      const patched = await patchTermination(gw, run, 'Drain');
      assert.equal(patched.status, 200, patched.text);
      await expectEndedByDrain(t, openTerm);
      await until('no process of the terminal is left', () => processesWith(marker).length === 0, 10_000);
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
