// The body decoder alone: Go's error positions for bad base64, the fast base64 check is the
// same language as the grouped regex it replaced, and Go's decode order (a bad first value is
// reported before trailing data).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { isPaddedBase64 } from '../../../protocol/kruntimes/gateway';
import { decodeOperation, illegalBase64At } from '../../../server/gateway/operationDecode';

const GROUPED = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

describe('gateway: operation body decoding', () => {
  it('isPaddedBase64 accepts exactly what the grouped regex accepts', () => {
    const alphabet = 'AB+/=-_ ';
    for (let i = 0; i < 20_000; i++) {
      const len = i % 9;
      let s = '';
      for (let j = 0; j < len; j++) s += alphabet[randomBytes(1)[0]! % alphabet.length];
      assert.equal(isPaddedBase64(s), GROUPED.test(s), JSON.stringify(s));
    }
    for (let n = 0; n < 50; n++) assert.ok(isPaddedBase64(randomBytes(n).toString('base64')));
  });

  it("reports Go's illegal base64 positions", () => {
    assert.equal(illegalBase64At('aGVsbG8K'), -1);
    assert.equal(illegalBase64At('abc'), 0);
    assert.equal(illegalBase64At('abcdab'), 4);
    assert.equal(illegalBase64At('ab-_'), 2);
    assert.equal(illegalBase64At('a=bc'), 1);
  });

  it('reports an unknown field in the first value before trailing data', () => {
    assert.throws(() => decodeOperation(Buffer.from('{"x":1} {}')), { message: 'decode request: json: unknown field "x"' });
    assert.throws(() => decodeOperation(Buffer.from('{"command":{"argv":["a"]}} x')), { message: 'request must contain one JSON value' });
    assert.throws(() => decodeOperation(Buffer.from('{"command":')), { message: 'decode request: unexpected EOF' });
    assert.throws(() => decodeOperation(Buffer.from('[1]')), /cannot unmarshal array/);
    assert.deepEqual(decodeOperation(Buffer.from(' {"deleteFile":{"path":"a","recursive":true}}\n')), { deleteFile: { path: 'a', recursive: true } });
  });
});
