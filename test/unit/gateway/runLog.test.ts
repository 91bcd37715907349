// runtimed's log of a local Run, on the real local daemon: after every mutation exactly the
// audit line upstream's runtimed writes (fields, order, omitempty, the outcome table — a
// cancelled, a timed-out and an operation-deadline command included), the command's stdout and
// stderr as their own lines, nothing for reads and listings, nothing secret (the canary), each
// line stored in the kubelet CRI format; and `GET …/runs/{name}/log` read like `kubectl logs`
// (tailLines before sinceTime, timestamps, follow within a second, 400/422 on bad queries), and
// `sandbox logs NAME [-f] [--tail N] [--since DUR] [--timestamps]` on top of it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { request } from 'undici';
import { call, b64, patchTermination, readyRun, runsPath, startTestGateway, waitCommandRunning, type TestGateway } from './harness';
import type { Run } from '../../../protocol/kruntimes/run';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { captureIo } from '../../fixtures/cliCapture';
import { assertAuditShape, assertEveryKindAndOutcome, audits, type Line, outcomeOf, runEveryKindAndOutcome } from '../../fixtures/runtimedAudit';

function logPath(run: Run, query = ''): string {
  return `${runsPath(run.metadata.namespace, run.metadata.name)}/log${query ? `?${query}` : ''}`;
}

async function logLines(t: TestGateway, run: Run, query = ''): Promise<Line[]> {
  const r = await call(t.gw, 'GET', logPath(run, query));
  assert.equal(r.status, 200, r.text);
  return r.text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Line);
}

/** A live `follow=true` reader: the lines so far, and a bounded wait for one more to match. */
function followLog(t: TestGateway, run: Run, query: string) {
  const controller = new AbortController();
  const lines: { text: string; at: number }[] = [];
  let ended = false;
  const waiters = new Set<() => void>();
  const done = (async () => {
    const res = await request(t.gw.url + logPath(run, query), {
      headers: { authorization: `Bearer ${t.gw.token}` },
      signal: controller.signal,
      bodyTimeout: 0,
    });
    assert.equal(res.statusCode, 200);
    let buf = '';
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString('utf8');
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push({ text: buf.slice(0, i), at: performance.now() });
        buf = buf.slice(i + 1);
      }
      for (const w of waiters) w();
    }
    ended = true;
    for (const w of waiters) w();
  })().catch((err: unknown) => {
    if (!controller.signal.aborted) throw err;
  });
  const waitFor = (what: string, pred: (l: { text: string; at: number }) => boolean, timeoutMs = 10_000): Promise<{ text: string; at: number }> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const hit = lines.find(pred);
        if (hit) {
          finish();
          resolve(hit);
        } else if (ended) {
          finish();
          reject(new Error(`the log ended without ${what}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const finish = (): void => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  return { lines, waitFor, done, isEnded: () => ended, close: () => controller.abort() };
}

describe('local runtime: runtimed log of a Run', function () {
  this.timeout(60_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway({ writeStateFile: true });
  });
  after(async () => {
    await t.cleanup();
  });

  it('writes upstream’s audit line after each mutation kind and outcome, output as stdout/stderr lines, nothing for reads', async () => {
    const { run, P } = await readyRun(t.gw);
    const exec = (body: unknown, headers: Record<string, string> = {}) => call(t.gw, 'POST', `${P}/operations:execute`, { body, headers, timeoutMs: 20_000 });
    const expected = await runEveryKindAndOutcome({
      cancelledBy: 'id',
      execute: async (op) => (await exec(op)).status,
      cancelRunningCommand: async () => {
        const pending = exec({ command: { argv: ['sleep', '600'] } }, { 'idempotency-key': 'log-cancel-1' });
        const opId = await waitCommandRunning(t.gw, run);
        assert.equal((await call(t.gw, 'POST', `${P}/operations/${opId}:cancel`)).status, 200);
        assert.equal((await pending).status, 200);
      },
    });
    const before = (await logLines(t, run)).length;
    // Reads and listings are not audited.
    assert.equal((await call(t.gw, 'GET', `${P}/files/d/b.txt`)).status, 200);
    assert.equal((await call(t.gw, 'GET', `${P}/files`)).status, 200);
    assert.equal((await logLines(t, run)).length, before, 'reads and listings write no line');
    assertEveryKindAndOutcome(await logLines(t, run), run, expected);
  });

  it('an operation that hits the session operation timeout is timed_out with DeadlineExceeded; one whose caller leaves is cancelled', async () => {
    const { run, P } = await readyRun(t.gw, { session: { operationTimeout: '500ms' } });
    assert.equal((await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sleep', '30'] } } })).status, 504);
    const gone = new AbortController();
    const leaving = call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sleep', '30'] } }, signal: gone.signal }).catch(() => undefined);
    await waitCommandRunning(t.gw, run);
    gone.abort();
    await leaving;
    const follow = followLog(t, run, 'follow=true');
    try {
      await follow.waitFor('the second audit line', () => follow.lines.filter((l) => l.text.includes('"audit"')).length >= 2);
    } finally {
      follow.close();
    }
    const lines = audits(await logLines(t, run));
    for (const a of lines) assertAuditShape(a, run);
    assert.deepEqual(lines.map(outcomeOf), [
      { operation: 'command', outcome: 'timed_out', status_code: 'DeadlineExceeded' },
      { operation: 'command', outcome: 'cancelled', status_code: 'Canceled' },
    ]);
  });

  it('canary: a secret in argv, env, stdin and a written file never reaches the log; stdout lines hold only what the command printed', async () => {
    const { run, P } = await readyRun(t.gw);
    const secret = 'CANARY-7f3a9c2e-do-not-log';
    const exec = (body: unknown) => call(t.gw, 'POST', `${P}/operations:execute`, { body });
    const r = await exec({ command: { argv: ['sh', '-c', `cat >/dev/null; test -n "$TOKEN"; echo printed-ok # ${secret}`], env: { TOKEN: secret }, stdin: b64(`${secret}\n`) } });
    assert.equal(r.status, 200, r.text);
    assert.equal((await exec({ writeFile: { path: `${secret}.txt`, contents: b64(secret) } })).status, 200);
    assert.equal((await exec({ command: { shell: `echo ${secret} >/dev/null` } })).status, 200);
    const raw = fs.readFileSync(t.gw.layout.runLogFile(run.metadata.uid ?? ''), 'utf8');
    assert.ok(!raw.includes(secret), 'the log file never holds the secret');
    const lines = await logLines(t, run);
    assert.deepEqual(
      lines.filter((l) => l.stream !== 'audit').map((l) => [l.stream, l.message]),
      [['stdout', 'printed-ok']],
    );
    assert.equal(audits(lines).length, 3);
  });

  it('logs the output of a streamed command (operations:stream) as well', async () => {
    const { run, P } = await readyRun(t.gw);
    const r = await call(t.gw, 'POST', `${P}/operations:stream`, { body: { command: { shell: 'echo streamed-1; echo streamed-2 >&2; exit 4' } } });
    assert.equal(r.status, 200, r.text);
    const lines = await logLines(t, run);
    assert.deepEqual(
      lines.map((l) => [l.stream, l.message, l.outcome, l.exit_code]),
      [
        ['stdout', 'streamed-1', 'failed', 4],
        ['stderr', 'streamed-2', 'failed', 4],
        ['audit', 'session operation completed', 'failed', 4],
      ],
    );
  });

  it('stores each line as a container log line: `<RFC3339Nano> stdout F <json>`', async () => {
    const { run, P } = await readyRun(t.gw);
    await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: 'echo x' } } });
    const raw = fs.readFileSync(t.gw.layout.runLogFile(run.metadata.uid ?? ''), 'utf8').split('\n').filter(Boolean);
    assert.equal(raw.length, 2);
    for (const l of raw) {
      const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z) stdout F (\{.*\})$/.exec(l);
      assert.ok(m, l);
      assert.ok(Math.abs(Date.parse(m[1] as string) - Date.now()) < 60_000);
      JSON.parse(m[2] as string);
    }
  });

  it('tailLines, sinceTime, sinceSeconds and timestamps behave like kubectl logs; bad queries are 400/422', async () => {
    const { run, P } = await readyRun(t.gw);
    for (const i of [1, 2, 3]) await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: `echo line-${i}` } } });
    const all = (await call(t.gw, 'GET', logPath(run, 'timestamps=true'))).text.split('\n').filter(Boolean);
    assert.equal(all.length, 6);
    for (const l of all) assert.match(l, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z \{/);
    const stamps = all.map((l) => l.slice(0, l.indexOf(' ')));
    const text = (q: string) => call(t.gw, 'GET', logPath(run, q)).then((r) => r.text);
    const plain = all.map((l) => l.slice(l.indexOf(' ') + 1) + '\n');

    assert.equal(await text('tailLines=2'), plain.slice(-2).join(''));
    assert.equal(await text('tailLines=0'), '');
    assert.equal(await text('tailLines=100'), plain.join(''));
    // sinceTime keeps lines at or after it (the stamp of line 3 keeps lines 3..6).
    assert.equal(await text(`sinceTime=${encodeURIComponent(stamps[2] as string)}`), plain.slice(2).join(''));
    // tail first, then since: the last 2 lines, of which those since line 3 — still 2; since line 6 of the last 4 → 1.
    assert.equal(await text(`tailLines=4&sinceTime=${encodeURIComponent(stamps[5] as string)}`), plain.slice(5).join(''));
    assert.equal(await text(`sinceTime=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`), '');
    assert.equal(await text('sinceSeconds=3600'), plain.join(''));

    const status = async (q: string) => (await call(t.gw, 'GET', logPath(run, q))).status;
    assert.equal(await status('tailLines=-1'), 422);
    assert.equal(await status('tailLines=abc'), 400);
    assert.equal(await status('sinceSeconds=0'), 422);
    assert.equal(await status('sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z'), 422);
    assert.equal(await status('sinceTime=yesterday'), 400);
    assert.equal((await call(t.gw, 'GET', logPath(run), { token: 'wrong' })).status, 401);
    assert.equal((await call(t.gw, 'GET', `${runsPath('default', 'no-such-run')}/log`)).status, 404);
  });

  it('follow delivers a new line within a second and ends when the Run ends', async () => {
    const { run, P } = await readyRun(t.gw);
    await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: 'echo before' } } });
    const follow = followLog(t, run, 'follow=true&tailLines=1');
    try {
      await follow.waitFor('the tail line', (l) => l.text.includes('"audit"'));
      assert.equal(follow.lines.length, 1, 'tailLines=1 applies to the backlog');
      const delays: number[] = [];
      for (const i of [1, 2, 3]) {
        const sent = performance.now();
        await call(t.gw, 'POST', `${P}/operations:execute`, { body: { writeFile: { path: `f${i}`, contents: b64('x') } } });
        const got = await follow.waitFor(`audit line ${i}`, (l) => l.at >= sent && l.text.includes('"write_file"'));
        delays.push(got.at - sent);
        follow.lines.length = 0;
      }
      console.log(`      follow: write → line delivered in ${delays.map((d) => d.toFixed(1)).join(', ')} ms`);
      for (const d of delays) assert.ok(d < 1000, `delivered in ${d} ms`);
      assert.equal((await patchTermination(t.gw, run, 'Immediate')).status, 200);
      await follow.done;
      assert.ok(follow.isEnded(), 'the follow ends with the Run');
    } finally {
      follow.close();
    }
    // A finished Run's log: follow returns what there is and ends at once.
    const r = await call(t.gw, 'GET', logPath(run, 'follow=true'), { timeoutMs: 5_000 });
    assert.equal(r.status, 200);
    assert.equal(r.text.split('\n').filter(Boolean).length, 5);
  });

  it('`sandbox logs` prints the tail, follows with -f until the Run ends, and refuses a bad --tail', async () => {
    const { run, P } = await readyRun(t.gw);
    const name = run.metadata.name ?? '';
    for (const i of [1, 2]) await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: `echo cli-${i}` } } });
    const cli = async (args: string[]) => {
      const c = captureIo();
      const code = await runSandboxCommand([args[0] as string, '--state-dir', t.stateDir, ...args.slice(1)], c.io);
      return { code, out: c.out(), err: c.err() };
    };
    const tail = await cli(['logs', name, '--tail', '2', '--timestamps']);
    assert.equal(tail.code, 0, tail.err);
    const tailLines = tail.out.split('\n').filter(Boolean);
    assert.equal(tailLines.length, 2);
    assert.match(tailLines[0] as string, /^\S+Z \{"run_uid".*"stream":"stdout","message":"cli-2"/);
    assert.match(tailLines[1] as string, /"stream":"audit"/);
    assert.equal((await cli(['logs', name, '--since', '1h'])).out.split('\n').filter(Boolean).length, 4);

    const c = captureIo();
    const following = runSandboxCommand(['logs', '--state-dir', t.stateDir, name, '-f', '--tail', '0'], c.io);
    // Nothing to wait on but the follow request itself: a line written now must show up.
    const deadline = Date.now() + 10_000;
    while (!c.out().includes('"cli-3"')) {
      await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { shell: 'echo cli-3' } } });
      if (Date.now() > deadline) throw new Error(`no followed line: ${c.out()} ${c.err()}`);
    }
    assert.ok(!c.out().includes('cli-2'), '--tail 0 shows only new lines');
    assert.equal((await patchTermination(t.gw, run, 'Immediate')).status, 200);
    assert.equal(await following, 0, c.err());

    const bad = await cli(['logs', name, '--tail', 'many']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--tail needs a number/);
  });
});
