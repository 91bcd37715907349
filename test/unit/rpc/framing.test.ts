// The resilient Content-Length reader: messages split at any byte, several per chunk, and
// recovery from garbage between frames.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { FrameError, ResilientMessageReader } from '../../../server/rpc/framing';

function collect(chunks: Buffer[], limits = { maxMessageBytes: 1024, maxHeaderBytes: 256 }) {
  const input = new PassThrough();
  const reader = new ResilientMessageReader(input, limits);
  const messages: unknown[] = [];
  const errors: FrameError[] = [];
  reader.onError((e) => errors.push(e as FrameError));
  reader.listen((m) => messages.push(m));
  for (const c of chunks) input.write(c);
  return { messages, errors };
}

const frame = (obj: unknown) => {
  const body = Buffer.from(JSON.stringify(obj));
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n`), body]);
};

describe('companion server: message framing', () => {
  it('reassembles messages split at every byte', () => {
    const bytes = Buffer.concat([frame({ id: 1, é: 'ü' }), frame({ id: 2 })]);
    const { messages, errors } = collect([...bytes].map((b) => Buffer.from([b])));
    assert.deepEqual(messages, [{ id: 1, é: 'ü' }, { id: 2 }]);
    assert.deepEqual(errors, []);
  });

  it('reads several messages from one chunk', () => {
    const { messages } = collect([Buffer.concat([frame({ a: 1 }), frame({ b: 2 }), frame({ c: 3 })])]);
    assert.equal(messages.length, 3);
  });

  it('skips an oversized frame streamed in pieces and reads the next one', () => {
    const big = Buffer.concat([Buffer.from('Content-Length: 5000\r\n\r\n'), Buffer.alloc(5000, 0x20)]);
    const pieces = [big.subarray(0, 100), big.subarray(100, 3000), big.subarray(3000), frame({ after: true })];
    const { messages, errors } = collect(pieces);
    assert.deepEqual(messages, [{ after: true }]);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.parseError, true);
  });

  it('drops garbage and a header without Content-Length, then resumes', () => {
    const { messages, errors } = collect([
      Buffer.from('garbage\r\n\r\n'),
      Buffer.from('X-Other: 1\r\n\r\n'),
      frame({ ok: 1 }),
      Buffer.alloc(600, 0x41),
      frame({ ok: 2 }),
    ]);
    assert.deepEqual(messages, [{ ok: 1 }, { ok: 2 }]);
    assert.ok(errors.length >= 2);
    assert.ok(errors.every((e) => !e.parseError));
  });

  it('reports a JSON array or scalar body as a parse error', () => {
    const body = Buffer.from('[1,2]');
    const { messages, errors } = collect([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body, frame({ ok: 1 })]);
    assert.deepEqual(messages, [{ ok: 1 }]);
    assert.equal(errors[0]?.parseError, true);
  });
});
