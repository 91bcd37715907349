// What a support report masks: the secrets a quoted message might carry, and nothing else.
import assert from 'node:assert/strict';
import { maskSecrets } from '../../../extension/diagnostics/maskSecrets';

describe('extension: masking secrets in a support report', () => {
  it('masks bearer tokens, URL passwords and token, key, password and secret fields', () => {
    const text = [
      'request failed: authorization: Bearer eyJhbGciOi.J9-x_y/z+=',
      'repository postgres://sessions:s3cr3t!@db.example:5432/maka',
      'token=abc123&x=1',
      '{"apiKey":"osb-key-1","name":"keep"}',
      'OPEN-SANDBOX-API-KEY: k-999',
      'X-EXECD-ACCESS-TOKEN: tok_42',
      "password: 'hunter2'",
      'clientSecret=shh',
    ].join('\n');
    const masked = maskSecrets(text);
    for (const secret of ['eyJhbGciOi', 's3cr3t', 'abc123', 'osb-key-1', 'k-999', 'tok_42', 'hunter2', 'shh']) {
      assert.ok(!masked.includes(secret), `${secret} is masked in:\n${masked}`);
    }
    assert.match(masked, /Bearer <masked>/);
    assert.match(masked, /postgres:\/\/sessions:<masked>@db\.example:5432\/maka/);
    assert.match(masked, /"name":"keep"/);
    assert.match(masked, /&x=1/);
  });

  it('leaves ordinary log lines as they are', () => {
    const lines = '2026-12-03 05:14:19.376 [info] Sandbox Sessions 0.1.0 activating\nfinishing the open of local.local.default.beside (tokens: 3 files)';
    assert.equal(maskSecrets(lines), lines);
  });
});
