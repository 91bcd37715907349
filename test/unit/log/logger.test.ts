// The server's stderr log as a user sets it: SANDBOX_SESSIONS_LOG_LEVEL picks the level (any case), a value that
// is no level is said once instead of ignored, and credential-bearing fields never reach the line.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../../server/log';

function lines(env: NodeJS.ProcessEnv, log: (l: ReturnType<typeof createLogger>) => void): Record<string, unknown>[] {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      out.push(chunk.toString());
      done();
    },
  });
  log(createLogger(sink, undefined, env));
  return out.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

const everyLevel = (l: ReturnType<typeof createLogger>): void => {
  l.debug('d');
  l.info('i');
  l.warn('w');
  l.error('e');
};

describe('server log: SANDBOX_SESSIONS_LOG_LEVEL', () => {
  it('filters by the level it names, in any case; unset is info', () => {
    assert.deepEqual(lines({ SANDBOX_SESSIONS_LOG_LEVEL: 'warn' }, everyLevel).map((r) => r.msg), ['w', 'e']);
    assert.deepEqual(lines({ SANDBOX_SESSIONS_LOG_LEVEL: 'DEBUG' }, everyLevel).map((r) => r.msg), ['d', 'i', 'w', 'e']);
    assert.deepEqual(lines({}, everyLevel).map((r) => r.msg), ['i', 'w', 'e']);
  });

  it('says once, first, that a value is no level, and logs at info', () => {
    const got = lines({ SANDBOX_SESSIONS_LOG_LEVEL: 'verbose' }, everyLevel);
    assert.deepEqual(got.map((r) => r.msg), ['SANDBOX_SESSIONS_LOG_LEVEL is not debug, info, warn or error; logging at info', 'i', 'w', 'e']);
    assert.deepEqual([got[0]?.level, got[0]?.value], ['warn', 'verbose']);
  });

  it('redacts credential-bearing fields at any depth', () => {
    const [line] = lines({}, (l) => l.info('request', { url: 'http://127.0.0.1', headers: { Authorization: 'Bearer abc' }, apiKey: 'k', nested: [{ password: 'p' }] }));
    assert.deepEqual(line?.headers, { Authorization: '[redacted]' });
    assert.equal(line?.apiKey, '[redacted]');
    assert.deepEqual(line?.nested, [{ password: '[redacted]' }]);
    assert.equal(line?.url, 'http://127.0.0.1');
    assert.doesNotMatch(JSON.stringify(line), /abc|"k"|"p"/);
  });
});
