// The nine quotas (spec §6): each passes at exactly its observed value and fails at observed − 1 with
// `quota_exceeded` and bounded details — on pack, inspect and hydrate — leaving nothing behind.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS, type SessionBundleLimits, type SessionBundleQuota } from '../../../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle, packSessionBundle } from '../../../server/bundle';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { listing, rejectsWith } from '../../fixtures/bundle/harness';

/** The golden bundle's observed value for each quota. */
const OBSERVED: Record<SessionBundleQuota, number> = {
  maxCompressedBytes: 676,
  maxDecompressedTarBytes: 8704,
  maxPayloadBytes: 71,
  maxFileBytes: 45,
  maxEntryCount: 8,
  maxManifestBytes: 546,
  maxStateIdentityBytes: 45,
  maxPathBytes: 19,
  maxPathDepth: 3,
};

describe('bundle/quotas', () => {
  let tmp: { path: string; cleanup: () => void };
  let roots: { stateRoot: string; workspaceRoot: string };
  let bundle: string;
  let out: string;
  before(async () => {
    tmp = tempDir();
    roots = createFixture(join(tmp.path, 'src'));
    bundle = join(tmp.path, 'golden.tar.zst');
    await packSessionBundle({ ...fixturePackOptions(roots, bundle), limits: CODEC_TEST_LIMITS });
  });
  after(() => tmp.cleanup());
  beforeEach(() => {
    out = join(tmp.path, `out-${Math.random().toString(16).slice(2)}`);
    mkdirSync(out);
  });

  const exactly = (): SessionBundleLimits => ({ ...OBSERVED });

  it('everything passes with every quota exactly at its observed value', async () => {
    const a = await packSessionBundle({ ...fixturePackOptions(roots, join(out, 'a.tar.zst')), limits: exactly() });
    assert.equal(a.archiveDigest, GOLDEN.archiveDigest);
    await inspectSessionBundle({ source: { path: bundle }, limits: exactly() });
    await hydrateSessionBundle({ source: { path: bundle }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(out, 'h'), limits: exactly() });
    assert.deepEqual(listing(out), ['a.tar.zst', 'h']);
  });

  for (const quota of Object.keys(OBSERVED) as SessionBundleQuota[]) {
    it(`${quota} at observed − 1 fails on pack, inspect and hydrate`, async () => {
      const limits = { ...exactly(), [quota]: OBSERVED[quota] - 1 };
      for (const [label, work] of [
        ['pack', () => packSessionBundle({ ...fixturePackOptions(roots, join(out, 'p.tar.zst')), limits })],
        ['inspect', () => inspectSessionBundle({ source: { path: bundle }, limits })],
        ['hydrate', () => hydrateSessionBundle({ source: { path: bundle }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(out, 'h'), limits })],
      ] as const) {
        const err = await rejectsWith(work(), 'quota_exceeded', `${label} ${quota}`);
        assert.equal(err.details?.quota, quota, `${label}: ${err.message}`);
        assert.equal(err.details?.limit, OBSERVED[quota] - 1);
        assert.ok((err.details?.observed ?? 0) > OBSERVED[quota] - 1);
        assert.equal(err.details?.operation, label);
      }
      assert.deepEqual(listing(out), [], 'no temp file, staging, lock or destination is left');
    });
  }

  it('a zero budget fails closed for every quota', async () => {
    for (const quota of Object.keys(OBSERVED) as SessionBundleQuota[]) {
      const limits = { ...exactly(), [quota]: 0 };
      const err = await rejectsWith(inspectSessionBundle({ source: { path: bundle }, limits }), 'quota_exceeded', quota);
      assert.equal(err.details?.quota, quota);
    }
  });

  it('passes the 255-byte, depth-4 boundary path with a 128-byte file at exact limits', async () => {
    const src = join(tmp.path, 'boundary');
    const r = createFixture(src);
    const deep = join(r.workspaceRoot, 'a'.repeat(70), 'b'.repeat(73));
    mkdirSync(deep, { recursive: true });
    writeFileSync(join(deep, 'c'.repeat(100)), Buffer.alloc(128, 0x61));
    const path = `workspace/${'a'.repeat(70)}/${'b'.repeat(73)}/${'c'.repeat(100)}`;
    assert.equal(Buffer.byteLength(path), 255);
    const limits = { ...CODEC_TEST_LIMITS, maxPathBytes: 255, maxPathDepth: 4, maxFileBytes: 128 };
    const { path: archive } = await packSessionBundle({ ...fixturePackOptions(r, join(out, 'b.tar.zst')), limits });
    await hydrateSessionBundle({ source: { path: archive }, expectedSessionId: GOLDEN.sessionId, destinationRoot: join(out, 'h'), limits });
    await rejectsWith(inspectSessionBundle({ source: { path: archive }, limits: { ...limits, maxPathBytes: 254 } }), 'quota_exceeded');
    await rejectsWith(inspectSessionBundle({ source: { path: archive }, limits: { ...limits, maxPathDepth: 3 } }), 'quota_exceeded');
  });
});
