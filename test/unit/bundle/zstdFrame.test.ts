// The canonical zstd frame (spec §4): writer parameters, the stripped trailing empty frame, and the reader's
// structural check accepting exactly one 28b52ffd 04 58 frame.
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { zstdDecompressSync } from 'node:zlib';
import { CanonicalFrameValidator, createBundleZstdCompressor, NODE_TRAILING_EMPTY_FRAME, StripTrailingEmptyFrame } from '../../../server/bundle/zstdFrame';

async function run(chunks: Buffer[], ...stages: NodeJS.ReadWriteStream[]): Promise<Buffer> {
  const out: Buffer[] = [];
  await pipeline(Readable.from(chunks), ...(stages as [NodeJS.ReadWriteStream]), new Writable({ write(c: Buffer, _e, cb) { out.push(c); cb(); } }));
  return Buffer.concat(out);
}

describe('bundle/zstdFrame', () => {
  const input = [Buffer.alloc(512, 1), Buffer.from('hello '.repeat(5000)), Buffer.alloc(1024)];

  it("Node's encoder appends an empty frame after multi-chunk input; the writer strips exactly that", async () => {
    const raw = await run(input, createBundleZstdCompressor());
    assert.ok(raw.subarray(-13).equals(NODE_TRAILING_EMPTY_FRAME), 'the undocumented Node behaviour this codec relies on');
    const stripped = await run(input, createBundleZstdCompressor(), new StripTrailingEmptyFrame());
    assert.ok(stripped.equals(raw.subarray(0, -13)));
    assert.equal(stripped.subarray(0, 6).toString('hex'), '28b52ffd0458');
    assert.ok(zstdDecompressSync(stripped).equals(Buffer.concat(input)));
    assert.equal(stripped.lastIndexOf(Buffer.from('28b52ffd', 'hex')), 0);
  });

  it('passes a canonical frame through unchanged and refuses anything after it', async () => {
    const frame = await run(input, createBundleZstdCompressor(), new StripTrailingEmptyFrame());
    // Fed one byte at a time, so every state boundary of the validator is crossed mid-chunk.
    const bytewise = [...frame].map((b) => Buffer.from([b]));
    assert.ok((await run(bytewise, new CanonicalFrameValidator())).equals(frame));
    await assert.rejects(run([frame, NODE_TRAILING_EMPTY_FRAME], new CanonicalFrameValidator()), /exactly one frame/);
    for (let cut = 0; cut < frame.length; cut += 7) {
      await assert.rejects(run([frame.subarray(0, cut)], new CanonicalFrameValidator()), /truncated|header/, `cut at ${cut}`);
    }
  });
});
