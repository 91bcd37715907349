// One reader of newline-delimited JSON bodies (the era-C `operations:stream` response, the local
// Runs watch): splits a byte stream into lines without decoding a half UTF-8 character, skips
// blank lines, and refuses a line longer than its cap instead of buffering without bound.
import { SandboxSessionsError } from '../errors';

/** A line over the cap, or bytes after the last newline when the body ends. */
export class NdjsonLineError extends SandboxSessionsError<'ndjson_line_too_long' | 'ndjson_truncated'> {
  override readonly name = 'NdjsonLineError';
  readonly service = 'ndjson';
}

/** Yields each non-blank line (without its `\n`, `\r\n` trimmed) of an NDJSON byte stream. */
export async function* ndjsonLines(body: AsyncIterable<Uint8Array | string>, maxLineBytes: number): AsyncGenerator<string> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    pending = pending.length === 0 ? bytes : Buffer.concat([pending, bytes]);
    let start = 0;
    let newline: number;
    while ((newline = pending.indexOf(0x0a, start)) !== -1) {
      if (newline - start > maxLineBytes) throw new NdjsonLineError('ndjson_line_too_long', `an NDJSON line exceeds ${maxLineBytes} bytes`);
      const line = pending.subarray(start, newline).toString('utf8').trim();
      start = newline + 1;
      if (line !== '') yield line;
    }
    pending = pending.subarray(start);
    if (pending.length > maxLineBytes) throw new NdjsonLineError('ndjson_line_too_long', `an NDJSON line exceeds ${maxLineBytes} bytes`);
  }
  if (pending.toString('utf8').trim() !== '') throw new NdjsonLineError('ndjson_truncated', 'the NDJSON body ended inside a line');
}
