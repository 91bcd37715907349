// Byte-level wire facts: Go's JSON encoding, bigint-safe parsing, and the Bash page token.
import assert from 'node:assert/strict';
import { encodeGoJson, parseJsonWithBigInts, stringifyWithBigInts } from '../../../protocol/kruntimes/goJson';
import { decodePageToken, encodePageToken } from '../../../protocol/kruntimes/pageToken';
import {
  Base64Schema,
  CommandResultSchema,
  ReadResponseSchema,
  SessionOperationSchema,
  StreamEventSchema,
  operationKind,
} from '../../../protocol/kruntimes/gateway';

describe('wire encoding', () => {
  it('encodes JSON as Go does: HTML escapes and a trailing newline', () => {
    assert.equal(encodeGoJson({ error: 'a<b>&c\u2028' }), '{"error":"a\\u003cb\\u003e\\u0026c\\u2028"}\n');
    assert.equal(encodeGoJson({ name: 'é' }), '{"name":"é"}\n');
  });

  it('round-trips int64 fields exactly', () => {
    const text = '{"state":"SESSION_STATE_READY","lastActivityUnixNano":1788256802123456789}';
    const parsed = parseJsonWithBigInts(text, new Set(['lastActivityUnixNano'])) as { lastActivityUnixNano: bigint };
    assert.equal(parsed.lastActivityUnixNano, 1788256802123456789n);
    assert.equal(stringifyWithBigInts(parsed), text);
  });

  it('issues the golden page tokens', () => {
    assert.equal(encodePageToken('', 'b'), 'eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0');
    assert.equal(encodePageToken('', 'build.log'), 'eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJidWlsZC5sb2cifQ');
  });

  it('checks page tokens with the runtime messages', () => {
    assert.deepEqual(decodePageToken('eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0', ''), { ok: true, after: 'b' });
    assert.deepEqual(decodePageToken('not-a-token', ''), { ok: false, message: 'page token is invalid' });
    assert.deepEqual(decodePageToken('eyJ2IjoxLCJwYXRoIjoiIiwiYWZ0ZXIiOiJiIn0', 'other'), {
      ok: false,
      message: 'page token does not match the requested directory',
    });
    const wrongVersion = Buffer.from('{"v":2,"path":"","after":"b"}').toString('base64url');
    assert.equal(decodePageToken(wrongVersion, '').ok, false);
    const extraField = Buffer.from('{"v":1,"path":"","after":"b","x":1}').toString('base64url');
    assert.deepEqual(decodePageToken(extraField, ''), { ok: false, message: 'page token is invalid' });
    const emptyAfter = Buffer.from('{"v":1,"path":"","after":""}').toString('base64url');
    assert.deepEqual(decodePageToken(emptyAfter, ''), { ok: false, message: 'page token does not match the requested directory' });
    // Python's tokens escape non-ASCII; both runtimes accept each other's.
    const python = Buffer.from('{"v": 1, "path": "", "after": "\\u00e9"}').toString('base64url');
    assert.deepEqual(decodePageToken(python, ''), { ok: true, after: 'é' });
  });

  it('accepts only padded standard base64', () => {
    assert.equal(Base64Schema.safeParse('aGVsbG8K').success, true);
    assert.equal(Base64Schema.safeParse('Z2F0ZXdheS1vaw==').success, true);
    assert.equal(Base64Schema.safeParse('Z2F0ZXdheS1vaw').success, false);
    assert.equal(Base64Schema.safeParse('a-_b').success, false);
  });

  it('every field that carries bytes refuses unpadded and URL-safe base64', () => {
    const carriers: [string, (b64: string) => { success: boolean }][] = [
      ['command stdin', (b) => SessionOperationSchema.safeParse({ command: { argv: ['cat'], stdin: b } })],
      ['write contents', (b) => SessionOperationSchema.safeParse({ writeFile: { path: 'a', contents: b } })],
      ['result stdout', (b) => CommandResultSchema.safeParse({ exitCode: 0, stdout: b })],
      ['result stderr', (b) => CommandResultSchema.safeParse({ exitCode: 0, stderr: b })],
      ['read contents', (b) => ReadResponseSchema.safeParse({ contents: b, truncated: false })],
      ['output event data', (b) => StreamEventSchema.safeParse({ sequence: 2, type: 'output', output: { stream: 'stdout', data: b } })],
      ['progress event data', (b) => StreamEventSchema.safeParse({ sequence: 2, type: 'progress', progress: { kind: 'status', data: b } })],
    ];
    for (const [name, parse] of carriers) {
      assert.equal(parse('aGk+Lw==').success, true, `${name}: padded standard base64`);
      assert.equal(parse('aGk+Lw').success, false, `${name}: unpadded`);
      assert.equal(parse('aGk-Lw==').success, false, `${name}: URL-safe alphabet`);
    }
  });

  it("parses a stream's failed event with its gRPC code, and refuses one without a code", () => {
    const event = StreamEventSchema.parse({ sequence: 3, type: 'failed', failed: { code: 4, message: 'command timed out' } });
    assert.deepEqual(event.type === 'failed' && event.failed, { code: 4, message: 'command timed out' });
    assert.equal(StreamEventSchema.safeParse({ sequence: 3, type: 'failed', failed: { message: 'x' } }).success, false);
  });

  it('finds exactly one operation key', () => {
    assert.equal(operationKind({ command: { shell: 'true' } }), 'command');
    assert.equal(operationKind({ command: { shell: 'true' }, deleteFile: { path: 'x' } }), undefined);
    assert.equal(operationKind({}), undefined);
  });
});
