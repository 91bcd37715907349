// An activation's session through the gateway as ONE tarball each way (sandboxTarball.ts): `tar.zst` where the image
// has the zstd program, plain tar where it has only GNU tar (Debian's slim images), and the same with BusyBox's tar
// (Alpine). Either way the session that arrives is the bundle's, and the one that comes back packs to Maka's golden
// bundle byte for byte; with GNU tar what the snapshot policy leaves out never crosses the gateway and is reported (a
// secret still comes back, for the snapshot to refuse); BusyBox's tar cannot leave anything out, so such a session
// goes file by file, which leaves it in the sandbox too; BusyBox's hard links, long names and followed symbolic links
// arrive as GNU tar's would. Nothing of the transfer stays in the sandbox, and an image without zstd is never asked to
// run it. Real parts: the local gateway and its processes, the file repository, this machine's GNU tar and Debian's
// BusyBox (its applets alone on the commands' PATH); the sandbox's directory is not offered, as a cluster's is not.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CODEC_TEST_LIMITS, DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import type { StoredSessionCheckpoint } from '../../../protocol/repository';
import { packSessionBundle } from '../../../server/bundle';
import { publishSessionCheckpointV1 } from '../../../server/repository/checkpoint';
import { packSessionOut } from '../../../server/sandboxes/sandboxTarball';
import { captureFrom, checkoutInto, type SessionTransfer } from '../../../server/sandboxes/workspaceMover';
import { createActivationWorld, type ActivationWorld } from '../../fixtures/activation/harness';
import { ImageClient, type ImageTools } from '../../fixtures/sandboxes/imageClient';
import { createFixture, fixturePackOptions, GOLDEN } from '../../fixtures/bundle/goldenFixture';

/** The images played or made by ImageClient, and how each one's tar moves the session. */
const IMAGES: { tools: ImageTools; transfer: Extract<SessionTransfer, { how: 'tarball' }> }[] = [
  { tools: 'tar and zstd', transfer: { how: 'tarball', tar: 'gnu', compression: 'zstd' } },
  { tools: 'tar', transfer: { how: 'tarball', tar: 'gnu', compression: 'none' } },
  { tools: 'busybox and zstd', transfer: { how: 'tarball', tar: 'busybox', compression: 'zstd' } },
  { tools: 'busybox', transfer: { how: 'tarball', tar: 'busybox', compression: 'none' } },
];

describe("an activation's session through the gateway as one tarball: tar.zst, or plain tar without zstd; GNU or BusyBox tar", function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  let checkpoint: StoredSessionCheckpoint;

  before(async () => {
    world = await createActivationWorld();
    const roots = createFixture(path.join(world.dir, 'src'));
    const artifact = await packSessionBundle({ ...fixturePackOptions(roots, path.join(world.dir, 'golden.tar.zst')), limits: CODEC_TEST_LIMITS });
    checkpoint = await publishSessionCheckpointV1({ objectStore: world.repo.objects, compatibilityBundle: artifact });
  });
  after(async () => {
    await world?.dispose();
  });

  for (const { tools, transfer } of IMAGES) {
    const { tar, compression } = transfer;
    it(`${tar === 'gnu' ? 'GNU tar' : 'BusyBox tar'}, ${compression === 'zstd' ? 'tar.zst' : 'plain tar'}: in and back out, the golden bundle again; nothing left in the sandbox`, async () => {
      const sandbox = (await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true })).ref;
      const connection = await world.provider.open(sandbox);
      const client = new ImageClient({ endpoint: connection.endpoint, token: connection.token });
      client.tools = tools;
      const scratch = fs.mkdtempSync(path.join(world.dir, 'scratch-'));
      const access = { client, hostRoot: undefined };
      const placement = { kind: 'session', dir: 'session' } as const;
      const transfers: SessionTransfer[] = [];
      try {
        const identity = await checkoutInto(access, placement, { objects: world.repo.objects, checkpoint, sessionId: GOLDEN.sessionId, limits: CODEC_TEST_LIMITS, scratch }, { onTransfer: (t) => transfers.push(t) });
        assert.deepEqual(Buffer.from(identity.bytes), GOLDEN.identityBytes);
        const root = (await world.provider.hostDirectory?.(sandbox)) as string;
        assert.deepEqual(fs.readdirSync(path.join(root, 'session')).sort(), ['state', 'workspace']);
        assert.equal(fs.readFileSync(path.join(root, 'session/state/session.bin'), 'utf8'), 'state');
        assert.equal(fs.statSync(path.join(root, 'session/workspace/run.sh')).mode & 0o777, 0o755);
        assert.deepEqual(fs.readdirSync(path.join(root, 'activation')), [], 'the uploaded tarball is gone');

        const packed = await captureFrom(
          access,
          placement,
          { sessionId: GOLDEN.sessionId, lastCommittedActivationId: GOLDEN.lastCommittedActivationId, stateIdentity: identity, limits: CODEC_TEST_LIMITS, destination: path.join(scratch, 'next.tar.zst') },
          { scratch, onTransfer: (t) => transfers.push(t) },
        );
        assert.equal(packed.artifact.archiveDigest, GOLDEN.archiveDigest, 'byte for byte the bundle that went in');
        assert.deepEqual(fs.readdirSync(path.join(root, 'activation')), [], 'the downloaded tarball is gone');
        assert.deepEqual(transfers, [transfer, transfer]);
        if (compression === 'none') {
          assert.ok(!client.commands.some((argv) => argv.includes('--zstd') || argv.some((a) => a.includes('zstd -'))), 'an image without zstd is never asked to run it');
        }
        assert.deepEqual(fs.readdirSync(scratch).filter((name) => name !== 'next.tar.zst'), [], 'no uncompressed copy left here');

        const write = (rel: string, contents: string | Buffer) => {
          fs.mkdirSync(path.dirname(path.join(root, 'session/workspace', rel)), { recursive: true });
          fs.writeFileSync(path.join(root, 'session/workspace', rel), contents);
        };
        // Links and long names arrive as GNU tar's --dereference --hard-dereference writes them: as files.
        // Over 100 bytes (BusyBox writes a GNU long name; GNU tar's ustar splits it), within what a bundle can hold.
        const long = `deep/${'n'.repeat(90)}/${'m'.repeat(20)}/f.txt`;
        write(long, 'long');
        write('bin/tool', 'the tool');
        fs.linkSync(path.join(root, 'session/workspace/bin/tool'), path.join(root, 'session/workspace/bin/tool-hard'));
        fs.linkSync(path.join(root, 'session/workspace/bin/tool'), path.join(root, 'session/workspace', `${long}.hard`));
        fs.symlinkSync('tool', path.join(root, 'session/workspace/bin/tool-soft'));
        const linked = await packSessionOut(client, { tar, compression, dir: 'session', into: path.join(scratch, 'linked'), limits: DEFAULT_PEOPLE_LIMITS });
        for (const rel of ['bin/tool', 'bin/tool-hard', 'bin/tool-soft', `${long}.hard`]) {
          const st = fs.lstatSync(path.join(linked.workspaceRoot, rel));
          assert.ok(st.isFile() && st.nlink === 1, `${rel} is a file of its own`);
          assert.equal(fs.readFileSync(path.join(linked.workspaceRoot, rel), 'utf8'), 'the tool');
        }
        assert.equal(fs.readFileSync(path.join(linked.workspaceRoot, long), 'utf8'), 'long');
        assert.deepEqual(fs.readdirSync(path.join(root, 'activation')), [], 'nothing of the transfer left');
        fs.rmSync(path.join(root, 'session/workspace/bin'), { recursive: true });
        fs.rmSync(path.join(root, 'session/workspace/deep'), { recursive: true });

        // What the policy leaves out by name stays in the sandbox, and is reported as the snapshot reports it.
        write('node_modules/dep/big.bin', randomBytes(2_000_000));
        write('sub/.GIT/objects/pack.bin', randomBytes(1_000_000));
        write('node_modules_extra/keep.txt', 'kept');
        write('debug.log', randomBytes(500_000));
        if (tar === 'busybox') {
          // BusyBox's tar takes no exclude list: the session goes file by file, which leaves all that where it is.
          await assert.rejects(packSessionOut(client, { tar, compression, dir: 'session', into: path.join(scratch, 'out'), limits: DEFAULT_PEOPLE_LIMITS }), /BusyBox tar cannot leave out/);
          const readBefore = client.readPaths.length;
          const fallback: SessionTransfer[] = [];
          const byFiles = await captureFrom(
            access,
            placement,
            { sessionId: GOLDEN.sessionId, stateIdentity: identity, limits: DEFAULT_PEOPLE_LIMITS, destination: path.join(scratch, 'files.tar.zst') },
            { scratch, onTransfer: (t) => fallback.push(t) },
          );
          assert.equal(fallback.length, 1);
          assert.match(fallback[0]?.how === 'files' ? fallback[0].reason : '', /^the image's BusyBox tar cannot leave out what the snapshot policy excludes \(.+ and 2 more\)$/);
          assert.deepEqual(
            byFiles.workspace.excludedEntries.map((e) => e.path).sort(),
            ['debug.log', 'node_modules/', 'sub/.GIT/'],
          );
          assert.deepEqual(client.readPaths.slice(readBefore).filter((p) => /node_modules\/|\.GIT\/|debug\.log/.test(p)), [], 'nothing left out was read');
          return;
        }
        write('sub/secret.log', 'a secret, for the snapshot to refuse');
        const out = await packSessionOut(client, { tar, compression, dir: 'session', into: path.join(scratch, 'out'), limits: DEFAULT_PEOPLE_LIMITS });
        assert.ok(out.transferredBytes < 100_000, `the 3.5 MB left out never crossed the gateway (${out.transferredBytes} bytes did)`);
        assert.deepEqual(
          [...out.skipped].sort((a, b) => a.path.localeCompare(b.path)),
          [
            { path: 'debug.log', category: 'log' },
            { path: 'node_modules/', category: 'dependency_tree' },
            { path: 'sub/.GIT/', category: 'source_control' },
          ],
        );
        assert.equal(fs.readFileSync(path.join(out.workspaceRoot, 'node_modules_extra/keep.txt'), 'utf8'), 'kept');
        assert.ok(fs.existsSync(path.join(out.workspaceRoot, 'sub/secret.log')), 'a secret file comes back, for the snapshot to refuse');
        assert.ok(!fs.existsSync(path.join(out.workspaceRoot, 'node_modules')) && !fs.existsSync(path.join(out.workspaceRoot, 'sub/.GIT')));
        assert.deepEqual(fs.readdirSync(path.join(root, 'activation')), [], 'no tarball or exclude list left');
      } finally {
        await client.close();
        await world.provider.delete(sandbox);
      }
    });
  }
});
