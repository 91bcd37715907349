// Save Sandbox as Session Revision commits on the revision the sandbox is from when it is from the chosen session —
// so a revision someone committed since is never replaced without asking — and on the head of any other session.
import assert from 'node:assert/strict';
import { commitOn, saveTargets } from '../../../extension/commands/session/saveTargets';
import type { SandboxSessionRevision } from '../../../protocol/sandboxRevision';

const sessions = [
  { sessionId: 'alpha', head: { revision: 'r2' } },
  { sessionId: 'demo', head: { revision: 'r4' } },
];
const mark = (revision: string): SandboxSessionRevision => ({ sessionId: 'demo', revision, at: '2026-12-03T10:00:00.000Z', how: 'opened' });

describe('extension: what Save Sandbox as Session Revision commits on', () => {
  it('with no mark: every session commits on its head, in the order listed', () => {
    const targets = saveTargets(sessions, undefined);
    assert.deepEqual(targets.map((t) => [t.label, t.description]), [['alpha', 'commit on r2'], ['demo', 'commit on r4']]);
    assert.deepEqual(targets.map(commitOn), [{ expectedRevision: 'r2' }, { expectedRevision: 'r4' }]);
  });

  it("the sandbox's own session comes first; at its head it commits there", () => {
    const [first, second] = saveTargets(sessions, mark('r4'));
    assert.deepEqual([first?.label, first?.description], ['demo', "commit on r4 · this sandbox's revision"]);
    assert.deepEqual(commitOn(first!), { expectedRevision: 'r4' });
    assert.deepEqual(commitOn(second!), { expectedRevision: 'r2' }, 'another session: its head, as chosen');
  });

  it('behind the head, it says so and asks instead of committing on the head (which would replace r4)', () => {
    const [first] = saveTargets(sessions, mark('r3'));
    assert.equal(first?.description, 'this sandbox is from r3; the head moved on to r4');
    assert.deepEqual(commitOn(first!), { behind: { base: 'r3', head: 'r4' } });
  });

  it('a mark of a session no longer listed changes nothing', () => {
    const targets = saveTargets(sessions, { ...mark('r1'), sessionId: 'gone' });
    assert.deepEqual(targets.map((t) => t.base), [undefined, undefined]);
  });
});
