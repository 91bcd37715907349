// Many sandboxes at once: commands and file operations on several Runs in parallel stay
// separate (each Run's queue serializes only its own work), every call returns, and the
// records agree with what ran.
import assert from 'node:assert/strict';
import { b64, call, readyRun, runsPath, startTestGateway, type TestGateway } from './harness';

describe('local gateway: concurrency', function () {
  this.timeout(60_000);
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    await t.cleanup();
  });

  it('8 Runs × 6 operations in parallel: right outputs, one record per command, per-Run order', async () => {
    const runs = await Promise.all(Array.from({ length: 8 }, () => readyRun(t.gw)));
    const started = Date.now();
    await Promise.all(
      runs.map(async ({ run, P }, i) => {
        const ops = Array.from({ length: 6 }, (_, j) =>
          j % 2 === 0
            ? call(t.gw, 'POST', `${P}/operations:execute`, { body: { command: { argv: ['sh', '-c', `sleep 0.5; printf run${i}-op${j} >> log.txt; printf run${i}-op${j}`] } } })
            : call(t.gw, 'POST', `${P}/operations:execute`, { body: { writeFile: { path: `f${j}.txt`, contents: b64(`run${i}-file${j}`) } } }),
        );
        const results = await Promise.all(ops);
        results.forEach((r, j) => {
          assert.equal(r.status, 200, r.text);
          if (j % 2 === 0) assert.equal(r.text, `{"command":{"exitCode":0,"stdout":"${b64(`run${i}-op${j}`)}"}}\n`);
          else assert.equal(r.text, '{}\n');
        });
        const log = await call(t.gw, 'GET', `${P}/files/log.txt`);
        assert.equal(log.text, `{"contents":"${b64(`run${i}-op0run${i}-op2run${i}-op4`)}","truncated":false}\n`, 'FIFO within a Run');
        const recs = ((await call(t.gw, 'GET', `${runsPath('default', run.metadata.name)}/operations`)).json() as { items: Array<{ state: string; outcome: string }> }).items;
        assert.deepEqual(recs.map((r) => `${r.state}/${r.outcome}`), ['ended/succeeded', 'ended/succeeded', 'ended/succeeded']);
      }),
    );
    // 3 × 0.5 s per Run: in parallel about 1.5 s; serially it would be 8 × 1.5 s.
    assert.ok(Date.now() - started < 8000, `took ${Date.now() - started} ms`);
  });
});
