// The contract (spec §5–7): digest format, Unicode rule, the nine limits, and bounded, frozen error details.
import assert from 'node:assert/strict';
import {
  CODEC_TEST_LIMITS,
  DEFAULT_PEOPLE_LIMITS,
  SESSION_BUNDLE_ERROR_CODES,
  SESSION_BUNDLE_LIMIT_KEYS,
  SessionBundleLimitsSchema,
  Sha256DigestSchema,
  isWellFormedUnicode,
} from '../../../protocol/bundle';
import { SessionBundleError, toSessionBundleError } from '../../../server/bundle/errors';
import { assertSessionBundleLimits, checkQuota } from '../../../server/bundle/limits';

describe('bundle/contract', () => {
  it('accepts only lowercase sha256 digests', () => {
    assert.ok(Sha256DigestSchema.safeParse(`sha256:${'0a'.repeat(32)}`).success);
    assert.ok(!Sha256DigestSchema.safeParse(`sha256:${'0A'.repeat(32)}`).success);
    assert.ok(!Sha256DigestSchema.safeParse(`sha256:${'0a'.repeat(31)}`).success);
    assert.ok(!Sha256DigestSchema.safeParse(`SHA256:${'0a'.repeat(32)}`).success);
  });

  it('detects lone surrogates', () => {
    assert.ok(isWellFormedUnicode('a😀é'));
    assert.ok(!isWellFormedUnicode('a\ud800'));
    assert.ok(!isWellFormedUnicode('\udc00a'));
  });

  it('requires all nine limits; 0 allowed; negative, fractional, extra rejected', () => {
    assert.equal(SESSION_BUNDLE_LIMIT_KEYS.length, 9);
    assert.equal(SESSION_BUNDLE_ERROR_CODES.length, 11);
    const zero = Object.fromEntries(SESSION_BUNDLE_LIMIT_KEYS.map((k) => [k, 0]));
    assert.deepEqual(assertSessionBundleLimits(zero), zero);
    assert.ok(SessionBundleLimitsSchema.safeParse(DEFAULT_PEOPLE_LIMITS).success);
    assert.ok(SessionBundleLimitsSchema.safeParse(CODEC_TEST_LIMITS).success);
    for (const key of SESSION_BUNDLE_LIMIT_KEYS) {
      const { [key]: _omit, ...missing } = CODEC_TEST_LIMITS;
      assert.throws(() => assertSessionBundleLimits(missing), TypeError, key);
      assert.throws(() => assertSessionBundleLimits({ ...CODEC_TEST_LIMITS, [key]: -1 }), RangeError);
      assert.throws(() => assertSessionBundleLimits({ ...CODEC_TEST_LIMITS, [key]: 1.5 }), RangeError);
      assert.throws(() => assertSessionBundleLimits({ ...CODEC_TEST_LIMITS, [key]: '1' }), TypeError);
    }
    assert.throws(() => assertSessionBundleLimits({ ...CODEC_TEST_LIMITS, maxOther: 1 }), TypeError);
    assert.throws(() => assertSessionBundleLimits(null), TypeError);
  });

  it('compares quotas inclusively with bounded details', () => {
    checkQuota(CODEC_TEST_LIMITS, 'maxEntryCount', 100, 'inspect');
    assert.throws(
      () => checkQuota(CODEC_TEST_LIMITS, 'maxEntryCount', 101, 'inspect', { entryIndex: 4 }),
      (err: unknown) => err instanceof SessionBundleError && err.code === 'quota_exceeded' &&
        JSON.stringify(err.details) === JSON.stringify({ operation: 'inspect', quota: 'maxEntryCount', limit: 100, observed: 101, entryIndex: 4 }),
    );
  });

  it('freezes details and drops anything unbounded', () => {
    const err = new SessionBundleError('io_failure', 'x', { operation: 'pack', limit: -3, path: '/etc/passwd' } as never);
    assert.ok(Object.isFrozen(err.details));
    assert.deepEqual(err.details, { operation: 'pack' });
    assert.equal(err.name, 'SessionBundleError');
  });

  it('maps foreign errors to io_failure or integrity_mismatch without their text', () => {
    const errno = Object.assign(new Error('EACCES: permission denied, open /secret/path'), { code: 'EACCES' });
    const mapped = toSessionBundleError(errno, 'hydrate');
    assert.equal(mapped.code, 'io_failure');
    assert.ok(!mapped.message.includes('/secret/path'));
    assert.equal(toSessionBundleError(new Error('zstd: corrupted'), 'inspect', true).code, 'integrity_mismatch');
    assert.equal(toSessionBundleError(new Error('other'), 'pack').code, 'io_failure');
  });
});
