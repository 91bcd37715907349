// Local Run lifecycle through the Runs API: phases and conditions, Drain (accepted work
// finishes, new work 409, artifacts exported with correct digests, directories as a
// deterministic tar.gz), symlink artifacts → Failed/ArtifactInvalid, Immediate, the total
// timeout, the lease timeout, caller-chosen UIDs, the monotonic termination rule (422), the
// NDJSON watch, and which writes of a new Run's record wait for the disk.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import { request } from 'undici';
import type { Run } from '../../../protocol/kruntimes/run';
import { StateLayout } from '../../../server/local/stateRoot';
import { recordDiskWaits } from '../../fixtures/diskWaits';
import { b64, call, createRun, patchTermination, readyRun, runsPath, startTestGateway, waitCommandRunning, waitPhase, type TestGateway } from '../gateway/harness';

const sha = (buf: Buffer): string => `sha256:${createHash('sha256').update(buf).digest('hex')}`;

describe('local runtime: Run lifecycle', function () {
  this.timeout(30_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    await t.cleanup();
  });

  it('goes Pending → Scheduled → Running → Ready with kruntimes conditions and endpoint', async () => {
    const { run } = await readyRun(t.gw);
    assert.equal(run.status?.message, 'session registered');
    assert.equal(run.status?.endpoint?.url, `${t.gw.url}/v1/namespaces/default/runtimes/process/sessions/${run.metadata.uid}`);
    const byType = Object.fromEntries((run.status?.conditions ?? []).map((c) => [c.type, c]));
    assert.equal(byType.Scheduled?.reason, 'Assigned');
    assert.equal(byType.Running?.reason, 'Claimed');
    assert.equal(byType.Ready?.reason, 'SessionRegistered');
    assert.equal(byType.Ready?.message, 'session is ready for Console operations');
    assert.ok(run.status?.startTime);
  });

  it('on the way to Ready, the new Run and its Ready wait for the disk; Scheduled and Running, which Ready replaces, do not', async () => {
    const { result: run, steps } = await recordDiskWaits(async () => (await readyRun(t.gw)).run);
    const runFile = new StateLayout(t.stateDir).runFile(run.metadata.uid ?? '');
    const temp = `${path.dirname(runFile)}${path.sep}.${path.basename(runFile)}.`;
    // Each write of the record: its temp file (fsynced or not), then the rename onto the record.
    const writes: boolean[] = [];
    let fsynced = false;
    for (const step of steps) {
      if ('fsync' in step && step.fsync.startsWith(temp)) fsynced = true;
      if ('rename' in step && step.rename === runFile) {
        writes.push(fsynced);
        fsynced = false;
      }
    }
    assert.deepEqual(writes, [true, false, false, true], 'Pending (the create), Scheduled, Running, Ready');
    const dirSyncs = steps.filter((s) => 'fsync' in s && s.fsync === path.dirname(runFile)).length;
    assert.equal(dirSyncs, 2, 'the directory after the create and after Ready');
  });

  it('Drain while `sleep 2` runs: 200 for it, 409 for a new write, Succeeded with exported artifacts and digests', async () => {
    const { run, P } = await readyRun(t.gw);
    const running = call(t.gw, 'POST', `${P}/operations:execute`, {
      body: {
        command: {
          argv: [
            'sh',
            '-c',
            'sleep 2; printf report > "$KRUNTIME_ARTIFACTS_DIR/report.txt"; mkdir -p "$KRUNTIME_ARTIFACTS_DIR/bundle/sub"; printf a > "$KRUNTIME_ARTIFACTS_DIR/bundle/a.txt"; printf b > "$KRUNTIME_ARTIFACTS_DIR/bundle/sub/b.txt"',
          ],
        },
      },
    });
    await waitCommandRunning(t.gw, run);
    assert.equal((await patchTermination(t.gw, run, 'Drain')).status, 200);
    const finalizing = (await call(t.gw, 'GET', runsPath('default', run.metadata.name))).json() as Run;
    assert.equal(finalizing.status?.phase, 'Finalizing');
    assert.equal(finalizing.status?.message, 'session finalization requested');
    const rejected = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { writeFile: { path: 'late.txt', contents: b64('late') } } });
    assert.equal(rejected.status, 409);
    assert.equal((await running).status, 200);
    const done = await waitPhase(t.gw, run, ['Succeeded', 'Failed']);
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
    assert.equal(done.status?.message, 'session finalized');
    const refs = done.status?.artifactRefs ?? [];
    assert.deepEqual(refs.map((r) => [r.name, r.type, r.contentType]), [
      ['bundle', 'directory', 'application/gzip'],
      ['report.txt', 'file', 'text/plain; charset=utf-8'],
    ]);
    const store = path.join(t.stateDir, 'artifacts');
    assert.deepEqual(done.status?.artifactStore, { driver: 'filesystem', filesystem: { path: store } });
    for (const ref of refs) {
      assert.ok('filesystem' in ref.location);
      assert.equal(ref.location.filesystem.path, `namespaces/default/runs/${run.metadata.uid}/${ref.name}`);
      const bytes = await fs.readFile(path.join(store, ref.location.filesystem.path));
      assert.equal(ref.digest, sha(bytes));
      assert.equal(ref.sizeBytes, bytes.length);
    }
    assert.equal((await fs.readFile(path.join(store, `namespaces/default/runs/${run.metadata.uid}/report.txt`))).toString(), 'report');
    // The directory artifact is a deterministic USTAR: sorted entries, mtime 0, uid/gid 0.
    const tar = zlib.gunzipSync(await fs.readFile(path.join(store, `namespaces/default/runs/${run.metadata.uid}/bundle`)));
    const names: string[] = [];
    for (let off = 0; off + 512 <= tar.length; ) {
      const h = tar.subarray(off, off + 512);
      if (h.every((b) => b === 0)) break;
      names.push(h.subarray(0, 100).toString('utf8').replace(/\0.*$/s, ''));
      assert.equal(h.subarray(136, 147).toString(), '00000000000', 'mtime 0');
      assert.equal(h.subarray(108, 115).toString(), '0000000', 'uid 0');
      assert.equal(h.subarray(116, 123).toString(), '0000000', 'gid 0');
      const size = parseInt(h.subarray(124, 135).toString(), 8);
      off += 512 + Math.ceil(size / 512) * 512;
    }
    assert.deepEqual(names, ['a.txt', 'sub/', 'sub/b.txt']);
    const terminal = Object.fromEntries((done.status?.conditions ?? []).map((c) => [c.type, c]));
    assert.equal(terminal.Completed?.status, 'False');
    assert.equal(terminal.Completed?.reason, 'SessionCompleted');
    assert.equal(terminal.Running?.status, 'False');
    assert.equal(terminal.Ready?.status, 'False');
  });

  it('the same directory exports to the same bytes', async () => {
    const digests: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { run, P } = await readyRun(t.gw);
      const w = await call(t.gw, 'POST', `${P}/operations:execute`, {
        body: { command: { argv: ['sh', '-c', 'mkdir -p "$KRUNTIME_ARTIFACTS_DIR/out/é" && printf x > "$KRUNTIME_ARTIFACTS_DIR/out/é/z" && printf y > "$KRUNTIME_ARTIFACTS_DIR/out/b" && chmod 755 "$KRUNTIME_ARTIFACTS_DIR/out/b"'] } },
      });
      assert.equal(w.status, 200);
      // Time must pass (not a wait for an event): the second export's files get mtimes over a second later, and the digest must not change.
      await new Promise((r) => setTimeout(r, i * 1100));
      await patchTermination(t.gw, run, 'Drain');
      const done = await waitPhase(t.gw, run, ['Succeeded', 'Failed']);
      digests.push(done.status?.artifactRefs?.[0]?.digest ?? '');
    }
    assert.equal(digests[0], digests[1]);
  });

  it('a symlink in the artifacts dir ends the Run Failed/ArtifactInvalid', async () => {
    const { run, P } = await readyRun(t.gw);
    await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'ln -s /etc/passwd "$KRUNTIME_ARTIFACTS_DIR/passwd"'] } } });
    await patchTermination(t.gw, run, 'Drain');
    const done = await waitPhase(t.gw, run, ['Succeeded', 'Failed']);
    assert.equal(done.status?.phase, 'Failed');
    assert.equal(done.status?.conditions?.find((c) => c.type === 'Completed')?.reason, 'ArtifactInvalid');
    assert.match(done.status?.message ?? '', /passwd is a symlink/);
  });

  it('Immediate while `sleep 20` runs: the request fails, the Run is Cancelled, nothing exported', async () => {
    const { run, P } = await readyRun(t.gw);
    await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'echo x > "$KRUNTIME_ARTIFACTS_DIR/x"'] } } });
    const started = Date.now();
    const running = call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sleep', '20'] } } });
    await waitCommandRunning(t.gw, run);
    await patchTermination(t.gw, run, 'Immediate');
    const res = await running;
    assert.notEqual(res.status, 200);
    assert.ok(Date.now() - started < 8000);
    const done = await waitPhase(t.gw, run, ['Cancelled']);
    assert.equal(done.status?.message, 'cancelled by user');
    assert.equal(done.status?.artifactRefs, undefined);
  });

  it('Immediate wins over a Drain in progress', async () => {
    const { run, P } = await readyRun(t.gw);
    const running = call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sleep', '20'] } } });
    await waitCommandRunning(t.gw, run);
    await patchTermination(t.gw, run, 'Drain');
    await waitPhase(t.gw, run, ['Finalizing']);
    assert.equal((await patchTermination(t.gw, run, 'Immediate')).status, 200);
    assert.equal((await waitPhase(t.gw, run, ['Cancelled', 'Succeeded'])).status?.phase, 'Cancelled');
    assert.notEqual((await running).status, 200);
  });

  it('a downgrade or removal of termination is 422 with the kruntimes message in a Status', async () => {
    const { run } = await readyRun(t.gw);
    await patchTermination(t.gw, run, 'Immediate');
    await waitPhase(t.gw, run, ['Cancelled']);
    const r = await patchTermination(t.gw, run, 'Drain');
    assert.equal(r.status, 422);
    const status = r.json() as { kind: string; reason: string; code: number; message: string };
    assert.equal(status.kind, 'Status');
    assert.equal(status.reason, 'Invalid');
    assert.equal(status.code, 422);
    assert.equal(
      status.message,
      `Run.kruntimes.io "${run.metadata.name}" is invalid: spec: Invalid value: "object": termination may not be removed, downgraded, or changed except from Drain to Immediate`,
    );
    const removed = await call(t.gw, 'PATCH', runsPath('default', run.metadata.name), {
      raw: '{"spec":{"termination":null}}',
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(removed.status, 422);
    const immutable = await call(t.gw, 'PATCH', runsPath('default', run.metadata.name), {
      raw: '{"spec":{"runtime":"bubblewrap"}}',
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(immutable.status, 422);
    assert.match((immutable.json() as { message: string }).message, /are immutable after Run creation$/);
  });

  it('the total timeout ends a Run with `timeout after <d>`', async () => {
    const { run } = await readyRun(t.gw, { timeout: '1s' });
    const done = await waitPhase(t.gw, run, ['Timeout'], 10_000);
    assert.equal(done.status?.message, 'timeout after 1s');
  });

  it('reads do not count as activity for the idle timeout; commands do', async () => {
    const { run, P } = await readyRun(t.gw, { session: { idleTimeoutSeconds: 2 } });
    const t0 = Date.now();
    // Commands keep it alive... (time must pass: 3 × 0.8 s outlives the 2 s idle timeout only if each command renews it)
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 800));
      assert.equal((await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['true'] } } })).status, 200);
    }
    // ...reads do not.
    const poll = setInterval(() => void call(t.gw, 'GET', `${P}/files`).catch(() => undefined), 200);
    try {
      const done = await waitPhase(t.gw, run, ['Timeout'], 10_000);
      assert.equal(done.status?.message, 'session idle timeout exceeded');
      assert.ok(Date.now() - t0 >= 4000);
    } finally {
      clearInterval(poll);
    }
  });

  it('refuses non-session Runs and unknown backends with 422', async () => {
    const task = await call(t.gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'task-1' }, spec: { runtime: 'process', mode: { task: {} } } },
    });
    assert.equal(task.status, 422);
    const drainTask = await call(t.gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'task-2' }, spec: { runtime: 'process', mode: { task: {} }, termination: { mode: 'Drain' } } },
    });
    assert.equal(drainTask.status, 422);
    assert.match((drainTask.json() as { message: string }).message, /termination.mode Drain is only valid for session mode$/);
    const unknown = await call(t.gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'x-1' }, spec: { runtime: 'docker', mode: { session: {} } } },
    });
    assert.equal(unknown.status, 422);
    const noAuth = await call(t.gw, 'GET', runsPath(), { token: null });
    assert.equal(noAuth.status, 401);
    const dup = await createRun(t.gw);
    const again = await call(t.gw, 'POST', runsPath(), {
      body: { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: dup.metadata.name }, spec: { runtime: 'process', mode: { session: {} } } },
    });
    assert.equal(again.status, 409);
  });

  it('watch streams ADDED, MODIFIED (every phase) and DELETED as NDJSON', async () => {
    const res = await request(`${t.gw.url}${runsPath()}?watch=true&timeoutSeconds=20`, {
      headers: { authorization: `Bearer ${t.gw.token}` },
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(res.statusCode, 200);
    const run = await createRun(t.gw);
    await waitPhase(t.gw, run, ['Ready']);
    await call(t.gw, 'DELETE', runsPath('default', run.metadata.name));
    const seen: string[] = [];
    let buf = '';
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const ev = JSON.parse(buf.slice(0, i)) as { type: string; object: Run };
        buf = buf.slice(i + 1);
        if (ev.object.metadata.name === run.metadata.name) seen.push(`${ev.type}:${ev.object.status?.phase}`);
      }
      if (seen.some((s) => s.startsWith('DELETED'))) break;
    }
    res.body.destroy();
    assert.deepEqual(seen.slice(0, 4), ['ADDED:Pending', 'MODIFIED:Scheduled', 'MODIFIED:Running', 'MODIFIED:Ready']);
    assert.equal(seen[seen.length - 1], 'DELETED:Cancelled');
    const gone = await call(t.gw, 'GET', runsPath('default', run.metadata.name));
    assert.equal(gone.status, 404);
    assert.equal((gone.json() as { reason: string }).reason, 'NotFound');
  });
});

describe('local runtime: sources, inputs and clean-up', function () {
  this.timeout(30_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    await t.cleanup();
  });

  it('prepares source.inline as `script`, a repoURL clone as the session root, and artifactInputs from the store', async () => {
    // An artifact from an earlier Run becomes an input of the next one.
    const { run: producer, P: Pp } = await readyRun(t.gw);
    await call(t.gw, 'POST', `${Pp}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'printf input-bytes > "$KRUNTIME_ARTIFACTS_DIR/in.txt"'] } } });
    await patchTermination(t.gw, producer, 'Drain');
    const produced = await waitPhase(t.gw, producer, ['Succeeded']);
    const ref = produced.status?.artifactRefs?.[0];
    assert.ok(ref);

    const repo = path.join(t.stateDir, 'origin');
    await fs.mkdir(repo);
    const { execFileSync } = await import('node:child_process');
    const git = (...args: string[]): string => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' });
    git('init', '-q');
    await fs.writeFile(path.join(repo, 'README'), 'first');
    git('add', '.');
    git('commit', '-qm', 'one');
    const first = git('rev-parse', 'HEAD').trim();
    await fs.writeFile(path.join(repo, 'README'), 'second');
    git('commit', '-qam', 'two');

    const { P } = await readyRun(t.gw, { source: { repoURL: repo, commitSHA: first }, artifactInputs: [{ path: 'inputs/in.txt', ref }] });
    assert.equal((await call(t.gw, 'GET', `${P}/files/README`)).text, `{"contents":"${b64('first')}","truncated":false}\n`);
    assert.equal((await call(t.gw, 'GET', `${P}/files/inputs/in.txt`)).text, `{"contents":"${b64('input-bytes')}","truncated":false}\n`);
    const pwd = await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'basename "$PWD"'] } } });
    assert.equal(pwd.text, `{"command":{"exitCode":0,"stdout":"${b64('repo\n')}"}}\n`);

    const { P: Pi } = await readyRun(t.gw, { source: { inline: '#!/bin/sh\necho from-script\n' } });
    const ran = await call(t.gw, 'POST', `${Pi}/operations:execute`, { body: { command: { argv: ['./script'] } } });
    assert.equal(ran.text, `{"command":{"exitCode":0,"stdout":"${b64('from-script\n')}"}}\n`);

    const missing = await createRun(t.gw, { artifactInputs: [{ path: 'x', ref: { ...ref, location: { filesystem: { path: 'namespaces/default/runs/none/x' } } } }] });
    const failed = await waitPhase(t.gw, missing, ['Failed', 'Ready']);
    assert.equal(failed.status?.phase, 'Failed');
    assert.match(failed.status?.message ?? '', /^open artifact input /);
  });

  it('two creates of one name at the same moment: one Run, and the other is refused 409 AlreadyExists', async () => {
    const body = { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name: 'twin' }, spec: { runtime: 'process', mode: { session: {} } } };
    const replies = await Promise.all([1, 2, 3].map(() => call(t.gw, 'POST', runsPath('default'), { body })));
    assert.deepEqual(replies.map((r) => r.status).sort(), [201, 409, 409], replies.map((r) => r.text).join('\n'));
    const refused = replies.find((r) => r.status === 409)?.json() as { reason?: string; message?: string } | undefined;
    assert.deepEqual([refused?.reason, refused?.message], ['AlreadyExists', 'runs.kruntimes.io "twin" already exists']);
    const listed = (await call(t.gw, 'GET', runsPath('default'))).json() as { items: Run[] };
    assert.equal(listed.items.filter((r) => r.metadata.name === 'twin').length, 1);
    await waitPhase(t.gw, replies.find((r) => r.status === 201)?.json() as Run, ['Ready']); // it finishes its start
  });

  it('accepts leaseTimeoutSeconds: the lease clock starts at Ready and, with no operations:ws heartbeat, expires the Run', async () => {
    // When the Runtime stored each phase, from its own events (the client's polling adds only noise).
    const storedAt: Record<string, number> = {};
    let timeoutStored: () => void = () => undefined;
    const timeoutEvent = new Promise<void>((resolve) => (timeoutStored = resolve));
    const onEvent = (e: { object: Run }) => {
      const phase = e.object.status?.phase;
      if (phase) storedAt[phase] ??= Date.now();
      if (phase === 'Timeout') timeoutStored();
    };
    t.gw.runtime.on('event', onEvent);
    const created = await createRun(t.gw, { session: { leaseTimeoutSeconds: 1 } });
    assert.equal(created.spec.mode.session?.leaseTimeoutSeconds, 1);
    const ready = await waitPhase(t.gw, created, ['Ready']);
    const leaseStart = t.gw.runtime.sessionByUid('default', 'process', ready.metadata.uid ?? '')?.session.leaseRenewedMs ?? 0;
    const ended = await waitPhase(t.gw, ready, ['Timeout'], 5000);
    await timeoutEvent; // a Timeout is seen at once, and its event follows the write
    t.gw.runtime.off('event', onEvent);
    assert.ok(storedAt.Running !== undefined && leaseStart >= storedAt.Running, 'the lease clock must start at Ready, not before');
    assert.ok(storedAt.Timeout !== undefined && storedAt.Timeout - leaseStart >= 1000, `the lease ran its full second: ${JSON.stringify({ storedAt, leaseStart })}`);
    assert.equal(ended.status?.message, 'session lease expired');
    const byType = Object.fromEntries((ended.status?.conditions ?? []).map((c) => [c.type, c]));
    assert.equal(byType.Ready?.reason, 'Timeout');
    assert.equal(byType.Completed?.message, 'session lease expired');
  });

  it('create(…, {uid}) gives an embedding caller a fixed Run UID; invalid and duplicate UIDs are refused', async () => {
    const body = (name: string): unknown => ({ apiVersion: 'kruntimes.io/v1alpha1', kind: 'Run', metadata: { name }, spec: { runtime: 'process', mode: { session: {} } } });
    const uid = '0b5e2a6c-5d1f-4c3e-9a43-2f7c1d9e8b10';
    const run = await t.gw.runtime.create('default', body('fixed-uid'), { uid });
    assert.equal(run.metadata.uid, uid);
    const ready = await waitPhase(t.gw, run, ['Ready']);
    assert.equal(ready.status?.endpoint?.url, `${t.gw.url}/v1/namespaces/default/runtimes/process/sessions/${uid}`);
    await assert.rejects(t.gw.runtime.create('default', body('fixed-uid-2'), { uid }), (err: Error & { code?: number }) => {
      assert.equal(err.code, 409);
      assert.match(err.message, /a Run with UID "0b5e2a6c-.*" already exists/);
      return true;
    });
    for (const bad of ['', '../x', 'UPPER', 'a/b', '.deleted-x', 'x'.repeat(65)]) {
      await assert.rejects(t.gw.runtime.create('default', body('bad-uid'), { uid: bad }), (err: Error & { code?: number }) => {
        assert.equal(err.code, 400, bad);
        assert.match(err.message, /is not valid/);
        return true;
      });
    }
    await patchTermination(t.gw, run, 'Immediate');
  });

  it('deletes a finished Run after ttlSecondsAfterFinished, with its records and artifacts', async () => {
    const { run, P } = await readyRun(t.gw, { ttlSecondsAfterFinished: 1 });
    await call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', 'echo x > "$KRUNTIME_ARTIFACTS_DIR/x"'] } } });
    await patchTermination(t.gw, run, 'Drain');
    await waitPhase(t.gw, run, ['Succeeded']);
    const deadline = Date.now() + 10_000;
    while ((await call(t.gw, 'GET', runsPath('default', run.metadata.name))).status !== 404) {
      assert.ok(Date.now() < deadline, 'the Run was not deleted');
      await new Promise((r) => setTimeout(r, 50));
    }
    await assert.rejects(fs.stat(path.join(t.stateDir, 'runs', run.metadata.uid ?? '')));
    await assert.rejects(fs.stat(path.join(t.stateDir, 'artifacts/namespaces/default/runs', run.metadata.uid ?? '')));
  });
});
