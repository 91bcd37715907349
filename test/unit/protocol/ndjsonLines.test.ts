// The one NDJSON line reader (era-C operation streams, the local Runs watch): lines split across
// chunks — even inside a multi-byte character — come out whole, blank lines are skipped, and a
// line over the cap or a body that ends inside a line is refused instead of buffered or dropped.
import assert from 'node:assert/strict';
import { ndjsonLines, NdjsonLineError } from '../../../protocol/kruntimes/ndjsonLines';

async function* chunks(...parts: Buffer[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield p;
}

async function collect(body: AsyncIterable<Buffer>, cap = 1024): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of ndjsonLines(body, cap)) lines.push(line);
  return lines;
}

describe('ndjsonLines', () => {
  it('reassembles lines split across chunks, inside a UTF-8 character too, and skips blank lines', async () => {
    const bytes = Buffer.from('{"a":"é"}\n\r\n\n{"b":2}\r\n', 'utf8');
    const cut = bytes.indexOf(0xc3) + 1; // between the two bytes of é
    assert.deepEqual(await collect(chunks(bytes.subarray(0, cut), bytes.subarray(cut, cut + 5), bytes.subarray(cut + 5))), ['{"a":"é"}', '{"b":2}']);
  });

  it('refuses a line longer than the cap, whether or not its newline has arrived', async () => {
    await assert.rejects(collect(chunks(Buffer.from('x'.repeat(20))), 10), (e: unknown) => e instanceof NdjsonLineError && e.code === 'ndjson_line_too_long');
    await assert.rejects(collect(chunks(Buffer.from(`${'x'.repeat(20)}\n`)), 10), (e: unknown) => e instanceof NdjsonLineError && e.code === 'ndjson_line_too_long');
  });

  it('refuses a body that ends inside a line', async () => {
    await assert.rejects(collect(chunks(Buffer.from('{"a":1}\n{"b"'))), (e: unknown) => e instanceof NdjsonLineError && e.code === 'ndjson_truncated');
  });
});
