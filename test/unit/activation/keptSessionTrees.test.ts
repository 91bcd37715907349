// The session tree an activation keeps for the next one (server/activation/keptSessionTrees.ts), with the real codec:
// what is taken is exactly what a hydrate of the committed bundle writes; a tree that is not (a byte, a mode, an entry
// changed, added or removed — also with its mtime put back), another revision, another boot, another set of limits,
// a damaged record: not taken, removed, and nothing of it reaches the sandbox.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleArtifact } from '../../../protocol/bundle';
import { KeptSessionTrees, type KeptTreeKey } from '../../../server/activation/keptSessionTrees';
import { hydrateSessionBundle } from '../../../server/bundle';
import { defaultStateIdentity, packWorkspace } from '../../../server/bundle/packWorkspace';
import { quietLogger } from '../../fixtures/activation/harness';

const SESSION = 'kept-session';
const MTIME = 1_700_000_000;

/** Every entry under `root`: relative path → kind, mode and, for a file, the SHA-256 of its bytes. */
function describeTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (dir: string, rel: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const st = fs.lstatSync(full);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isDirectory()) {
        out[`${rel}${name}/`] = `dir ${mode}`;
        visit(full, `${rel}${name}/`);
      } else {
        out[`${rel}${name}`] = `${st.isFile() ? 'file' : 'other'} ${mode} ${createHash('sha256').update(fs.readFileSync(full)).digest('hex').slice(0, 16)}`;
      }
    }
  };
  visit(root, '');
  return out;
}

describe('kept session trees (an activation keeps what it packed for the next one)', () => {
  let dir: string;
  let kept: KeptSessionTrees;
  let n = 0;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-kept-'));
    kept = new KeptSessionTrees(path.join(dir, 'kept'), quietLogger());
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A session as an agent leaves it in its sandbox: odd modes, what the policy leaves out, a file beside the roots. */
  function agentTree(): string {
    const session = path.join(dir, `sandbox-${++n}`, 'session');
    const write = (rel: string, text: string, mode = 0o644): void => {
      fs.mkdirSync(path.dirname(path.join(session, rel)), { recursive: true });
      fs.writeFileSync(path.join(session, rel), text, { mode });
      fs.chmodSync(path.join(session, rel), mode);
    };
    write('state/sessions/m1/transcript.jsonl', '{"text":"hello"}\n');
    write('state/private.db', 'rows', 0o600);
    write('workspace/notes.md', 'turn 1\n');
    fs.utimesSync(path.join(session, 'workspace/notes.md'), MTIME, MTIME); // whole seconds: a tamperer can put it back exactly
    write('workspace/bin/run.sh', '#!/bin/sh\necho run\n', 0o700);
    write('workspace/node_modules/dep/index.js', 'module.exports = 1;\n');
    write('workspace/.git/HEAD', 'ref: refs/heads/main\n');
    write('workspace/debug.log', 'noise\n');
    write('stray.txt', 'beside the roots\n');
    fs.mkdirSync(path.join(session, 'workspace/empty'), { mode: 0o700 });
    fs.chmodSync(path.join(session, 'workspace/empty'), 0o700);
    return session;
  }

  async function packInPlace(session: string): Promise<{ artifact: SessionBundleArtifact; inPlace: NonNullable<Awaited<ReturnType<typeof packWorkspace>>['inPlace']> }> {
    const packed = await packWorkspace({
      quiet: true,
      stateRoot: path.join(session, 'state'),
      workspaceRoot: path.join(session, 'workspace'),
      destination: path.join(dir, `bundle-${++n}.tar.zst`),
      sessionId: SESSION,
      limits: DEFAULT_PEOPLE_LIMITS,
    });
    assert.ok(packed.inPlace, 'a quiet pack says what it read');
    return { artifact: packed.artifact, inPlace: packed.inPlace };
  }

  /** Packs `session` in place and keeps it, as an activation does once its commit succeeded. */
  async function keepSession(session: string, sessionId = SESSION): Promise<{ artifact: SessionBundleArtifact; key: KeptTreeKey }> {
    const { artifact, inPlace } = await packInPlace(session);
    const next = { sessionId, bundleDigest: artifact.archiveDigest, identity: defaultStateIdentity(SESSION), limits: DEFAULT_PEOPLE_LIMITS };
    const toKeep = await kept.moveOut(session, inPlace, next);
    assert.ok(toKeep, 'the tree moved out of the sandbox');
    assert.ok(!fs.existsSync(session), 'nothing of it left in the sandbox');
    await toKeep.keep();
    return { artifact, key: { sessionId, bundleDigest: artifact.archiveDigest, limits: DEFAULT_PEOPLE_LIMITS } };
  }

  async function hydrated(artifact: SessionBundleArtifact): Promise<string> {
    const root = path.join(dir, `hydrated-${++n}`);
    await hydrateSessionBundle({ source: { path: artifact.path }, expectedSessionId: SESSION, destinationRoot: root, limits: DEFAULT_PEOPLE_LIMITS });
    fs.unlinkSync(path.join(root, 'state-identity.json')); // not part of the tree a sandbox sees (workspaceMover.checkoutInto)
    return root;
  }

  const keptEntry = (): string => {
    const names = fs.readdirSync(kept.dir).filter((name) => name.startsWith('s-'));
    assert.equal(names.length, 1);
    return path.join(kept.dir, names[0] as string, 'session');
  };

  it('takes exactly the tree a hydrate of the bundle writes: left-out entries gone, modes the bundle\'s; identity and digests come along', async () => {
    const { artifact, key } = await keepSession(agentTree());
    const destination = path.join(dir, 'next-sandbox', 'session');
    const taken = await kept.take(key, destination);
    assert.ok(taken, 'the kept tree was taken');
    assert.deepEqual(describeTree(destination), describeTree(await hydrated(artifact)));
    assert.equal(describeTree(destination)['workspace/bin/run.sh']?.split(' ')[1], '755');
    assert.ok(!fs.existsSync(path.join(destination, 'workspace/node_modules')) && !fs.existsSync(path.join(destination, 'stray.txt')));
    assert.equal(Buffer.from(taken.identity.bytes).toString(), Buffer.from(defaultStateIdentity(SESSION).bytes).toString());
    const notes = taken.knownDigests.get('workspace/notes.md');
    assert.equal(notes?.digest.toString('hex'), createHash('sha256').update('turn 1\n').digest('hex'));
    assert.equal(notes?.identity.ino, fs.lstatSync(path.join(destination, 'workspace/notes.md'), { bigint: true }).ino);
    assert.equal(await kept.take(key, path.join(dir, 'again', 'session')), undefined, 'a tree is taken once');
  });

  it('the next pack of a taken tree is the same bundle, byte for byte', async () => {
    const { artifact, key } = await keepSession(agentTree());
    const destination = path.join(dir, 'next-sandbox', 'session');
    const taken = await kept.take(key, destination);
    assert.ok(taken);
    const again = await packWorkspace({
      quiet: true,
      stateRoot: path.join(destination, 'state'),
      workspaceRoot: path.join(destination, 'workspace'),
      destination: path.join(dir, 'again.tar.zst'),
      sessionId: SESSION,
      limits: DEFAULT_PEOPLE_LIMITS,
      knownDigests: taken.knownDigests,
    });
    assert.equal(again.artifact.archiveDigest, artifact.archiveDigest);
    assert.ok(fs.readFileSync(again.artifact.path).equals(fs.readFileSync(artifact.path)));
  });

  const tamperings: [string, (tree: string) => void][] = [
    [
      'a file rewritten with its size and mtime put back',
      (tree) => {
        const file = path.join(tree, 'workspace/notes.md');
        const before = fs.statSync(file, { bigint: true });
        fs.writeFileSync(file, 'TURN 1\n');
        fs.utimesSync(file, MTIME, MTIME);
        const after = fs.statSync(file, { bigint: true });
        assert.equal(after.mtimeNs, before.mtimeNs, 'only the ctime tells');
        assert.equal(after.size, before.size);
      },
    ],
    ['a file made executable', (tree) => fs.chmodSync(path.join(tree, 'workspace/notes.md'), 0o755)],
    ['a file added', (tree) => fs.writeFileSync(path.join(tree, 'workspace/extra.txt'), 'x')],
    ['a file removed', (tree) => fs.unlinkSync(path.join(tree, 'state/private.db'))],
    ['a file hard-linked elsewhere', (tree) => fs.linkSync(path.join(tree, 'workspace/notes.md'), path.join(dir, 'outside-link'))],
    ['a file replaced by a symbolic link', (tree) => {
      fs.unlinkSync(path.join(tree, 'workspace/notes.md'));
      fs.symlinkSync('/etc/passwd', path.join(tree, 'workspace/notes.md'));
    }],
    ['an empty directory removed', (tree) => fs.rmdirSync(path.join(tree, 'workspace/empty'))],
  ];
  for (const [what, tamper] of tamperings) {
    it(`not taken after ${what}: removed, nothing placed`, async () => {
      const { key } = await keepSession(agentTree());
      tamper(keptEntry());
      const destination = path.join(dir, 'next-sandbox', 'session');
      assert.equal(await kept.take(key, destination), undefined);
      assert.ok(!fs.existsSync(destination), 'nothing reached the sandbox');
      assert.deepEqual(fs.readdirSync(kept.dir), [], 'the kept tree is gone');
    });
  }

  it('not taken for another revision, another set of limits, a record from another boot or a damaged record', async () => {
    const destination = path.join(dir, 'next-sandbox', 'session');
    const other = '0'.repeat(64);
    let { key } = await keepSession(agentTree());
    assert.equal(await kept.take({ ...key, bundleDigest: `sha256:${other}` }, destination), undefined, 'another revision');
    assert.deepEqual(fs.readdirSync(kept.dir), [], 'the stale tree is removed');

    ({ key } = await keepSession(agentTree()));
    assert.equal(await kept.take({ ...key, limits: { ...key.limits, maxEntryCount: 5 } }, destination), undefined, 'other limits');

    ({ key } = await keepSession(agentTree()));
    const record = path.join(path.dirname(keptEntry()), 'record.json');
    const parsed = JSON.parse(fs.readFileSync(record, 'utf8'));
    parsed.summary.bootId = 'an-earlier-boot';
    fs.writeFileSync(record, JSON.stringify(parsed));
    assert.equal(await kept.take(key, destination), undefined, 'another boot');

    ({ key } = await keepSession(agentTree()));
    fs.writeFileSync(path.join(path.dirname(keptEntry()), 'record.json'), '{"summary":');
    assert.equal(await kept.take(key, destination), undefined, 'a damaged record');
    assert.ok(!fs.existsSync(destination));
    assert.deepEqual(fs.readdirSync(kept.dir), []);
  });

  it('a tree that changed between the pack and the move is not kept', async () => {
    const session = agentTree();
    const { artifact, inPlace } = await packInPlace(session);
    fs.appendFileSync(path.join(session, 'workspace/notes.md'), 'late write\n'); // a process that outlived the agent
    const toKeep = await kept.moveOut(session, inPlace, { sessionId: SESSION, bundleDigest: artifact.archiveDigest, identity: defaultStateIdentity(SESSION), limits: DEFAULT_PEOPLE_LIMITS });
    assert.ok(toKeep);
    await toKeep.keep();
    assert.deepEqual(fs.readdirSync(kept.dir), [], 'nothing kept, nothing left');
  });

  it('a discarded tree (the commit failed) is removed; the directory and records are private', async () => {
    const session = agentTree();
    const { artifact, inPlace } = await packInPlace(session);
    const next = { sessionId: SESSION, bundleDigest: artifact.archiveDigest, identity: defaultStateIdentity(SESSION), limits: DEFAULT_PEOPLE_LIMITS };
    const discarded = await kept.moveOut(session, inPlace, next);
    await discarded?.discard();
    assert.deepEqual(fs.readdirSync(kept.dir), []);

    await keepSession(agentTree());
    assert.equal(fs.statSync(kept.dir).mode & 0o777, 0o700);
    const entry = path.dirname(keptEntry());
    for (const file of ['record.json', 'summary.json']) assert.equal(fs.statSync(path.join(entry, file)).mode & 0o777, 0o600, file);
  });

  it('a tree claimed while a sandbox is created and not placed goes back (and is taken later); one claimed is nobody else’s', async () => {
    const { artifact, key } = await keepSession(agentTree());
    const claimed = await kept.claim(key);
    assert.ok(claimed, 'the kept tree was claimed');
    assert.equal(await kept.claim(key), undefined, 'a claimed tree is not claimed twice');
    await claimed.release();
    await claimed.release(); // once only
    assert.equal(await claimed.placeInto(path.join(dir, 'late', 'session')), undefined, 'released: not placed after all');
    assert.ok(!fs.existsSync(path.join(dir, 'late')));
    const destination = path.join(dir, 'next-sandbox', 'session');
    const again = await kept.claim(key);
    assert.ok(again, 'put back: claimed again');
    const taken = await again.placeInto(destination);
    assert.ok(taken, 'placed');
    await again.release(); // a no-op once placed
    assert.deepEqual(describeTree(destination), describeTree(await hydrated(artifact)));
    assert.deepEqual(fs.readdirSync(kept.dir), [], 'nothing left behind in the directory');
    // Claimed while valid, then another tree kept under its name before the release: the claimed one is removed.
    const second = await keepSession(agentTree());
    const stale = await kept.claim(second.key);
    assert.ok(stale);
    const third = await keepSession(agentTree());
    await stale.release();
    const names = fs.readdirSync(kept.dir);
    assert.equal(names.length, 1, `only the newer tree is kept: ${names.join(', ')}`);
    assert.ok(await kept.take(third.key, path.join(dir, 'third', 'session')), 'the newer tree is the one kept');
  });

  it('two takes at once: one gets the tree, the other hydrates', async () => {
    const { key } = await keepSession(agentTree());
    const results = await Promise.all([kept.take(key, path.join(dir, 'a', 'session')), kept.take(key, path.join(dir, 'b', 'session'))]);
    assert.equal(results.filter((r) => r !== undefined).length, 1);
    assert.equal([fs.existsSync(path.join(dir, 'a', 'session')), fs.existsSync(path.join(dir, 'b', 'session'))].filter(Boolean).length, 1);
  });

  it('keeps one tree per session and a bounded number of sessions, the most recent; a tree over the byte bound is not kept', async () => {
    kept = new KeptSessionTrees(path.join(dir, 'kept'), quietLogger(), { maxTrees: 2, maxBytes: 1024 * 1024, abandonedAfterMs: 60_000 });
    const first = await keepSession(agentTree(), 'one');
    await keepSession(agentTree(), 'one'); // the session's newer tree replaces its older one
    await keepSession(agentTree(), 'two');
    assert.equal(fs.readdirSync(kept.dir).length, 2);
    const third = await keepSession(agentTree(), 'three');
    assert.equal(fs.readdirSync(kept.dir).length, 2, 'the least recently kept session went');
    assert.equal(await kept.take(first.key, path.join(dir, 'x', 'session')), undefined);
    assert.ok(await kept.take(third.key, path.join(dir, 'y', 'session')));

    kept = new KeptSessionTrees(path.join(dir, 'kept'), quietLogger(), { maxTrees: 2, maxBytes: 10, abandonedAfterMs: 60_000 });
    const session = agentTree();
    const { artifact, inPlace } = await packInPlace(session);
    const next = { sessionId: 'big', bundleDigest: artifact.archiveDigest, identity: defaultStateIdentity(SESSION), limits: DEFAULT_PEOPLE_LIMITS };
    assert.equal(await kept.moveOut(session, inPlace, next), undefined, 'too big to keep');
    assert.ok(fs.existsSync(session), 'left in the sandbox, to go with it');
  });
});
