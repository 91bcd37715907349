// Opening snapshots in process, for what the RPC test cannot set up: a sandbox that is not on this machine (kruntimes,
// OpenSandbox: its directory is not offered, so the snapshot and the comparison go through its gateway) gets the same
// answers as one read in place; and only the snapshots compared most recently are kept.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { SandboxRef } from '../../../protocol/sandboxes';
import type { SandboxProvider } from '../../../server/sandboxes/provider';
import { OpeningSnapshots } from '../../../server/sessions/openingSnapshots';
import { RevisionIndexCache } from '../../../server/sessions/revisionIndex';
import { SandboxSessionService } from '../../../server/sessions/sandboxSessions';
import { createActivationWorld, quietLogger, type ActivationWorld } from '../../fixtures/activation/harness';

describe('opening snapshots (in process)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  let revisions: RevisionIndexCache;
  const openings = (name: string, sessions: SandboxSessionService, providers: ReadonlyMap<'local', SandboxProvider>, maxKept?: number, now?: () => Date) =>
    new OpeningSnapshots(path.join(world.dir, name), sessions, providers, revisions, quietLogger(), maxKept, now);
  const service = (provider: SandboxProvider) =>
    new SandboxSessionService(async () => world.repo, new Map([['local', provider]]), { kind: 'file', description: world.repoRoot }, quietLogger());
  const sandbox = async (files: Record<string, string>): Promise<{ ref: SandboxRef; root: string }> => {
    const { ref } = await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true });
    const root = (await world.provider.hostDirectory?.(ref)) as string;
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    }
    return { ref, root };
  };

  before(async () => {
    world = await createActivationWorld();
    revisions = new RevisionIndexCache(async () => world.repo, path.join(world.dir, 'revisions'));
  });

  after(async () => {
    await revisions.dispose();
    await world.dispose();
  });

  it('a sandbox reached only through its gateway gets the answers of one read in place', async () => {
    // The same sandboxes, but their directories are not offered: everything goes through the gateway.
    const gatewayOnly = Object.create(world.provider, { hostDirectory: { value: undefined }, keepsHere: { value: undefined } }) as SandboxProvider;
    const remote = openings('remote', service(gatewayOnly), new Map([['local', gatewayOnly]]));
    const inPlace = openings('in-place', service(world.provider), new Map([['local', world.provider]]));
    const { ref, root } = await sandbox({ 'README.md': 'as opened\n', 'src/gone.ts': 'gone\n', 'src/same.ts': 'same\n' });
    const first = await remote.compare(ref);
    assert.deepEqual([first.taken, first.changes, first.unchanged], [true, [], 3]);
    await inPlace.compare(ref);

    fs.writeFileSync(path.join(root, 'README.md'), 'edited\n');
    fs.rmSync(path.join(root, 'src/gone.ts'));
    fs.writeFileSync(path.join(root, 'new.txt'), 'new\n');
    const expected = [
      { path: 'README.md', status: 'modified' },
      { path: 'new.txt', status: 'added' },
      { path: 'src/gone.ts', status: 'deleted' },
    ];
    const [viaGateway, here] = [await remote.compare(ref), await inPlace.compare(ref)];
    assert.deepEqual(viaGateway.changes, expected);
    assert.deepEqual({ ...viaGateway, opened: undefined }, { ...here, opened: undefined }, 'the same answer either way');
    assert.equal((await remote.read(ref, 'workspace/README.md', { offset: 0, length: 100 })).contents.toString(), 'as opened\n');
  });

  it('keeps the snapshots compared most recently; one pruned is taken again when compared', async () => {
    // A clock a second apart per call: the order of compares is the order of the records' times, whatever the disk's.
    let tick = Date.parse('2026-12-04T12:00:00Z');
    const kept = openings('pruned', service(world.provider), new Map([['local', world.provider]]), 2, () => new Date((tick += 1000)));
    const [a, b, c] = [await sandbox({ 'a.txt': 'a\n' }), await sandbox({ 'b.txt': 'b\n' }), await sandbox({ 'c.txt': 'c\n' })];
    await kept.compare(a.ref);
    await kept.compare(b.ref);
    // a compared again: b is now the least recently compared.
    assert.equal((await kept.compare(a.ref)).taken, false);
    await kept.compare(c.ref);
    const dir = path.join(world.dir, 'pruned');
    assert.deepEqual([fs.readdirSync(dir).filter((n) => n.endsWith('.json')).length, fs.readdirSync(dir).filter((n) => n.endsWith('.tar.zst')).length], [2, 2]);
    assert.equal((await kept.compare(a.ref)).taken, false, 'a was kept');
    await assert.rejects(kept.read(b.ref, 'workspace/b.txt', { offset: 0, length: 10 }), /no opening snapshot yet/);
    assert.equal((await kept.compare(b.ref)).taken, true, 'b was pruned, and is taken again');
  });
});
