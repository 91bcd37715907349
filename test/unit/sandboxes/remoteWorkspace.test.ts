// A sandbox that is not on this machine (kruntimes, OpenSandbox), read against a revision held here: the workspace
// is listed through the gateway and its files judged by SHA-256 computed in the sandbox. A comparison copies
// nothing out; a save downloads only what differs. Real parts: a local sandbox reached only through its gateway (the
// provider hides its directory, as a cluster's would be), the real local gateway and its processes, the file
// repository. The answers must be exactly the in-place comparison's and save's.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import type { SandboxRef } from '../../../protocol/sandboxes';
import type { SandboxProvider } from '../../../server/sandboxes/provider';
import { checkoutWorkspaceInto, type SessionTransfer } from '../../../server/sandboxes/workspaceMover';
import { copyWorkspaceOutKnown, type KnownWorkspace, outlineWorkspace, surveyWorkspace } from '../../../server/sandboxes/remoteWorkspace';
import { knownWorkspaceOf, RevisionIndexCache } from '../../../server/sessions/revisionIndex';
import { compareSandboxWithRevision } from '../../../server/sessions/sandboxChanges';
import { SandboxSessionService } from '../../../server/sessions/sandboxSessions';
import { createActivationWorld, quietLogger, type ActivationWorld } from '../../fixtures/activation/harness';
import { ImageClient } from '../../fixtures/sandboxes/imageClient';

/** A gateway client that counts what crosses it, and can play an image without GNU sha256sum, tar or zstd. */
describe('a remote sandbox read against a revision held here (digests computed in the sandbox)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  let revisions: RevisionIndexCache;
  let inPlace: SandboxSessionService;
  let remote: SandboxSessionService;
  let gatewayOnly: SandboxProvider;
  let ref: SandboxRef;
  let root: string;

  const write = (rel: string, contents: string | Buffer, mode = 0o644) => {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), contents, { mode });
    fs.chmodSync(path.join(root, rel), mode);
  };
  const big = (seed: number) => Buffer.from(Array.from({ length: 2_000_000 }, (_, i) => (i * seed + (i >> 9)) & 0xff));
  const compare = (service: SandboxSessionService, revision = 'r1') => compareSandboxWithRevision({ sessions: service, revisions }, { sandbox: ref, sessionId: 'remote', revision });
  const client = async (sandbox = ref): Promise<ImageClient> => {
    const connection = await world.provider.open(sandbox);
    return new ImageClient({ endpoint: connection.endpoint, token: connection.token });
  };

  before(async () => {
    world = await createActivationWorld();
    revisions = new RevisionIndexCache(async () => world.repo, path.join(world.dir, 'revisions'));
    inPlace = new SandboxSessionService(async () => world.repo, new Map([['local', world.provider]]), { kind: 'file', description: world.repoRoot }, quietLogger());
    // The same sandboxes, but their directories are not offered: everything goes through the gateway.
    gatewayOnly = Object.create(world.provider, { hostDirectory: { value: undefined }, keepsHere: { value: undefined } }) as SandboxProvider;
    remote = new SandboxSessionService(async () => world.repo, new Map([['local', gatewayOnly]]), { kind: 'file', description: world.repoRoot }, quietLogger());
    ref = (await world.provider.create({ provider: 'local', namespace: 'default', runtime: 'process' }, { waitForReady: true })).ref;
    root = (await world.provider.hostDirectory?.(ref)) as string;
    write('same.txt', 'same\n');
    write('samesize.txt', 'abcdef\n');
    write('grown.txt', 'grown\n');
    write('mode.sh', '#!/bin/sh\n', 0o755);
    write('gone.txt', 'gone\n');
    write('empty.txt', '');
    write('big.bin', big(7));
    write('big2.bin', big(11));
    write('-dash.txt', 'dash\n');
    write("it's $HOME.txt", 'home\n');
    write('a  b.txt', 'line\n');
    write('深/好.txt', '好\n');
    write('node_modules/dep/index.js', 'module.exports = 1;\n');
    await inPlace.saveSandbox({ sandbox: ref, sessionId: 'remote' });
  });

  after(async () => {
    await revisions?.dispose();
    await world?.dispose();
  });

  it('finds nothing changed in an unchanged workspace, reading no file through the gateway', async () => {
    const c = await client();
    try {
      const survey = await surveyWorkspace(c, knownWorkspaceOf(await revisions.index('remote', 'r1')));
      const outline = await outlineWorkspace(c, survey, path.join(world.dir, 'outline-1'));
      assert.deepEqual(c.readPaths, [], 'no file was read');
      assert.deepEqual(new Set(survey.files.map((f) => f.verdict)), new Set(['same']));
      assert.equal(outline.judged.size, 12);
      assert.ok([...outline.judged.values()].every(Boolean));
      // Nothing is written here: the outline is the listing, with the sandbox's sizes and modes.
      assert.ok(!fs.existsSync(path.join(world.dir, 'outline-1')), 'no copy was made');
      assert.equal(outline.tree.lstat(path.join(outline.workspaceRoot, 'big.bin')).size, 2_000_000n);
      assert.equal(Number(outline.tree.lstat(path.join(outline.workspaceRoot, 'mode.sh')).mode) & 0o777, 0o755);
      assert.deepEqual(outline.tree.readdir(path.join(outline.workspaceRoot, '深')).map(String), ['好.txt']);
      assert.deepEqual(survey.skipped, [{ path: 'node_modules/', category: 'dependency_tree' }], 'the excluded tree is listed, not entered');
    } finally {
      await c.close();
    }
    const result = await compare(remote);
    assert.deepEqual([result.changes, result.total, result.unchanged], [[], 0, 12]);
    assert.deepEqual(result, await compare(inPlace));
  });

  it('reports exactly what the in-place comparison reports after edits of every kind', async () => {
    write('samesize.txt', 'ABCDEF\n');
    write('grown.txt', 'grown more\n');
    fs.chmodSync(path.join(root, 'mode.sh'), 0o644);
    fs.rmSync(path.join(root, 'gone.txt'));
    write('src/new.ts', 'export {};\n');
    const edited = big(11);
    edited[1_500_000] = 255 - (edited[1_500_000] ?? 0);
    write('big2.bin', edited);
    write('a  b.txt', 'LINE\n');
    write("it's $HOME.txt", 'home\n'); // rewritten with the same bytes: unchanged
    write('node_modules/dep/index.js', 'module.exports = 2;\n'); // excluded: not a change
    const expected = [
      { path: 'a  b.txt', status: 'modified' },
      { path: 'big2.bin', status: 'modified' },
      { path: 'gone.txt', status: 'deleted' },
      { path: 'grown.txt', status: 'modified' },
      { path: 'mode.sh', status: 'modified' },
      { path: 'samesize.txt', status: 'modified' },
      { path: 'src/new.ts', status: 'added' },
    ];
    const viaGateway = await compare(remote);
    assert.deepEqual(viaGateway.changes, expected);
    assert.equal(viaGateway.unchanged, 6);
    assert.deepEqual(viaGateway.workspace.excludedEntries, [{ path: 'node_modules/', category: 'dependency_tree' }]);
    assert.deepEqual(viaGateway, await compare(inPlace));
    assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-changes-')), [], 'nothing left behind');
  });

  it('copies what digests cannot judge: a symbolic link, and every same-size file in an image without sha256sum; BusyBox\'s judges by lines', async () => {
    write('target.txt', 'same\n');
    fs.symlinkSync('same.txt', path.join(root, 'latest'));
    const c = await client();
    try {
      const base = knownWorkspaceOf(await revisions.index('remote', 'r1'));
      const linked = await outlineWorkspace(c, await surveyWorkspace(c, base), path.join(world.dir, 'outline-2'));
      assert.deepEqual(c.readPaths, ['latest'], 'only the link is read, as the file it names');
      assert.equal(fs.readFileSync(path.join(linked.workspaceRoot, 'latest'), 'utf8'), 'same\n');
      c.readPaths = [];
      c.noSha256sum = true;
      const unhashed = await surveyWorkspace(c, base);
      assert.ok(unhashed.files.every((f) => f.verdict === 'read' || f.verdict === 'unknown'), 'nothing judged by digest');
      const copied = await outlineWorkspace(c, unhashed, path.join(world.dir, 'outline-3'));
      assert.equal(copied.judged.size, 0);
      assert.deepEqual(new Set(c.readPaths), new Set(['latest', 'same.txt', 'empty.txt', 'big.bin', 'big2.bin', '-dash.txt', "it's $HOME.txt", 'a  b.txt', '深/好.txt', 'samesize.txt']));
      assert.equal(fs.readFileSync(path.join(copied.workspaceRoot, 'big.bin')).equals(big(7)), true, 'a large file is copied whole');

      // BusyBox's sha256sum (no -z, as in Alpine) judges them all the same, by lines.
      c.noSha256sum = false;
      c.tools = 'busybox';
      c.readPaths = [];
      const byLines = await outlineWorkspace(c, await surveyWorkspace(c, base), path.join(world.dir, 'outline-5'));
      assert.deepEqual(c.readPaths, ['latest'], 'only the link is read, as with GNU sha256sum');
      assert.equal(byLines.judged.size, linked.judged.size);
    } finally {
      await c.close();
    }
    const result = await compare(remote);
    assert.deepEqual(
      result.changes.filter((x) => x.path === 'latest' || x.path === 'target.txt'),
      [
        { path: 'latest', status: 'added' },
        { path: 'target.txt', status: 'added' },
      ],
    );
    fs.rmSync(path.join(root, 'latest'));
    fs.rmSync(path.join(root, 'target.txt'));
  });

  it('opens a revision in a new sandbox it reaches only through the gateway: one upload unpacked by its tar, else file by file; the same workspace', async () => {
    const spec = { provider: 'local', namespace: 'default', runtime: 'process' } as const;
    const sameAsR1 = async (sandbox: SandboxRef) => {
      const found = await compareSandboxWithRevision({ sessions: inPlace, revisions }, { sandbox, sessionId: 'remote', revision: 'r1' });
      assert.deepEqual(found.changes, [], 'every file, its bytes and its mode as in r1');
      assert.ok(found.unchanged > 10);
    };
    const started = Date.now();
    const said: string[] = [];
    const opened = await remote.openInSandbox({ sessionId: 'remote', revision: 'r1', sandbox: spec }, { progress: (_phase, message) => said.push(message ?? '') });
    assert.ok(said.includes(`copying the workspace of remote@r1 into ${opened.sandbox.ref.name} as one file`), said.join('\n'));
    assert.ok(!said.some((m) => m.startsWith('checking out')), 'the bundle goes as it is: nothing is checked out here first');
    await sameAsR1(opened.sandbox.ref);
    const openedRoot = (await world.provider.hostDirectory?.(opened.sandbox.ref)) as string;
    assert.deepEqual(fs.readdirSync(openedRoot).filter((name) => name.startsWith('.sandbox-sessions')), [], 'the staged bundle is gone');
    assert.ok(fs.statSync(path.join(openedRoot, 'same.txt')).mtimeMs >= started - 2_000, "today's mtimes, as a file-by-file copy gives them");

    // The same function, counted: one upload (in parts above the gateway's write limit), uncompressed in an image with
    // tar but no zstd, by GNU tar or BusyBox's; without tar, one per file.
    const r1 = await world.repo.checkoutExact({ sessionId: 'remote', revision: 'r1' });
    const checkout = (scratch: string) => ({ objects: world.repo.objects, checkpoint: r1.checkpoint, sessionId: 'remote', limits: DEFAULT_PEOPLE_LIMITS, scratch });
    const bundleBytes = r1.checkpoint.value.compatibilityBundle.bytes;
    for (const image of ['tar and zstd', 'tar', 'neither', 'busybox and zstd', 'busybox'] as const) {
      const noTar = image === 'neither';
      const sandbox = (await world.provider.create(spec, { waitForReady: true })).ref;
      const c = await client(sandbox);
      c.tools = image;
      const transfers: SessionTransfer[] = [];
      try {
        await checkoutWorkspaceInto({ client: c, hostRoot: undefined }, checkout(fs.mkdtempSync(path.join(world.dir, 'open-'))), { onTransfer: (t) => transfers.push(t) });
      } finally {
        await c.close();
      }
      if (noTar) {
        assert.deepEqual(transfers, [{ how: 'files', reason: 'the image has no tar' }]);
        assert.equal(c.writes, 10 + 2 * Math.ceil(2_000_000 / (512 * 1024)), 'one write per file of r1: ten small ones, and big.bin and big2.bin in 512 KiB parts');
      } else if (image === 'tar' || image === 'busybox') {
        assert.deepEqual(transfers, [{ how: 'tarball', tar: image === 'tar' ? 'gnu' : 'busybox', compression: 'none' }]);
        assert.ok(c.writes < 12, 'one uncompressed tar, in parts');
      } else {
        assert.deepEqual(transfers, [{ how: 'tarball', tar: image === 'tar and zstd' ? 'gnu' : 'busybox', compression: 'zstd' }]);
        assert.equal(c.writes, bundleBytes <= 786_000 ? 1 : Math.ceil(bundleBytes / (512 * 1024)));
      }
      await sameAsR1(sandbox);
    }
  });

  it('refuses a file over the file quota from its listed size, before reading anything of it', async () => {
    const huge = path.join(root, 'huge.img');
    fs.closeSync(fs.openSync(huge, 'w'));
    fs.truncateSync(huge, 3 * 1024 ** 3); // sparse in the sandbox too
    try {
      await assert.rejects(compare(remote), (err: Error & { code?: string }) => err.code === 'quota_exceeded' && /maxFileBytes/.test(err.message));
      assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-changes-')), [], 'nothing left behind');
    } finally {
      fs.rmSync(huge);
    }
  });

  it('names a secret file and refuses, without copying it out', async () => {
    write('.env', 'TOKEN=canary\n');
    const c = await client();
    try {
      const survey = await surveyWorkspace(c, knownWorkspaceOf(await revisions.index('remote', 'r1')));
      await outlineWorkspace(c, survey, path.join(world.dir, 'outline-4'));
      assert.ok(!c.readPaths.includes('.env'), 'the secret is not read');
      assert.ok(!fs.existsSync(path.join(world.dir, 'outline-4')), 'nothing of it is here');
    } finally {
      await c.close();
    }
    await assert.rejects(compare(remote), /\.env/);
    fs.rmSync(path.join(root, '.env'));
  });

  it('saves through the gateway taking unchanged files from the revision held here: the bundle a full copy and an in-place save give', async () => {
    // The workspace as the second case left it: six files changed or added since r1, six the same.
    const c = await client();
    try {
      const known = knownWorkspaceOf(await revisions.index('remote', 'r1'));
      const survey = await surveyWorkspace(c, known);
      c.readPaths = [];
      // One known copy fails (as when the revision's cached tar was trimmed meanwhile): that file is downloaded.
      const flaky: KnownWorkspace = {
        ...known,
        copyFilesOut: async (files) => {
          const failed = await known.copyFilesOut(files.filter((f) => f.archivePath !== 'workspace/big.bin'));
          return new Set([...failed, 'workspace/big.bin']);
        },
      };
      const tree = await copyWorkspaceOutKnown(c, survey, flaky, path.join(world.dir, 'known-copy'));
      assert.deepEqual([...new Set(c.readPaths)].sort(), ['a  b.txt', 'big.bin', 'big2.bin', 'grown.txt', 'mode.sh', 'samesize.txt', 'src/new.ts']);
      assert.deepEqual([tree.reused, tree.downloaded], [5, 7]);
      for (const rel of ['same.txt', 'big.bin', 'big2.bin', "it's $HOME.txt", '深/好.txt', 'src/new.ts']) {
        assert.ok(fs.readFileSync(path.join(tree.workspaceRoot, rel)).equals(fs.readFileSync(path.join(root, rel))), rel);
      }
      assert.equal(fs.statSync(path.join(tree.workspaceRoot, 'mode.sh')).mode & 0o111, 0);
      assert.equal(fs.statSync(path.join(tree.workspaceRoot, 'src')).isDirectory(), true);
    } finally {
      await c.close();
    }
    const indexed = new SandboxSessionService(async () => world.repo, new Map([['local', gatewayOnly]]), { kind: 'file', description: world.repoRoot }, quietLogger(), revisions);
    const said: string[] = [];
    const reusing = await indexed.saveSandbox({ sandbox: ref, sessionId: 'remote', expectedRevision: 'r1' }, { progress: (_phase, message) => said.push(message ?? '') });
    assert.equal(said[0], `copying what changed in ${ref.name} since remote@r1`, 'the revision the sandbox was saved as is the one taken from');
    const copyingAll = await remote.saveSandbox({ sandbox: ref, sessionId: 'remote', expectedRevision: 'r2' });
    const fromDisk = await inPlace.saveSandbox({ sandbox: ref, sessionId: 'remote', expectedRevision: 'r3' });
    assert.deepEqual([reusing.revision.ref.revision, copyingAll.revision.ref.revision, fromDisk.revision.ref.revision], ['r2', 'r3', 'r4']);
    // The envelope names only the session: the same workspace gives the same bytes, whichever way it was read.
    assert.equal(reusing.bundle.digest, fromDisk.bundle.digest);
    assert.equal(copyingAll.bundle.digest, fromDisk.bundle.digest);
    assert.deepEqual(reusing.workspace, fromDisk.workspace);
    assert.deepEqual((await compare(remote, 'r2')).changes, []);
    // Saved as r5 after one more edit, the sandbox is a revision nothing indexed here: the next save copies
    // everything rather than index r5 for it.
    write('late.txt', 'late\n');
    const r5 = await inPlace.saveSandbox({ sandbox: ref, sessionId: 'remote', expectedRevision: 'r4' });
    said.length = 0;
    const unindexed = await indexed.saveSandbox({ sandbox: ref, sessionId: 'remote', expectedRevision: 'r5' }, { progress: (_phase, message) => said.push(message ?? '') });
    assert.equal(said[0], `copying the workspace of ${ref.name}`);
    assert.equal(unindexed.bundle.digest, r5.bundle.digest);
    assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('sandbox-sessions-save-')), [], 'nothing left behind');
  });

  it('refuses to read against a revision whose stored bundle was altered on disk, and keeps nothing of it', async () => {
    const committed = await world.repo.checkoutExact({ sessionId: 'remote', revision: 'r1' });
    const stored = await world.repo.objects.storedFile?.(committed.checkpoint.value.compatibilityBundle, 1 << 30);
    assert.ok(stored !== undefined, 'the file repository keeps objects as files');
    const original = fs.readFileSync(stored);
    const altered = Buffer.from(original);
    altered[Math.floor(altered.length / 2)] = 255 - (altered[Math.floor(altered.length / 2)] ?? 0);
    const mode = fs.statSync(stored).mode;
    fs.chmodSync(stored, 0o600);
    fs.writeFileSync(stored, altered);
    const cacheDir = path.join(world.dir, 'revisions-altered');
    const fresh = new RevisionIndexCache(async () => world.repo, cacheDir);
    try {
      await assert.rejects(fresh.index('remote', 'r1'), (err: Error & { code?: string }) => err.code === 'integrity_mismatch');
      assert.deepEqual(fs.existsSync(cacheDir) ? fs.readdirSync(cacheDir) : [], [], 'no tar or copy is left in the cache');
    } finally {
      fs.writeFileSync(stored, original);
      fs.chmodSync(stored, mode);
      await fresh.dispose();
    }
    assert.equal((await new RevisionIndexCache(async () => world.repo, cacheDir).index('remote', 'r1')).files.size > 0, true, 'restored, it reads again');
  });
});
