// Which revision a sandbox's changes are shown against: the user's choice (Compare with…, Stop Comparing) or the
// sandbox's own mark (the revision it was opened from or saved as, by any client), whichever came later; kept per
// sandbox in a Memento shared by the windows, bounded, and robust to what another version stored. With neither and
// no Stop Comparing, since the sandbox was opened.
import assert from 'node:assert/strict';
import { baselineName, ChangeBaselines, MAX_BASELINES, sameBaseline, SINCE_OPENED, sinceWords } from '../../../extension/changes/changeBaselines';
import type { SandboxSessionRevision } from '../../../protocol/sandboxRevision';

const memento = () => {
  const values = new Map<string, unknown>();
  return { values, get: (k: string) => values.get(k), update: async (k: string, v: unknown) => void values.set(k, v) };
};

const mark = (revision: string, atMs: number, how: SandboxSessionRevision['how'] = 'saved'): SandboxSessionRevision => ({
  sessionId: 's',
  revision,
  at: new Date(atMs).toISOString(),
  how,
});

describe('extension: change baselines', () => {
  it('keeps one choice per sandbox, tells who listens, and forgets the oldest past the limit', async () => {
    const store = memento();
    let t = 0;
    const baselines = new ChangeBaselines(store, () => ++t);
    const heard: string[] = [];
    baselines.onDidChange((key) => heard.push(key));
    await baselines.set('a', { sessionId: 's', revision: 'r1' });
    await baselines.set('a', { sessionId: 's', revision: 'r2' });
    assert.deepEqual(baselines.resolve('a'), { sessionId: 's', revision: 'r2', setAt: 2 });
    assert.equal(new ChangeBaselines(store).resolve('a')?.revision, 'r2', 'another window reads the same state');
    await baselines.stop('a');
    assert.equal(baselines.resolve('a'), undefined);
    assert.deepEqual(heard, ['a', 'a', 'a']);
    for (let i = 0; i <= MAX_BASELINES; i++) await baselines.set(`k${i}`, { sessionId: 's', revision: 'r1' });
    assert.equal(baselines.resolve('k0'), undefined, 'the oldest went');
    assert.equal(baselines.resolve(`k${MAX_BASELINES}`)?.revision, 'r1');
    assert.equal(Object.keys(store.values.get('sandboxSessions.changeBaselines') as object).length, MAX_BASELINES);
  });

  it("uses the sandbox's mark when there is no choice: a sandbox an agent opened or saved is compared with no step here", () => {
    const baselines = new ChangeBaselines(memento(), () => 1000);
    assert.equal(baselines.resolve('a'), undefined, 'neither: nothing to compare with');
    assert.deepEqual(baselines.resolve('a', mark('r3', 500, 'opened')), { sessionId: 's', revision: 'r3', setAt: 500 });
  });

  it('the later of choice and mark wins: a save after a choice moves the baseline, a choice after a save moves it back', async () => {
    let now = 1000;
    const baselines = new ChangeBaselines(memento(), () => now);
    await baselines.set('a', { sessionId: 's', revision: 'r1' }); // Compare with r1 at 1000
    assert.equal(baselines.resolve('a', mark('r2', 900))?.revision, 'r1', 'a save before the choice');
    assert.equal(baselines.resolve('a', mark('r4', 2000))?.revision, 'r4', 'an agent saved r4 after it');
    now = 3000;
    await baselines.set('a', { sessionId: 's', revision: 'r2' });
    assert.equal(baselines.resolve('a', mark('r4', 2000))?.revision, 'r2');
  });

  it('Stop Comparing holds until the sandbox is next saved or opened as a revision', async () => {
    let now = 1000;
    const baselines = new ChangeBaselines(memento(), () => now);
    await baselines.stop('a');
    assert.equal(baselines.resolve('a', mark('r2', 900)), undefined, 'the mark it was stopped over');
    assert.equal(baselines.resolve('a', mark('r3', 1500))?.revision, 'r3', 'a later save');
    now = 2000;
    await baselines.set('a', { sessionId: 's', revision: 'r1' });
    now = 2500;
    await baselines.stop('a');
    assert.equal(baselines.resolve('a', mark('r3', 1500)), undefined);
    // Stopped, so not "since opened" either; a sandbox never compared, or saved after the stop, is not stopped.
    assert.equal(baselines.stopped('a', mark('r3', 1500)), true);
    assert.equal(baselines.stopped('a', mark('r4', 2600)), false);
    assert.equal(baselines.stopped('a'), true);
    assert.equal(baselines.stopped('never-compared'), false);
    await baselines.set('a', { sessionId: 's', revision: 'r1' });
    assert.equal(baselines.stopped('a'), false, 'a revision chosen after the stop');
  });

  it('tells baselines apart: revisions by session and revision, "since opened" only from itself', () => {
    const r1 = { sessionId: 's', revision: 'r1', setAt: 1 };
    assert.equal(sameBaseline(r1, { ...r1, setAt: 2 }), true);
    assert.equal(sameBaseline(r1, { ...r1, revision: 'r2' }), false);
    assert.equal(sameBaseline(SINCE_OPENED, { opened: true }), true);
    assert.equal(sameBaseline(SINCE_OPENED, r1), false);
    assert.equal(sameBaseline(r1, SINCE_OPENED), false);
    assert.equal(sameBaseline(SINCE_OPENED, undefined), false);
    assert.equal(sameBaseline(undefined, undefined), true);
    assert.deepEqual([baselineName(r1), baselineName(SINCE_OPENED), sinceWords(SINCE_OPENED)], ['s@r1', 'opened', 'the sandbox was opened']);
  });

  it('skips entries it cannot parse (another version wrote them), keeping the rest, and recovers on the next set', async () => {
    const store = memento();
    store.values.set('sandboxSessions.changeBaselines', { a: { sessionId: 42 }, b: { sessionId: 's', revision: 'r5', setAt: 1 } });
    const baselines = new ChangeBaselines(store);
    assert.equal(baselines.resolve('a'), undefined);
    assert.equal(baselines.resolve('b')?.revision, 'r5');
    await baselines.set('a', { sessionId: 's', revision: 'r1' });
    assert.equal(baselines.resolve('a')?.revision, 'r1');
    store.values.set('sandboxSessions.changeBaselines', 'garbage');
    assert.equal(baselines.resolve('b'), undefined);
  });
});
