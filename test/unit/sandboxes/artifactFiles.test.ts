// The shared artifact writers on real files: the verified writer stops pulling at the first byte
// past the announced size and gives way to an abort even when its source is stuck; the tar.gz
// unpacker reads what Go's archive/tar writes (pax and GNU long names), and refuses escapes hidden
// in extended headers, duplicates, conflicts, truncation, non-gzip input and inflation past a limit.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { unpackTarGz, writeVerified } from '../../../server/sandboxes/artifactFiles';
import { SandboxError } from '../../../server/sandboxes/provider';
import { header, pad } from '../../fixtures/bundle/maliciousArchive';

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

function entry(p: string, content: string, bend: Parameters<typeof header>[1] = {}, mode = 0o644): Buffer[] {
  const body = Buffer.from(content);
  return [header({ path: p, kind: 'file', mode, size: body.length }, bend), body, pad(body.length)];
}

function meta(typeflag: 'x' | 'L', text: string): Buffer[] {
  return entry('././@Meta', text, { typeflag });
}

const tgz = (...parts: Buffer[][]) => gzipSync(Buffer.concat([...parts.flat(), Buffer.alloc(1024)]));

describe('artifact files: verified writer and tar.gz unpacker', () => {
  let work: string;
  let n = 0;
  beforeEach(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'artifact-files-'));
  });
  afterEach(() => fs.rmSync(work, { recursive: true, force: true }));

  const unpack = async (archive: Buffer, limits?: { maxBytes: number; maxEntries: number }) => {
    const file = path.join(work, `a${++n}.tar.gz`);
    fs.writeFileSync(file, archive);
    const dir = path.join(work, 'out', 'tree');
    await unpackTarGz(file, dir, undefined, limits);
    return dir;
  };

  const refused = async (archive: Buffer, pattern: RegExp, limits?: { maxBytes: number; maxEntries: number }) => {
    await assert.rejects(unpack(archive, limits), (err: Error) => err instanceof SandboxError && err.code === 'artifact_invalid' && pattern.test(err.message));
    assert.deepEqual(fs.existsSync(path.join(work, 'out')) ? fs.readdirSync(path.join(work, 'out')) : [], [], 'no staging left behind');
  };

  it('stops pulling from the source at the first chunk past the announced size', async () => {
    let pulled = 0;
    async function* source() {
      for (;;) {
        pulled++;
        yield Buffer.alloc(1000, 1);
      }
    }
    const target = path.join(work, 'f');
    await assert.rejects(writeVerified(source(), target, { digest: sha256(Buffer.alloc(2500, 1)), sizeBytes: 2500 }), /more than its announced 2500 bytes/);
    assert.equal(pulled, 3);
    assert.deepEqual(fs.readdirSync(work), []);
  });

  it('gives way to an abort while the source is stuck, removing the temp file', async () => {
    const controller = new AbortController();
    // The abort comes once the writer is waiting on the source (its pull never answers).
    const source: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({
        next: () => {
          queueMicrotask(() => controller.abort());
          return new Promise<IteratorResult<Uint8Array>>(() => undefined);
        },
      }),
    };
    await assert.rejects(writeVerified(source, path.join(work, 'f'), { digest: sha256(Buffer.alloc(0)), sizeBytes: 1 }, controller.signal), { name: 'AbortError' });
    assert.deepEqual(fs.readdirSync(work), []);
  });

  it('unpacks pax and GNU long names and keeps execute bits', async () => {
    const long = `${'d'.repeat(120)}/${'é'.repeat(80)}.txt`;
    const dir = await unpack(
      tgz(meta('x', paxRecord('path', long) + paxRecord('mtime', '0')), entry('placeholder', 'pax'), meta('L', 'gnu/' + 'g'.repeat(150)), entry('short', 'gnu'), entry('bin/run', 'x', {}, 0o750)),
    );
    assert.equal(fs.readFileSync(path.join(dir, long), 'utf8'), 'pax');
    assert.equal(fs.readFileSync(path.join(dir, 'gnu', 'g'.repeat(150)), 'utf8'), 'gnu');
    assert.equal(fs.statSync(path.join(dir, 'bin/run')).mode & 0o777, 0o755 & ~process.umask());
    assert.equal(fs.existsSync(path.join(dir, 'placeholder')), false);
  });

  it('refuses an escape hidden in a pax path', async () => {
    await refused(tgz(meta('x', paxRecord('path', '../../x')), entry('innocent', 'x')), /leaves the directory/);
  });

  it('refuses a member twice, and a file where a directory is needed', async () => {
    await refused(tgz(entry('a', '1'), entry('a', '2')), /the member "a" twice/);
    await refused(tgz(entry('a', '1'), entry('a/b', '2')), /cannot be created \((ENOTDIR|EEXIST)\)/);
  });

  it('refuses truncated archives and input that is not gzip', async () => {
    const whole = Buffer.concat([...entry('a', 'x'.repeat(2000))]);
    await refused(gzipSync(whole.subarray(0, 1000)), /is truncated/);
    await refused(Buffer.from('not gzip at all'), /is not valid gzip/);
    const bad = Buffer.concat(entry('a', 'x'));
    bad[148] = 0x31; // checksum field
    await refused(gzipSync(Buffer.concat([bad, Buffer.alloc(1024)])), /bad checksum/);
  });

  it('refuses archives that inflate past the limit', async () => {
    await refused(tgz(entry('a', 'x'.repeat(600)), entry('b', 'y'.repeat(600))), /unpacks to more than 1000 bytes/, { maxBytes: 1000, maxEntries: 10 });
    await refused(tgz(entry('a', ''), entry('b', ''), entry('c', '')), /more than 2 members/, { maxBytes: 1000, maxEntries: 2 });
  });
});
