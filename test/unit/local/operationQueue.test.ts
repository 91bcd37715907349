// The mutation queue alone: FIFO, one at a time, bounded (running counts), refusal when full,
// removal of a waiting operation by abort, and whenIdle for Drain.
import assert from 'node:assert/strict';
import { OperationQueue } from '../../../server/local/operationQueue';

/** A queued job's own work (time passing inside the job so others must queue behind it), not a wait before an assertion. */
const tick = (ms = 10): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('local runtime: operation queue', () => {
  it('runs FIFO, one at a time, and refuses beyond capacity', async () => {
    const q = new OperationQueue(3);
    const order: string[] = [];
    let active = 0;
    const job = (name: string) => async (): Promise<string> => {
      active++;
      assert.equal(active, 1);
      order.push(`start ${name}`);
      await tick();
      order.push(`end ${name}`);
      active--;
      return name;
    };
    const all = [q.run(job('a')), q.run(job('b')), q.run(job('c'))];
    assert.throws(() => q.run(job('d')), { message: 'session operation queue is full' });
    assert.deepEqual(await Promise.all(all), ['a', 'b', 'c']);
    assert.deepEqual(order, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    assert.equal(q.size, 0);
  });

  it('drops a waiting operation when its signal aborts, and whenIdle waits for the rest', async () => {
    const q = new OperationQueue(4);
    const first = q.run(() => tick(30).then(() => 1));
    const controller = new AbortController();
    const second = q.run(() => Promise.resolve(2), controller.signal);
    controller.abort(new Error('gone'));
    await assert.rejects(second, { message: 'gone' });
    assert.equal(q.size, 1);
    let idle = false;
    const idleP = q.whenIdle().then(() => (idle = true));
    assert.equal(idle, false);
    assert.equal(await first, 1);
    await idleP;
    assert.equal(idle, true);
  });
});
