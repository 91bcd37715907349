// Activations from several server processes sharing one repository and one gateway: a server
// killed before commit leaves the previous revision intact and its activation is retried (and
// committed) once; racing servers commit exactly once per revision and a refused one returns no output.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { ActivationRunRequest } from '../../../protocol/activation';
import { ActivationResultSchema } from '../../../protocol/activation';
import { type ActivationWorld, createActivationWorld, message, REPO_ROOT } from '../../fixtures/activation/harness';

const LineSchema = z.union([
  z.object({ event: z.string() }),
  z.object({ result: ActivationResultSchema }),
  z.object({ refused: z.object({ code: z.string(), message: z.string() }) }),
]);
type Line = z.infer<typeof LineSchema>;

interface Child {
  proc: ChildProcess;
  lines: Line[];
  done: Promise<number | null>;
}

function startChild(world: ActivationWorld, request: ActivationRunRequest, lease?: { ttlMs?: number; queueTimeoutMs?: number }): Child {
  const args = { repoRoot: world.repoRoot, stateDir: world.stateDir, scratchParent: world.dir, counterFile: world.counterFile, request, ...(lease ? { lease } : {}) };
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'test/fixtures/activation/runnerChild.ts'), JSON.stringify(args)], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Line[] = [];
  let pending = '';
  let stderr = '';
  proc.stdout?.on('data', (d: Buffer) => {
    pending += d.toString('utf8');
    let nl: number;
    while ((nl = pending.indexOf('\n')) !== -1) {
      lines.push(LineSchema.parse(JSON.parse(pending.slice(0, nl))));
      pending = pending.slice(nl + 1);
    }
  });
  proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const done = new Promise<number | null>((resolve) =>
    proc.on('exit', (code) => {
      if (code !== 0 && code !== null) process.stderr.write(stderr);
      resolve(code);
    }),
  );
  return { proc, lines, done };
}

async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function resultOf(child: Child) {
  const line = child.lines.find((l): l is Extract<Line, { result: unknown }> => 'result' in l);
  return line?.result;
}

describe('activations across server processes (real local gateway, shared file repository)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  const children: Child[] = [];

  before(async () => {
    world = await createActivationWorld();
  });
  after(async () => {
    for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
    await Promise.all(children.map((c) => c.done));
    await world?.dispose();
  });

  it('a server killed before commit: the previous revision is intact; the retry takes over, removes the leftover sandbox, runs once and commits once', async () => {
    const base = await world.runner().run(message('crash', 'base', 'base'));
    assert.equal(base.revision, 'r1');
    const gate = path.join(world.dir, 'crash-gate');
    const request = message('crash', 'victim', `!waitfor ${gate}`);
    const child = startChild(world, request, { ttlMs: 60_000 });
    children.push(child);
    await until('the agent to start in the child server', () => world.invocations().includes('victim'));
    const record = await world.repo.activations.get('crash', 'victim');
    assert.equal(record?.state, 'running');
    const leftover = record?.sandbox?.name;
    assert.ok(leftover);
    child.proc.kill('SIGKILL');
    await child.done;

    const head = await world.repo.checkoutCurrent('crash');
    assert.equal(head.ref.revision, 'r1', 'the previous revision is intact');
    assert.equal(head.lastCommittedActivationId, 'base');
    assert.ok((await world.provider.list({})).some((s) => s.ref.name === leftover), 'the dead server left its sandbox');

    // The owner is provably dead (same host), so the retry does not wait for the 60 s lease to expire.
    fs.writeFileSync(gate, '');
    const started = Date.now();
    const retry = await world.runner().run(request);
    assert.ok(Date.now() - started < 30_000);
    assert.equal(retry.commit, 'committed', JSON.stringify(retry));
    assert.equal(retry.revision, 'r2');
    assert.equal(retry.attempt, 2);
    assert.deepEqual((await world.provider.list({})).map((s) => s.ref.name), [], 'the leftover sandbox was destroyed');
    assert.equal(world.invocations().filter((id) => id === 'victim').length, 2);
    assert.deepEqual((await world.repo.listRevisions('crash')).map((r) => r.lastCommittedActivationId), ['victim', 'base']);
    assert.equal((await world.runner().run(request)).deduplicated, true);
  });

  it('racing servers: exactly one commit per revision, every committed activation once, a refused server returns no output', async () => {
    await world.runner().run(message('race', 'seed', 'seed'));
    const gate = path.join(world.dir, 'race-gate');
    const holder = startChild(world, message('race', 'holder', `!waitfor ${gate}`));
    children.push(holder);
    await until('the holder to run', () => world.invocations().includes('holder'));
    const refused = startChild(world, message('race', 'refused', 'refused'), { queueTimeoutMs: 0 });
    const waiters = ['w1', 'w2', 'w3'].map((id) => startChild(world, message('race', id, id)));
    children.push(refused, ...waiters);
    assert.equal(await refused.done, 0);
    fs.writeFileSync(gate, '');
    for (const c of [holder, ...waiters]) assert.equal(await c.done, 0);

    const refusal = refused.lines.find((l) => 'refused' in l);
    assert.ok(refusal && 'refused' in refusal && refusal.refused.code === 'session_busy', JSON.stringify(refused.lines));
    assert.equal(refused.lines.some((l) => 'event' in l || 'result' in l), false, 'the refused server returned no output');
    assert.equal(world.invocations().includes('refused'), false);

    const results = [holder, ...waiters].map(resultOf);
    for (const r of results) assert.equal(r?.commit, 'committed', JSON.stringify(r));
    const revisions = results.map((r) => r?.revision).sort();
    assert.deepEqual(revisions, ['r2', 'r3', 'r4', 'r5']);
    const listed = await world.repo.listRevisions('race');
    const ids = listed.map((r) => r.lastCommittedActivationId);
    assert.equal(new Set(ids).size, ids.length, 'no activation committed twice');
    assert.deepEqual([...ids].sort(), ['holder', 'seed', 'w1', 'w2', 'w3']);
    // Each turn saw every earlier one: serialized, no lost update.
    const tree = (await world.repo.checkoutCurrent('race')).ref.revision;
    assert.equal(tree, 'r5');
  });
});
