// The CLI as a person and a script use it: `sandbox create` starts the daemon on demand,
// `exec` returns the command's exit code, `close` drains and `artifacts --json` lists verified
// artifacts; `session diff` lists what a sandbox changed since a session revision; `doctor` names each backend
// and why one does not work.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { runDoctorCommand } from '../../../server/cli/doctor';
import { runSandboxCommand } from '../../../server/cli/sandbox';
import { runSessionCommand } from '../../../server/cli/session';
import { stopGateway } from '../../../server/gateway/daemonClient';
import { BubblewrapBackend } from '../../../server/local/bubblewrapBackend';
import { createLogger } from '../../../server/log';
import { openSessionRepository } from '../../../server/repository/open';
import { LocalSandboxProvider } from '../../../server/sandboxes/localProvider';
import { SandboxSessionService } from '../../../server/sessions/sandboxSessions';

const ROOT = path.resolve(__dirname, '../../..');
const GATEWAY = [process.execPath, '--import', 'tsx', path.join(ROOT, 'test/fixtures/gatewayMain.ts')];

function sink(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  return {
    stream: new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(Buffer.from(chunk));
        done();
      },
    }),
    text: () => Buffer.concat(chunks).toString(),
  };
}

async function sandbox(stateDir: string, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await runSandboxCommand([...args.slice(0, 1), '--state-dir', stateDir, ...args.slice(1)], { stdout: out.stream, stderr: err.stream }, { gatewayCommand: GATEWAY });
  return { code, out: out.text(), err: err.text() };
}

describe('CLI: sandbox and doctor', function () {
  this.timeout(60_000);
  let stateDir: string;
  before(async () => {
    stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-cli-'));
  });
  after(async () => {
    await stopGateway({ stateDir, timeoutMs: 5000 });
    await fs.rm(stateDir, { recursive: true, force: true });
  });

  it('create → exec → close (Drain) → artifacts → delete', async () => {
    const created = await sandbox(stateDir, ['create', '--name', 'cli-demo', '--env', 'GREETING=hi', '--json']);
    assert.equal(created.code, 0, created.err);
    const summary = JSON.parse(created.out) as { name: string; phase: string; endpoint: string };
    assert.equal(summary.name, 'cli-demo');
    assert.equal(summary.phase, 'Ready');

    const ok = await sandbox(stateDir, ['exec', 'cli-demo', '--shell', 'printf "$GREETING" > "$KRUNTIME_ARTIFACTS_DIR/greeting.txt"; mkdir -p "$KRUNTIME_ARTIFACTS_DIR/site/css" && echo body > "$KRUNTIME_ARTIFACTS_DIR/site/css/a.css"; echo out; echo err >&2; exit 7']);
    assert.equal(ok.code, 7);
    assert.equal(ok.out, 'out\n');
    assert.equal(ok.err, 'err\n');
    // The command must print before its timeout: 2 s leaves a loaded machine time to start `sh` (300 ms did not).
    const slow = await sandbox(stateDir, ['exec', 'cli-demo', '--timeout-ms', '2000', '--shell', 'printf partial; sleep 30']);
    assert.deepEqual([slow.code, slow.out], [124, 'partial']);
    // A program the sandbox does not have: 127 and the words a shell uses, streamed or as JSON.
    assert.deepEqual(await sandbox(stateDir, ['exec', 'cli-demo', '--', 'no-such-program', 'x']), { code: 127, out: '', err: 'error: no-such-program: command not found in sandbox default/cli-demo\n' });
    assert.deepEqual(await sandbox(stateDir, ['exec', 'cli-demo', '--json', '--', 'no-such-program']), { code: 127, out: '', err: '{"error":"no-such-program: command not found in sandbox default/cli-demo"}\n' });
    const asJson = await sandbox(stateDir, ['exec', 'cli-demo', '--json', '--', 'echo', 'hello']);
    assert.deepEqual(JSON.parse(asJson.out), { exitCode: 0, stdout: 'hello\n', stderr: '', timedOut: false, cancelled: false });
    const ops = await sandbox(stateDir, ['operations', 'cli-demo', '--json']);
    assert.equal((JSON.parse(ops.out) as unknown[]).length, 3, 'a program that is not there starts no operation');

    const closed = await sandbox(stateDir, ['close', 'cli-demo', '--json']);
    assert.equal(closed.code, 0, closed.err);
    const drained = JSON.parse(closed.out) as { phase: string; artifacts?: { name: string }[] };
    assert.equal(drained.phase, 'Succeeded');
    assert.deepEqual(drained.artifacts?.map((a) => a.name).sort(), ['greeting.txt', 'site'], 'close says what Drain exported');
    const arts = await sandbox(stateDir, ['artifacts', 'cli-demo', '--json']);
    assert.equal(arts.code, 0, arts.err);
    const list = JSON.parse(arts.out) as Array<{ name: string; path: string; verified: boolean }>;
    assert.deepEqual(list.map((a) => [a.name, a.verified]).sort(), [['greeting.txt', true], ['site', true]]);
    assert.equal(await fs.readFile(list.find((a) => a.name === 'greeting.txt')?.path ?? '', 'utf8'), 'hi');
    // --output copies them out verified, as `kruntimes artifacts` does; --unpack unpacks the folder.
    const outDir = path.join(stateDir, 'downloads');
    const copied = await sandbox(stateDir, ['artifacts', 'cli-demo', '--output', outDir, '--unpack', '--json']);
    assert.equal(copied.code, 0, copied.err);
    const got = JSON.parse(copied.out) as Array<{ name: string; path: string; unpackedTo?: string }>;
    assert.equal(await fs.readFile(got.find((a) => a.name === 'greeting.txt')?.path ?? '', 'utf8'), 'hi');
    const site = got.find((a) => a.name === 'site');
    assert.ok(site?.unpackedTo, 'the folder was unpacked');
    assert.equal(await fs.readFile(path.join(site.unpackedTo, 'css/a.css'), 'utf8'), 'body\n');
    assert.equal((await sandbox(stateDir, ['artifacts', 'cli-demo', '--unpack'])).code, 2, '--unpack without --output');

    const listed = await sandbox(stateDir, ['list']);
    assert.match(listed.out, /^default\/cli-demo\tprocess\tSucceeded\tsession finalized\t\n$/);
    assert.equal((await sandbox(stateDir, ['delete', 'cli-demo'])).code, 0);
    assert.equal((await sandbox(stateDir, ['get', 'cli-demo'])).code, 1);
  });

  it('usage errors exit 2, name the problem and show that verb\'s usage; nothing is created', async () => {
    const r = await sandbox(stateDir, ['exec', 'x', '--bogus']);
    assert.equal(r.code, 2);
    assert.match(r.err, /^error: unknown option --bogus\nusage: sandbox-sessions sandbox exec NAME /);
    assert.doesNotMatch(r.err, /sandbox create/, 'only exec\'s usage, not every verb\'s');
    assert.equal((await sandbox(stateDir, ['frobnicate'])).code, 2);
    const wrong: [string[], RegExp][] = [
      [['create', '--name', 'bad-1', '--timeout', 'abc'], /--timeout needs a duration such as 90s, 30m or 1h30m, got abc/],
      [['create', '--name', 'bad-2', '--idle-timeout', '-5'], /--idle-timeout needs a positive whole number of seconds, got -5/],
      [['create', '--name', 'bad-3', '--lease-timeout', '1.5'], /--lease-timeout needs a positive whole number of seconds, got 1\.5/],
      [['create', '--name', 'bad-4', '--operation-timeout', '0s'], /--operation-timeout needs a duration/],
      [['exec', 'x', '--workdir', '/nope', '--', 'true'], /--workdir is a folder of the sandbox's workspace, relative to its root \(e\.g\. src\/app\), got \/nope/],
      [['exec', 'x', '--workdir', 'a/../..', '--', 'true'], /--workdir is a folder/],
      [['exec', 'x', '--timeout-ms', 'soon', '--', 'true'], /--timeout-ms needs a positive whole number of milliseconds/],
    ];
    for (const [args, message] of wrong) {
      const bad = await sandbox(stateDir, args);
      assert.equal(bad.code, 2, `${args.join(' ')}: ${bad.err}`);
      assert.match(bad.err, message);
    }
    const listed = await sandbox(stateDir, ['list', '--json']);
    assert.deepEqual((JSON.parse(listed.out) as { name: string }[]).filter((r) => r.name.startsWith('bad-')), [], 'no sandbox was created');
  });

  it('after the daemon is gone (stopped, a reboot), any verb starts it again and finds the sandboxes it kept', async () => {
    const created = await sandbox(stateDir, ['create', '--name', 'cli-back', '--lease-timeout', '600', '--json']);
    assert.equal(created.code, 0, created.err);
    assert.equal(await stopGateway({ stateDir, timeoutMs: 5000 }), true);
    const listed = await sandbox(stateDir, ['list']);
    assert.equal(listed.code, 0, listed.err);
    assert.match(listed.out, /^default\/cli-back\tprocess\tReady\t/m);
    assert.equal(await stopGateway({ stateDir, timeoutMs: 5000 }), true);
    const ran = await sandbox(stateDir, ['exec', 'cli-back', '--', 'echo', 'still here']);
    assert.deepEqual([ran.code, ran.out], [0, 'still here\n'], ran.err);
    // --lease-timeout reaches the local Run, as it does a kruntimes one.
    const got = JSON.parse((await sandbox(stateDir, ['get', 'cli-back'])).out) as { spec: { mode: { session: { leaseTimeoutSeconds?: number } } } };
    assert.equal(got.spec.mode.session.leaseTimeoutSeconds, 600);
    // A sandbox that is not there is said in this CLI's words, not the API's.
    for (const verb of [['get', 'nope'], ['exec', 'nope', '--', 'true'], ['close', 'nope'], ['logs', 'nope']]) {
      const missing = await sandbox(stateDir, verb);
      assert.deepEqual([missing.code, missing.err], [1, 'error: no sandbox default/nope here (`sandbox-sessions sandbox list --all-namespaces` lists them)\n'], verb.join(' '));
    }
    const unknown = await sandbox(stateDir, ['cancel', 'cli-back', 'no-such-op']);
    assert.deepEqual([unknown.code, unknown.err], [1, 'error: sandbox default/cli-back has no operation no-such-op (`sandbox-sessions sandbox operations cli-back` lists them)\n']);
    assert.equal((await sandbox(stateDir, ['delete', 'cli-back'])).code, 0);
  });

  it('session diff: what a sandbox changed since a session revision, as git --name-status prints it, and as JSON', async () => {
    const created = await sandbox(stateDir, ['create', '--name', 'cli-diff', '--runtime', 'process']);
    assert.equal(created.code, 0, created.err);
    assert.equal((await sandbox(stateDir, ['exec', 'cli-diff', '--shell', 'echo one > a.txt && echo two > b.txt && mkdir -p node_modules && echo x > node_modules/x.js'])).code, 0);
    // r1 of a session, saved as the companion's Save Sandbox as Revision saves it.
    const repository = path.join(stateDir, 'repository');
    const repo = await openSessionRepository({ location: repository });
    const log = createLogger(new Writable({ write: (_c, _e, done) => done() }), 'error');
    const provider = new LocalSandboxProvider({ stateDir, gatewayCommand: GATEWAY, log });
    try {
      const sessions = new SandboxSessionService(async () => repo, new Map([['local', provider]]), { kind: 'file', description: repository }, log);
      await sessions.saveSandbox({ sandbox: { provider: 'local', context: 'local', namespace: 'default', name: 'cli-diff' }, sessionId: 'cli-session' });
    } finally {
      await repo.close();
      await provider.dispose();
    }
    // The list names the revision the sandbox was saved as (the Run's annotation), in text and in JSON.
    assert.match((await sandbox(stateDir, ['list'])).out, /^default\/cli-diff\tprocess\tReady\t[^\t\n]*\tcli-session@r1$/m);
    const listedJson = JSON.parse((await sandbox(stateDir, ['list', '--json'])).out) as { name: string; sessionRevision?: { sessionId: string; revision: string; how: string } }[];
    assert.deepEqual(listedJson.find((r) => r.name === 'cli-diff')?.sessionRevision, { ...listedJson.find((r) => r.name === 'cli-diff')?.sessionRevision, sessionId: 'cli-session', revision: 'r1', how: 'saved' });
    const diff = async (args: string[]) => {
      const out = sink();
      const err = sink();
      const code = await runSessionCommand(['diff', ...args, '--repository', repository, '--state-dir', stateDir], { stdout: out.stream, stderr: err.stream });
      return { code, out: out.text(), err: err.text() };
    };
    const none = await diff(['cli-session', 'cli-diff']);
    assert.equal(none.code, 0, none.err);
    assert.equal(none.out, '0 changed, 2 unchanged since cli-session@r1 (left out, as a save leaves them out: node_modules/)\n');
    assert.equal((await sandbox(stateDir, ['exec', 'cli-diff', '--shell', 'echo ONE > a.txt && rm b.txt && echo new > c.txt'])).code, 0);
    const changed = await diff(['cli-session@r1', 'cli-diff']);
    assert.equal(changed.code, 0, changed.err);
    assert.equal(changed.out, 'M\ta.txt\nD\tb.txt\nA\tc.txt\n3 changed, 0 unchanged since cli-session@r1 (left out, as a save leaves them out: node_modules/)\n');
    const json = await diff(['cli-session', 'cli-diff', '--json']);
    const parsed = JSON.parse(json.out) as { against: { revision: string }; changes: { path: string; status: string }[]; total: number };
    assert.deepEqual([parsed.against.revision, parsed.total, parsed.changes.map((c) => c.status)], ['r1', 3, ['modified', 'deleted', 'added']]);
    // With the sandbox alone: since the revision it was saved as (its Run's annotation).
    const own = await diff(['cli-diff']);
    assert.equal(own.code, 0, own.err);
    assert.equal(own.out, changed.out);
    const unmarked = await sandbox(stateDir, ['create', '--name', 'cli-unmarked', '--runtime', 'process']);
    assert.equal(unmarked.code, 0, unmarked.err);
    // A sandbox with no revision: since it was opened — its opening snapshot, taken by the first diff (or a window).
    const first = await diff(['cli-unmarked']);
    assert.equal(first.code, 0, first.err);
    const at = /^0 changed, 0 unchanged since it was opened \(([0-9T:.Z-]+), its opening snapshot taken just now\)\n$/.exec(first.out)?.[1];
    assert.ok(at, first.out);
    assert.equal((await sandbox(stateDir, ['exec', 'cli-unmarked', '--shell', 'echo new > new.txt'])).code, 0);
    const since = await diff(['cli-unmarked']);
    assert.equal(since.out, `A\tnew.txt\n1 changed, 0 unchanged since it was opened (${at})\n`);
    const sinceJson = JSON.parse((await diff(['cli-unmarked', '--json'])).out) as { opened: { at: string }; taken: boolean; total: number };
    assert.deepEqual([sinceJson.opened.at, sinceJson.taken, sinceJson.total], [at, false, 1]);
    assert.equal((await sandbox(stateDir, ['delete', 'cli-unmarked'])).code, 0);
    const noSandbox = await diff(['cli-session']);
    assert.notEqual(noSandbox.code, 0);
    assert.match(noSandbox.err, /cli-session/);
    const tooMany = await diff(['a', 'b', 'c']);
    assert.equal(tooMany.code, 2);
    assert.match(tooMany.err, /expected <id\[@rN\]> <sandbox>/);
    const unknown = await diff(['nope', 'cli-diff']);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.err, /nope/);
  });

  it('doctor reports each backend, and why bwrap would not work', async () => {
    const out = sink();
    const code = await runDoctorCommand(['--json', '--state-dir', stateDir], { stdout: out.stream, stderr: sink().stream });
    assert.equal(code, 0);
    const checks = (JSON.parse(out.text()) as { checks: Array<{ name: string; ok: boolean; detail: string }> }).checks;
    assert.deepEqual(checks.map((c) => c.name), ['node', 'state directory', 'local gateway', 'kruntimes', 'backend process', 'backend bubblewrap', 'backend opensandbox']);
    assert.equal(checks.find((c) => c.name === 'backend process')?.ok, true);
    const missing = await new BubblewrapBackend('/nonexistent/bwrap').probe();
    assert.deepEqual(missing, { ok: false, reason: '/nonexistent/bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)' });
  });

  it('the daemon entry prints usage for bad flags', async () => {
    const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(GATEWAY[0] as string, [...GATEWAY.slice(1), '--frob'], { cwd: ROOT, timeout: 20_000 }, (e, _o, stderr) =>
        resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    assert.equal(res.code, 2);
    assert.match(res.stderr, /unknown option --frob/);
  });
});
