// A command's exec record must be on disk before the command may run, whatever happened to its folder: the first
// command of a Run makes the folder (0700, the record 0600), and a folder removed since (a Run's files cleaned up
// by hand) is made again instead of failing the command.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExecRecords, selfIdentity, type ExecRecord } from '../../../server/local/execRecord';

function record(operationId: string): ExecRecord {
  return {
    version: 1,
    operationId,
    runUid: 'u',
    backend: 'process',
    summary: 'true',
    owner: selfIdentity(),
    state: 'running',
    startedAt: new Date().toISOString(),
  };
}

describe('local runtime: exec records', () => {
  let root: string;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'exec-records-'));
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('makes its folder (0700) at the first write and again once it was removed; records are 0600', async () => {
    const dir = path.join(root, 'runs', 'u', 'exec');
    const records = new ExecRecords(dir);
    await records.write(record('op-1'));
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    assert.equal(fs.statSync(records.file('op-1')).mode & 0o777, 0o600);
    assert.equal((await records.read('op-1'))?.operationId, 'op-1');

    fs.rmSync(path.join(root, 'runs'), { recursive: true });
    await records.write(record('op-2'));
    assert.equal((await records.read('op-2'))?.state, 'running');
    assert.deepEqual(fs.readdirSync(dir), ['op-2.json'], 'no temp file left behind');
  });

  it('fails with the cause when the folder cannot be made', async () => {
    fs.writeFileSync(path.join(root, 'runs'), 'a file where the folder should be');
    const records = new ExecRecords(path.join(root, 'runs', 'u', 'exec'));
    await assert.rejects(records.write(record('op-1')), (err: NodeJS.ErrnoException) => err.code === 'ENOTDIR');
  });
});
