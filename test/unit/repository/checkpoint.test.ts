// Checkpoint manifest encoding and object ids against the spec's vectors (§9.1, §9.3), the
// admission rules that make a checkpoint's refs bind to exactly its bytes, and publication for a
// session refusing a bundle packed for another before anything is published.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import { SESSION_BUNDLE_MEDIA_TYPE, SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE } from '../../../protocol/repository';
import { packSessionBundle } from '../../../server/bundle';
import { admitStoredCheckpoint, encodeSessionCheckpointManifestV1, publishSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import { FileObjectStore } from '../../../server/repository/fileObjectStore';
import type { ImmutableObjectStore } from '../../../server/repository/objectStore';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { FILE_OBJECT_REF_SCHEME } from '../../../server/repository/fileObjectStore';
import { encodeJcs } from '../../../server/repository/jcs';
import { objectIdFor } from '../../../server/repository/objectStore';

const GOLDEN_BUNDLE_DIGEST = 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1';

describe('checkpoint manifest (spec §9)', () => {
  const bundle = {
    objectRef: `${FILE_OBJECT_REF_SCHEME}${objectIdFor(GOLDEN_BUNDLE_DIGEST, SESSION_BUNDLE_MEDIA_TYPE)}`,
    digest: GOLDEN_BUNDLE_DIGEST,
    bytes: 676,
    mediaType: SESSION_BUNDLE_MEDIA_TYPE,
  };
  const value = { schemaVersion: 1 as const, compatibilityBundle: bundle };
  const encoded = encodeSessionCheckpointManifestV1(value);
  const manifest = {
    objectRef: `${FILE_OBJECT_REF_SCHEME}${objectIdFor(`sha256:${createHash('sha256').update(encoded).digest('hex')}`, SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE)}`,
    digest: `sha256:${createHash('sha256').update(encoded).digest('hex')}`,
    bytes: encoded.length,
    mediaType: SESSION_CHECKPOINT_MANIFEST_MEDIA_TYPE,
  };

  it('gives the golden bundle the spec object ref', () => {
    assert.equal(bundle.objectRef, 'maka-local-object://v1/56aadf143fb7072bfbba169941c43f397948f3a7569524aeee5109aeb20fbecd');
  });

  it('encodes the manifest as JCS: 321 bytes, sha256:0cd8…', () => {
    assert.equal(
      encoded.toString('utf8'),
      `{"compatibilityBundle":{"bytes":676,"digest":"${GOLDEN_BUNDLE_DIGEST}","mediaType":"${SESSION_BUNDLE_MEDIA_TYPE}","objectRef":"${bundle.objectRef}"},"schemaVersion":1}`,
    );
    assert.equal(encoded.length, 321);
    assert.equal(manifest.digest, 'sha256:0cd8b83b480b1566b63210484b536ccd9710d9c69cdc8552ebeb04c4f245e30c');
  });

  it('admits a matching checkpoint and refuses a ref that does not match its value', () => {
    assert.deepEqual(admitStoredCheckpoint({ manifest, value }), { manifest, value });
    const refuse = (checkpoint: unknown) =>
      assert.throws(() => admitStoredCheckpoint(checkpoint), (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch'));
    refuse({ manifest: { ...manifest, bytes: 320 }, value });
    refuse({ manifest: { ...manifest, mediaType: 'application/json' }, value });
    refuse({ manifest, value: { ...value, compatibilityBundle: { ...bundle, bytes: 677 } } });
    refuse({ manifest, value: { ...value, compatibilityBundle: { ...bundle, mediaType: 'application/zip' } } });
    refuse({ manifest, value: { ...value, extra: 1 } });
    refuse({ manifest: { ...manifest, digest: manifest.digest.toUpperCase() }, value });
  });

  it('JCS sorts keys by code unit, drops undefined, keeps raw UTF-8', () => {
    assert.equal(encodeJcs({ b: 1, a: [true, null, 'α'], c: undefined, A: 0.5 }), '{"A":0.5,"a":[true,null,"α"],"b":1}');
  });

  it('published for a session: refuses a bundle packed for another session, or not a bundle, before anything is published', async () => {
    const tmp = tempDir('checkpoint-identity-');
    try {
      const real = new FileObjectStore(join(tmp.path, 'objects-root'));
      const published: string[] = [];
      const store: ImmutableObjectStore = {
        objectIdOf: (ref) => real.objectIdOf(ref),
        publish: async (input) => {
          published.push(input.mediaType);
          return real.publish(input);
        },
        assertReadable: (ref) => real.assertReadable(ref),
        materialize: (input) => real.materialize(input),
      };
      const packed = await packSessionBundle({ ...fixturePackOptions(createFixture(join(tmp.path, 'src')), join(tmp.path, 'b.tar.zst')), limits: CODEC_TEST_LIMITS });
      const artifact = { path: packed.path, archiveDigest: packed.archiveDigest, compressedBytes: packed.compressedBytes };
      await assert.rejects(publishSessionCheckpointV1({ objectStore: store, compatibilityBundle: artifact, sessionId: 'other' }), (err: unknown) => {
        assert.ok(isSessionRepositoryError(err, 'identity_mismatch'), String(err));
        assert.match(err.message, new RegExp(`was packed for session "${GOLDEN.sessionId}", not for session "other"`));
        return true;
      });
      const junk = join(tmp.path, 'junk.tar.zst');
      writeFileSync(junk, 'junk');
      await assert.rejects(
        publishSessionCheckpointV1({ objectStore: store, compatibilityBundle: { path: junk, archiveDigest: `sha256:${createHash('sha256').update('junk').digest('hex')}`, compressedBytes: 4 }, sessionId: 'other' }),
        (err: unknown) => isSessionRepositoryError(err, 'integrity_mismatch') && /not a Session Bundle/.test(err.message),
      );
      assert.deepEqual(published, [], 'nothing was published');
      const checkpoint = await publishSessionCheckpointV1({ objectStore: store, compatibilityBundle: artifact, sessionId: GOLDEN.sessionId });
      assert.equal(checkpoint.value.compatibilityBundle.digest, GOLDEN.archiveDigest);
      assert.equal(published.length, 2);
    } finally {
      tmp.cleanup();
    }
  });
});
