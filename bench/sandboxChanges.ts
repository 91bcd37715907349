// What a sandbox changed since a revision (`sessions/compareSandbox`): one comparison of a local sandbox of ~1 MB
// and ~100 MB with the revision it was saved as, one file changed, against two baselines measured in the same run:
// `tar -cf - | zstd -3` of the same workspace (what any "what changed" needs at least: read every byte once), and
// Save Sandbox as Revision of it (which reads the workspace the same way, then packs and commits it). The median
// is of runs after the first, whose time includes decompressing the revision's bundle once (printed apart). The
// Source Control view paces its comparisons by their duration (extension/changes/refreshPacer.ts), so this is
// also how stale its list can be.
// Through the gateway (how a kruntimes or OpenSandbox sandbox is compared: the same sandbox with its directory not
// offered), the comparison lists the tree and hashes its files in the sandbox; its baseline is what the comparison
// did before, and a save still does: copying the workspace out file by file through the gateway (`downloadTree`).
// And Open Revision in New Sandbox through the gateway: the revision's bundle uploaded as one file and unpacked by the
// sandbox's tar (as plain tar for an image without zstd), against the file-by-file copy an image without tar gets
// (the sandbox's creation not counted).
// And since opened (`openings/compareSandbox`, a sandbox with no revision): the first comparison takes the opening
// snapshot (packs the workspace as a save does, then indexes it), against a save; later ones, against tar|zstd — in
// place and through the gateway.
// Real parts: the local gateway daemon (process backend), the file repository, real processes.
// Run: npx tsx bench/sandboxChanges.ts [--runs N] [--only 1mb|100mb]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_PEOPLE_LIMITS } from '../protocol/bundle';
import { GatewayClient } from '../protocol/kruntimes/gatewayClient';
import type { SandboxProvider } from '../server/sandboxes/provider';
import { downloadTree } from '../server/sandboxes/transfer';
import { checkoutWorkspaceInto } from '../server/sandboxes/workspaceMover';
import { skipExcluded } from '../server/bundle/snapshotPolicy';
import { OpeningSnapshots } from '../server/sessions/openingSnapshots';
import { RevisionIndexCache } from '../server/sessions/revisionIndex';
import { compareSandboxWithRevision } from '../server/sessions/sandboxChanges';
import { SandboxSessionService } from '../server/sessions/sandboxSessions';
import { createActivationWorld, quietLogger } from '../test/fixtures/activation/harness';
import { ImageClient } from '../test/fixtures/sandboxes/imageClient';
import { generateTree, median, timed } from './bundle';


async function benchSize(label: string, files: number, bytes: number, runs: number): Promise<void> {
  const world = await createActivationWorld();
  const revisions = new RevisionIndexCache(async () => world.repo, path.join(world.dir, 'revisions'));
  try {
    const sessions = new SandboxSessionService(async () => world.repo, new Map([['local', world.provider]]), { kind: 'file', description: world.repoRoot }, quietLogger());
    const sandbox = await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true });
    const root = await world.provider.hostDirectory?.(sandbox.ref);
    if (!root) throw new Error('the local sandbox has no directory here');
    const generated = path.join(world.dir, 'tree');
    const written = generateTree(generated, files, bytes);
    fs.cpSync(path.join(generated, 'workspace'), root, { recursive: true });
    execFileSync('sh', ['-c', `cat $(find ${root} -type f) > /dev/null`]);
    const sessionId = `bench-${label}`;
    await sessions.saveSandbox({ sandbox: sandbox.ref, sessionId });
    const baseline: number[] = [];
    const saves: number[] = [];
    const compares: number[] = [];
    const changed = execFileSync('find', [root, '-type', 'f'], { encoding: 'utf8' }).split('\n')[0] ?? '';
    const gatewayOnly = Object.create(world.provider, { hostDirectory: { value: undefined } }) as SandboxProvider;
    const remote = new SandboxSessionService(async () => world.repo, new Map([['local', gatewayOnly]]), { kind: 'file', description: world.repoRoot }, quietLogger());
    const connection = await world.provider.open(sandbox.ref);
    const client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
    const copies: number[] = [];
    const remoteCompares: number[] = [];
    for (let i = 0; i < runs; i++) {
      baseline.push((await timed(async () => execFileSync('sh', ['-c', `tar -cf - -C ${root} . | zstd -3 -q -o /dev/null -f`])))[0]);
      fs.appendFileSync(changed, `run ${i}\n`);
      const [compare, result] = await timed(() => compareSandboxWithRevision({ sessions, revisions }, { sandbox: sandbox.ref, sessionId, revision: 'r1' }));
      if (result.total !== 1) throw new Error(`expected one change, got ${JSON.stringify(result.changes)}`);
      compares.push(compare);
      saves.push((await timed(() => sessions.saveSandbox({ sandbox: sandbox.ref, sessionId: `${sessionId}-save-${i}` })))[0]);
      const copy = path.join(world.dir, `copy-${i}`);
      copies.push((await timed(() => downloadTree(client, '', copy, { skip: skipExcluded([]) })))[0]);
      fs.rmSync(copy, { recursive: true });
      const [viaGateway, remoteResult] = await timed(() => compareSandboxWithRevision({ sessions: remote, revisions }, { sandbox: sandbox.ref, sessionId, revision: 'r1' }));
      if (remoteResult.total !== 1) throw new Error(`expected one change through the gateway, got ${JSON.stringify(remoteResult.changes)}`);
      remoteCompares.push(viaGateway);
    }
    await client.close();
    const takes: Record<'here' | 'gateway', number[]> = { here: [], gateway: [] };
    const sinceOpened: Record<'here' | 'gateway', number[]> = { here: [], gateway: [] };
    for (let i = 0; i < runs; i++) {
      for (const [where, service, provider] of [['here', sessions, world.provider], ['gateway', remote, gatewayOnly]] as const) {
        const openings = new OpeningSnapshots(path.join(world.dir, `openings-${where}-${i}`), service, new Map([['local', provider]]), revisions, quietLogger());
        const [take, first] = await timed(() => openings.compare(sandbox.ref));
        fs.appendFileSync(changed, `opened ${i}\n`);
        const [since, later] = await timed(() => openings.compare(sandbox.ref));
        if (!first.taken || first.total !== 0 || later.taken || later.total !== 1) throw new Error(`since opened: ${JSON.stringify([first, later])}`);
        takes[where].push(take);
        sinceOpened[where].push(since);
      }
    }
    // Saves through the gateway: copying everything out (no revision held here) against taking the unchanged files
    // from the revision the sandbox was last saved as, indexed here and its digests known (as after the Source Control
    // view compared the sandbox with it) — and, for reference, what indexing it costs, which is why a save does not.
    const indexed = new SandboxSessionService(async () => world.repo, new Map([['local', gatewayOnly]]), { kind: 'file', description: world.repoRoot }, quietLogger(), revisions);
    const full: number[] = [];
    const indexings: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < runs; i++) {
      fs.appendFileSync(changed, `save ${i}\n`);
      full.push((await timed(() => remote.saveSandbox({ sandbox: sandbox.ref, sessionId: `${sessionId}-full-${i}` })))[0]);
      const [indexing] = await timed(() => revisions.index(`${sessionId}-full-${i}`, 'r1'));
      // The view's comparison also leaves the revision's digests known (each file's, read once).
      await compareSandboxWithRevision({ sessions: indexed, revisions }, { sandbox: sandbox.ref, sessionId: `${sessionId}-full-${i}`, revision: 'r1' });
      fs.appendFileSync(changed, `warm ${i}\n`);
      const [reusing] = await timed(() => indexed.saveSandbox({ sandbox: sandbox.ref, sessionId: `${sessionId}-warm-${i}` }));
      warm.push(reusing);
      indexings.push(indexing);
    }
    // Opening r1 in a new sandbox through the gateway: one file (tar.zst, or plain tar in an image without zstd),
    // against file by file (an image without tar).
    const oneFile: number[] = [];
    const onePlain: number[] = [];
    const byFile: number[] = [];
    const r1 = await world.repo.checkoutExact({ sessionId, revision: 'r1' });
    for (let i = 0; i < runs; i++) {
      for (const [image, into] of [['tar and zstd', oneFile], ['tar', onePlain], ['neither', byFile]] as const) {
        const fresh = await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true });
        const opened = await world.provider.open(fresh.ref);
        const c = new ImageClient({ endpoint: opened.endpoint, token: opened.token });
        c.tools = image;
        const scratch = fs.mkdtempSync(path.join(world.dir, 'open-'));
        const input = { objects: world.repo.objects, checkpoint: r1.checkpoint, sessionId, limits: DEFAULT_PEOPLE_LIMITS, scratch };
        into.push((await timed(() => checkoutWorkspaceInto({ client: c, hostRoot: undefined }, input)))[0]);
        await c.close();
        await world.provider.delete(fresh.ref);
        fs.rmSync(scratch, { recursive: true, force: true });
      }
    }
    const [o, u, p] = [median(oneFile), median(onePlain), median(byFile)];
    console.log(
      `${label} open through the gateway: one tar.zst ${o.toFixed(0)} ms = ${(o / p).toFixed(2)}× file by file (${p.toFixed(0)} ms); ` +
        `one plain tar ${u.toFixed(0)} ms = ${(u / p).toFixed(2)}×; runs ${oneFile.map((x) => x.toFixed(0)).join(', ')} ms`,
    );
    const [f, k, w] = [median(full), median(indexings), median(warm)];
    console.log(
      `${label} save through the gateway: copying everything ${f.toFixed(0)} ms; taking unchanged files from the last revision ` +
        `${w.toFixed(0)} ms = ${(w / f).toFixed(2)}× (indexing that revision, which its first comparison does, took ${k.toFixed(0)} ms)`,
    );
    const [b, s, c] = [median(baseline), median(saves), median(compares.slice(1))];
    console.log(
      `${label}: ${files} files, ${(written / 1e6).toFixed(1)} MB — compare ${c.toFixed(0)} ms = ${(c / b).toFixed(2)}× tar|zstd (${b.toFixed(0)} ms), ` +
        `${(c / s).toFixed(2)}× a save (${s.toFixed(0)} ms); first (with the revision's index) ${compares[0]?.toFixed(0)} ms, then ${compares.slice(1).map((x) => x.toFixed(0)).join(', ')} ms`,
    );
    for (const where of ['here', 'gateway'] as const) {
      // Against a save the same way: in place, or copying everything out through the gateway.
      const [t, l, save] = [median(takes[where]), median(sinceOpened[where]), where === 'here' ? s : f];
      console.log(
        `${label} since opened (${where === 'here' ? 'in place' : 'through the gateway'}): first comparison, taking the snapshot, ${t.toFixed(0)} ms = ` +
          `${(t / save).toFixed(2)}× a save the same way (${save.toFixed(0)} ms); later ones ${l.toFixed(0)} ms = ${(l / b).toFixed(2)}× tar|zstd`,
      );
    }
    const [d, r] = [median(copies), median(remoteCompares)];
    console.log(
      `${label} through the gateway: compare ${r.toFixed(0)} ms = ${(r / d).toFixed(2)}× copying the workspace out (${d.toFixed(0)} ms), ` +
        `${(r / b).toFixed(2)}× tar|zstd; runs ${remoteCompares.map((x) => x.toFixed(0)).join(', ')} ms`,
    );
  } finally {
    await revisions.dispose();
    await world.dispose();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, only: { type: 'string' } } });
  const runs = Number(values.runs);
  if (values.only !== '100mb') await benchSize('1mb', 50, 1_000_000, runs);
  if (values.only !== '1mb') await benchSize('100mb', 2000, 100_000_000, runs);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
