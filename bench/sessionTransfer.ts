// An activation's session through the gateway, each way, by what the sandbox's image has — how a kruntimes or
// OpenSandbox activation moves it (here the local gateway, the sandbox's directory not offered, as a cluster's is
// not): one tarball by GNU tar or by BusyBox's tar (Alpine), zstd-compressed or plain, against the file-by-file copy
// an image without tar gets (the baseline, measured in the same run). In: `checkoutInto` of the revision (the verified
// bundle uploaded and unpacked by the sandbox's tar, or the checked-out tree copied file by file); out: `captureFrom`
// (packed by the sandbox's tar, downloaded, read strictly and packed by our codec — or copied out file by file, then
// packed). The sandbox's creation is not counted. Real parts: the local gateway daemon (process backend), the file
// repository, this machine's GNU tar and Debian's BusyBox (its applets alone on the commands' PATH). `--rtt-ms N`
// puts N ms before every gateway call, as a network's round trip would (a cluster's port-forward): what a transfer's
// number of calls costs there.
// Run: npx tsx bench/sessionTransfer.ts [--runs N] [--only 1mb|100mb] [--rtt-ms N]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_PEOPLE_LIMITS } from '../protocol/bundle';
import { packSessionBundle } from '../server/bundle';
import { publishSessionCheckpointV1 } from '../server/repository/checkpoint';
import { captureFrom, checkoutInto, type SessionTransfer } from '../server/sandboxes/workspaceMover';
import { createActivationWorld } from '../test/fixtures/activation/harness';
import { fixturePackOptions, GOLDEN } from '../test/fixtures/bundle/goldenFixture';
import { ImageClient, type ImageTools } from '../test/fixtures/sandboxes/imageClient';
import { generateTree, median, timed } from './bundle';


/** The images, the baseline (no tar: file by file) last. */
const IMAGES: ImageTools[] = ['tar and zstd', 'tar', 'busybox and zstd', 'busybox', 'neither'];

async function benchSize(label: string, files: number, bytes: number, runs: number, rttMs: number): Promise<void> {
  const world = await createActivationWorld();
  try {
    const tree = path.join(world.dir, 'tree');
    const written = generateTree(tree, files, bytes);
    const roots = { stateRoot: path.join(tree, 'state'), workspaceRoot: path.join(tree, 'workspace') };
    const artifact = await packSessionBundle({ ...fixturePackOptions(roots, path.join(world.dir, 'r1.tar.zst')), limits: DEFAULT_PEOPLE_LIMITS });
    const checkpoint = await publishSessionCheckpointV1({ objectStore: world.repo.objects, compatibilityBundle: artifact });
    const times = new Map(IMAGES.map((image) => [image, { in: [] as number[], out: [] as number[], how: [] as SessionTransfer[] }]));
    for (let i = 0; i < runs; i++) {
      for (const image of IMAGES) {
        const sandbox = (await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true })).ref;
        const connection = await world.provider.open(sandbox);
        const client = new ImageClient({ endpoint: connection.endpoint, token: connection.token });
        client.tools = image;
        client.roundTripMs = rttMs;
        const scratch = fs.mkdtempSync(path.join(world.dir, 'scratch-'));
        const access = { client, hostRoot: undefined };
        const placement = { kind: 'session', dir: 'session' } as const;
        const t = times.get(image) as { in: number[]; out: number[]; how: SessionTransfer[] };
        try {
          const input = { objects: world.repo.objects, checkpoint, sessionId: GOLDEN.sessionId, limits: DEFAULT_PEOPLE_LIMITS, scratch };
          const [inMs, identity] = await timed(() => checkoutInto(access, placement, input, { onTransfer: (how) => t.how.push(how) }));
          const bundle = { sessionId: GOLDEN.sessionId, lastCommittedActivationId: 'bench', stateIdentity: identity, limits: DEFAULT_PEOPLE_LIMITS, destination: path.join(scratch, 'out.tar.zst') };
          const [outMs, packed] = await timed(() => captureFrom(access, placement, bundle, { scratch, onTransfer: (how) => t.how.push(how) }));
          if (packed.workspace.includedEntries === 0) throw new Error('nothing came back');
          t.in.push(inMs);
          t.out.push(outMs);
        } finally {
          await client.close();
          await world.provider.delete(sandbox);
          fs.rmSync(scratch, { recursive: true, force: true });
        }
      }
    }
    const base = times.get('neither') as { in: number[]; out: number[] };
    const [baseIn, baseOut] = [median(base.in), median(base.out)];
    console.log(`${label}: ${files} files, ${(written / 1e6).toFixed(1)} MB; ${rttMs} ms before each gateway call; ${runs} runs each, medians; × = against file by file (no tar in the image)`);
    for (const image of IMAGES) {
      const t = times.get(image) as { in: number[]; out: number[]; how: SessionTransfer[] };
      const how = t.how[0]?.how === 'tarball' ? `${t.how[0].tar} tar, ${t.how[0].compression === 'zstd' ? 'tar.zst' : 'plain tar'}` : 'file by file';
      const [inMs, outMs] = [median(t.in), median(t.out)];
      console.log(
        `  ${image.padEnd(16)} ${how.padEnd(24)} in ${inMs.toFixed(0).padStart(6)} ms ${(inMs / baseIn).toFixed(2)}×   ` +
          `out ${outMs.toFixed(0).padStart(6)} ms ${(outMs / baseOut).toFixed(2)}×   (in ${t.in.map((x) => x.toFixed(0)).join(', ')}; out ${t.out.map((x) => x.toFixed(0)).join(', ')})`,
      );
    }
  } finally {
    await world.dispose();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' }, only: { type: 'string' }, 'rtt-ms': { type: 'string', default: '0' } } });
  const [runs, rttMs] = [Number(values.runs), Number(values['rtt-ms'])];
  if (values.only !== '100mb') await benchSize('1mb', 50, 1_000_000, runs, rttMs);
  if (values.only !== '1mb') await benchSize('100mb', 2000, 100_000_000, runs, rttMs);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
