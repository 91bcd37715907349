// Checking a revision out straight into a sandbox's directory (issue 25: no staging copy): the layout a sandbox
// sees (`session/{state,workspace}`, nothing else left behind), the bundle still verified on the way in, and the
// gateway not used when the directory is here.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { CODEC_TEST_LIMITS } from '../../../protocol/bundle';
import type { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { isSessionBundleError, packSessionBundle } from '../../../server/bundle';
import { publishSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import type { SessionRepository } from '../../../server/repository/contract';
import { openFileSessionRepository } from '../../../server/repository/fileRepository';
import { checkoutInto } from '../../../server/sandboxes/workspaceMover';
import { createFixture, fixturePackOptions, GOLDEN, tempDir } from '../../fixtures/bundle/goldenFixture';

/** A gateway client that fails the test if anything calls it. */
const unusedClient = new Proxy({} as GatewayClient, {
  get: (_target, property) => {
    throw new Error(`the gateway was used (${String(property)}) although the sandbox's directory is here`);
  },
});

describe('workspace mover: checkout into a sandbox directory', () => {
  let tmp: { path: string; cleanup: () => void };
  let repo: SessionRepository;
  let sandboxRoot: string;
  let scratch: string;
  let checkpoint: Awaited<ReturnType<typeof publishSessionCheckpointV1>>;

  beforeEach(async () => {
    tmp = tempDir('mover-test-');
    repo = await openFileSessionRepository({ storageRoot: path.join(tmp.path, 'repository') });
    const roots = createFixture(path.join(tmp.path, 'src'));
    const artifact = await packSessionBundle({ ...fixturePackOptions(roots, path.join(tmp.path, 'bundle.tar.zst')), limits: CODEC_TEST_LIMITS });
    assert.equal(artifact.archiveDigest, GOLDEN.archiveDigest);
    checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: artifact });
    sandboxRoot = path.join(tmp.path, 'sandbox');
    scratch = path.join(tmp.path, 'scratch');
    fs.mkdirSync(sandboxRoot);
    fs.mkdirSync(scratch, { mode: 0o700 });
  });
  afterEach(async () => {
    await repo.close();
    tmp.cleanup();
  });

  const checkout = () =>
    checkoutInto(
      { client: unusedClient, hostRoot: sandboxRoot },
      { kind: 'session', dir: 'session' },
      { objects: repo.objects, checkpoint, sessionId: GOLDEN.sessionId, limits: CODEC_TEST_LIMITS, scratch },
    );

  it('hydrates in place: session/{state,workspace} as the sandbox expects, the identity returned, nothing else left', async () => {
    const identity = await checkout();
    assert.equal(identity.mediaType, GOLDEN.identityMediaType);
    assert.deepEqual(Buffer.from(identity.bytes), GOLDEN.identityBytes);
    assert.deepEqual(fs.readdirSync(sandboxRoot), ['session'], 'no staging, lock or ownership file left in the sandbox');
    const session = path.join(sandboxRoot, 'session');
    assert.deepEqual(fs.readdirSync(session).sort(), ['state', 'workspace'], 'state-identity.json is not part of the sandbox layout');
    assert.equal(fs.statSync(session).mode & 0o777, 0o755);
    assert.equal(fs.readFileSync(path.join(session, 'state/session.bin'), 'utf8'), 'state');
    assert.ok(fs.statSync(path.join(session, 'state/empty')).isDirectory());
    assert.equal(fs.statSync(path.join(session, 'workspace/run.sh')).mode & 0o777, 0o755);
    assert.equal(fs.readFileSync(path.join(session, 'workspace/深/x.txt'), 'utf8'), '好');
    assert.deepEqual(fs.readdirSync(scratch), [], 'no copy of the bundle in scratch (the stored object is read where it is)');
  });

  it('still verifies the bundle: a stored object altered on disk is refused and nothing appears in the sandbox', async () => {
    const stored = await repo.objects.storedFile?.(checkpoint.value.compatibilityBundle, CODEC_TEST_LIMITS.maxCompressedBytes);
    assert.ok(stored !== undefined);
    const bytes = fs.readFileSync(stored);
    bytes[bytes.length - 8] = (bytes[bytes.length - 8] ?? 0) ^ 0xff;
    fs.chmodSync(stored, 0o600);
    fs.writeFileSync(stored, bytes);
    await assert.rejects(checkout(), (err: unknown) => isSessionBundleError(err, 'integrity_mismatch'));
    assert.deepEqual(fs.readdirSync(sandboxRoot), [], 'nothing published into the sandbox');
  });
});
