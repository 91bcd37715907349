// The local runtime's store of Runs: what a client sees against what is on disk. A change that grants (Ready) is
// seen only once its record is written; a change that takes away (Finalizing) is seen at once, even when its write
// fails — the refusal must not wait for the disk; a new Run's name is taken the moment it is added.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Run } from '../../../protocol/kruntimes/run';
import { RunRecords, type RunEvent } from '../../../server/local/runRecords';
import { StateLayout } from '../../../server/local/stateRoot';

const UID = '5f0c3a52-8d51-4c1e-9a57-3b1f6f0e2a10';

function runningRun(): Run {
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name: 'r', namespace: 'default', uid: UID },
    spec: { runtime: 'process', mode: { session: {} } },
    status: { phase: 'Running' },
  } as Run;
}

describe('local runtime: Run records, seen against stored', () => {
  let root: string;
  let layout: StateLayout;
  let events: { event: RunEvent; onDisk: string | undefined }[];
  let records: RunRecords;

  const phaseOnDisk = (): string | undefined => {
    try {
      return (JSON.parse(fs.readFileSync(layout.runFile(UID), 'utf8')) as Run).status?.phase;
    } catch {
      return undefined;
    }
  };
  const phaseSeen = (): string | undefined => records.byUid(UID)?.run.status?.phase;

  beforeEach(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'run-records-'));
    layout = new StateLayout(root);
    events = [];
    records = new RunRecords(layout, (event) => events.push({ event, onDisk: phaseOnDisk() }), () => undefined);
    await records.load();
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('shows Ready only once the record on disk says so, and each event follows its write', async () => {
    const entry = await records.add(runningRun());
    assert.equal(phaseOnDisk(), 'Running');
    const seenBeforeStored: string[] = [];
    const watch = setInterval(() => {
      // Sampled while the write is in flight: whenever Ready is seen, the disk must already hold it.
      if (phaseSeen() === 'Ready' && phaseOnDisk() !== 'Ready') seenBeforeStored.push('Ready');
    }, 0);
    const ready = records.update(entry, (r) => ((r.status ??= {}).phase = 'Ready'), 'once-stored');
    assert.equal(phaseSeen(), 'Running', 'not seen before its write');
    await ready.finally(() => clearInterval(watch));
    assert.deepEqual(seenBeforeStored, []);
    assert.equal(phaseSeen(), 'Ready');
    assert.deepEqual(
      events.map((e) => [e.event.type, e.event.object.status?.phase, e.onDisk]),
      [
        ['ADDED', 'Running', 'Running'],
        ['MODIFIED', 'Ready', 'Ready'],
      ],
    );
  });

  it('takes the name and uid of a new Run the moment it is added, before its record is written', async () => {
    const adding = records.add(runningRun());
    // Admission checks the name synchronously, then adds: a second create must find it taken right away.
    assert.equal(records.findByName('default', 'r')?.run.metadata.uid, UID);
    assert.equal(records.has(UID), true);
    await adding;
    assert.equal(phaseOnDisk(), 'Running');
  });

  it('a Run whose first record cannot be written is not kept', async () => {
    fs.writeFileSync(layout.runDir(UID), 'a file where its folder should be');
    await assert.rejects(records.add(runningRun()), { code: 'EEXIST' });
    assert.equal(records.findByName('default', 'r'), undefined);
    assert.deepEqual(events, []);
  });

  it('a grant whose write fails is never seen; a refusal is seen even though its write fails', async () => {
    const entry = await records.add(runningRun());
    fs.rmSync(layout.runDir(UID), { recursive: true }); // every write of this Run now fails
    await assert.rejects(records.update(entry, (r) => ((r.status ??= {}).phase = 'Ready'), 'once-stored'), { code: 'ENOENT' });
    assert.equal(phaseSeen(), 'Running', 'a Ready the disk does not hold');
    await assert.rejects(records.update(entry, (r) => ((r.status ??= {}).phase = 'Finalizing')), { code: 'ENOENT' });
    assert.equal(phaseSeen(), 'Finalizing', 'the refusal waits for nothing');
    assert.deepEqual(
      events.map((e) => e.event.type),
      ['ADDED'],
      'no event for a change that was not stored',
    );
  });
});
