// The Run log's container-log file: bounded and rotated (the oldest lines dropped, the rest
// read in order across files), lines over 16 KiB split into CRI partial parts and joined again,
// RFC3339Nano stamps as Go writes them, and a follower that misses nothing written after it
// subscribed and stops at finish().
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ContainerLog, CRI_MAX_LINE_BYTES, formatRfc3339Nano, formatTimestampOut, parseRfc3339Ns } from '../../../server/local/containerLog';

describe('local runtime: container log file', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-clog-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('stays within maxBytes × maxFiles, dropping the oldest lines, and reads the rest in order', () => {
    const log = new ContainerLog(path.join(dir, 'runtimed.log'), { maxBytes: 2000, maxFiles: 3 });
    for (let i = 0; i < 200; i++) log.write(JSON.stringify({ n: i, pad: 'x'.repeat(40) }));
    const sizes = log.files().map((f) => (fs.existsSync(f) ? fs.statSync(f).size : 0));
    assert.equal(fs.readdirSync(dir).length, 3, 'three files at most');
    for (const s of sizes) assert.ok(s <= 2000, `file of ${s} bytes`);
    const ns = log.read().map((e) => (JSON.parse(e.content) as { n: number }).n);
    assert.equal(ns[ns.length - 1], 199);
    assert.ok(ns.length < 200 && ns.length > 40, `${ns.length} lines kept`);
    assert.deepEqual(ns, [...ns].sort((a, b) => a - b), 'in order across the rotated files');
    assert.deepEqual(log.read({ tailLines: 3 }).map((e) => (JSON.parse(e.content) as { n: number }).n), [197, 198, 199]);
  });

  it('splits a line longer than 16 KiB into P parts and joins them on reading', () => {
    const file = path.join(dir, 'runtimed.log');
    const log = new ContainerLog(file);
    const long = JSON.stringify({ message: 'é'.repeat(CRI_MAX_LINE_BYTES) }); // multi-byte across part borders
    log.write(long);
    log.write('{"short":true}');
    const raw = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    assert.deepEqual(raw.map((l) => l.split(' ')[2]), ['P', 'P', 'F', 'F']);
    assert.deepEqual(log.read().map((e) => e.content), [long, '{"short":true}']);
  });

  it('formats and parses RFC 3339 times as Go and the kubelet do', () => {
    const ns = 1_700_000_000_123_400_000n;
    assert.equal(formatRfc3339Nano(ns), '2023-11-14T22:13:20.1234Z');
    assert.equal(formatRfc3339Nano(1_700_000_000_000_000_000n), '2023-11-14T22:13:20Z');
    assert.equal(formatTimestampOut(ns), '2023-11-14T22:13:20.123400000Z');
    assert.equal(parseRfc3339Ns('2023-11-14T22:13:20.1234Z'), ns);
    assert.equal(parseRfc3339Ns('2023-11-14T23:13:20.1234+01:00'), ns);
    assert.equal(parseRfc3339Ns('2023-11-14 22:13:20Z'), undefined);
  });

  it('a follower gets the backlog, then each new line, and ends at finish()', () => {
    const log = new ContainerLog(path.join(dir, 'runtimed.log'));
    log.write('a');
    log.write('b');
    const got: string[] = [];
    let ended = false;
    log.follow({ tailLines: 1 }, (e) => got.push(e.content), () => (ended = true));
    log.write('c');
    assert.deepEqual(got, ['b', 'c']);
    log.finish();
    assert.ok(ended);
    log.write('late');
    assert.deepEqual(got, ['b', 'c'], 'nothing after the end');
    let endedAtOnce = false;
    log.follow({}, () => undefined, () => (endedAtOnce = true));
    assert.ok(endedAtOnce, 'following a finished log ends at once');
  });
});
