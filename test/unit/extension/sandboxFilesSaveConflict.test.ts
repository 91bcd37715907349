// A save over a change this window has not seen is refused, and nothing is lost: VS Code checks only mtime and
// size before it saves (vscode#119002), and a process in the sandbox may rewrite a file at the same size without
// anyone announcing it. Against a real local gateway: the "other writer" is a command run in the sandbox.
import assert from 'node:assert/strict';
import type { GatewayClient } from '../../../protocol/kruntimes/gatewayClient';
import { GatewayLimits } from '../../../protocol/kruntimes/gateway';
import { FsError, SandboxFiles, type FileChange } from '../../../extension/fs/sandboxFiles';
import { FixedConnection } from '../../fixtures/fakeConnection';
import { readyRun, startTestGateway, type TestGateway } from '../gateway/harness';

const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);
const changedElsewhere = (err: unknown) => err instanceof FsError && err.kind === 'ChangedElsewhere' && /after this window read it/.test(err.message);

describe('sandbox files: a save over an unseen change', () => {
  let t: TestGateway;
  let connection: FixedConnection;
  let client: GatewayClient;
  let files: SandboxFiles;
  let events: FileChange[];

  /** What the sandbox holds at `p`, read by a command in it (not through the files under test). */
  const inSandbox = async (p: string) => (await client.runCommand({ argv: ['cat', p] })).stdout.toString('utf8');
  /** Another writer: a process in the sandbox, which nobody announces to the window. */
  const otherWriter = async (script: string) => assert.equal((await client.runCommand({ argv: ['sh', '-c', script] })).exitCode, 0);

  before(async () => {
    t = await startTestGateway();
  });
  after(async () => {
    await t.cleanup();
  });
  beforeEach(async () => {
    const { P } = await readyRun(t.gw);
    connection = new FixedConnection(t.gw.url + P, t.gw.token, 'sbx');
    client = await connection.client();
    // Listings stay fresh for the whole test: nothing here depends on the cache expiring.
    files = new SandboxFiles(connection, { listingTtlMs: 60_000 });
    events = [];
    files.onDidChange((c) => events.push(...c));
  });
  afterEach(async () => {
    await connection.close();
  });

  it('refuses every save over a same-size change until the user overwrites it; both versions are kept', async () => {
    await files.writeFile('notes.txt', text('aaaa\n'), { create: true, overwrite: false });
    assert.equal(decode(await files.readFile('notes.txt')), 'aaaa\n');
    const before = await files.stat('notes.txt');

    await otherWriter('printf "bbbb\\n" > notes.txt');
    await assert.rejects(files.writeFile('notes.txt', text('mine\n'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('notes.txt'), 'bbbb\n', "the other writer's bytes are still there");
    // The change is known now: a later mtime, an event for other views, the sandbox's version for Compare.
    const after = await files.stat('notes.txt');
    assert.ok(after.mtime > before.mtime, `${after.mtime} > ${before.mtime}`);
    assert.ok(events.some((e) => e.type === 'changed' && e.path === 'notes.txt'));
    assert.equal(decode(files.conflictOf('notes.txt') ?? new Uint8Array()), 'bbbb\n');

    // Retry, or the auto save a second later, is refused too: nothing is decided for the user.
    await assert.rejects(files.writeFile('notes.txt', text('mine, more\n'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('notes.txt'), 'bbbb\n');

    files.overwriteConflict('notes.txt');
    await files.writeFile('notes.txt', text('mine\n'), { create: false, overwrite: true });
    assert.equal(await inSandbox('notes.txt'), 'mine\n');
    assert.equal(files.conflictOf('notes.txt'), undefined);
  });

  it('overwrites only the version the user saw: a change after the refusal is refused again', async () => {
    await files.writeFile('n.txt', text('aaaa'), { create: true, overwrite: false });
    await otherWriter('printf bbbb > n.txt');
    await assert.rejects(files.writeFile('n.txt', text('mine'), { create: false, overwrite: true }), changedElsewhere);
    await otherWriter('printf cccc > n.txt');
    files.overwriteConflict('n.txt');
    await assert.rejects(files.writeFile('n.txt', text('mine'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('n.txt'), 'cccc');
    assert.equal(decode(files.conflictOf('n.txt') ?? new Uint8Array()), 'cccc');
  });

  it('takes the sandbox version on Revert (a read): the next save goes through', async () => {
    await files.writeFile('r.txt', text('aaaa'), { create: true, overwrite: false });
    await otherWriter('printf bbbb > r.txt');
    await assert.rejects(files.writeFile('r.txt', text('mine'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(decode(await files.readFile('r.txt')), 'bbbb');
    assert.equal(files.conflictOf('r.txt'), undefined);
    await files.writeFile('r.txt', text('bbbb and mine'), { create: false, overwrite: true });
    assert.equal(await inSandbox('r.txt'), 'bbbb and mine');
  });

  it("keeps the editor's version as the base while it has unsaved edits: another reader's read lets no save through", async () => {
    const unsaved = new Set<string>();
    const guarded = new SandboxFiles(connection, { listingTtlMs: 60_000, holdsUnsavedEdits: (p) => unsaved.has(p) });
    await guarded.writeFile('u.txt', text('aaaa'), { create: true, overwrite: false });
    unsaved.add('u.txt'); // the user types
    await otherWriter('printf bbbb > u.txt');
    // Compare with Saved, or a chat's context, reads the file meanwhile: the editor still builds on aaaa.
    assert.equal(decode(await guarded.readFile('u.txt')), 'bbbb');
    await assert.rejects(guarded.writeFile('u.txt', text('mine'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('u.txt'), 'bbbb');
    // Nor does such a read end the conflict, nor the edits undone back to the editor's own version.
    await guarded.readFile('u.txt');
    assert.equal(decode(guarded.conflictOf('u.txt') ?? new Uint8Array()), 'bbbb');
    guarded.editorShows('u.txt', () => 'aaaa');
    assert.equal(decode(guarded.conflictOf('u.txt') ?? new Uint8Array()), 'bbbb');
    // With no such read pending, the editor's text is not even asked for (a reload or save of a large file copies nothing).
    guarded.editorShows('u.txt', () => assert.fail('the text was asked for'));
    // Revert: VS Code reads the file, and this window may hear that the edits were dropped only afterwards; the editor
    // then shows what the read brought, which ends the conflict.
    await guarded.readFile('u.txt');
    unsaved.delete('u.txt');
    guarded.editorShows('/u.txt', () => 'bbbb');
    assert.equal(guarded.conflictOf('u.txt'), undefined);
    await guarded.writeFile('u.txt', text('next'), { create: false, overwrite: true });
    assert.equal(await inSandbox('u.txt'), 'next');
    // A read with no unsaved edits is the base at once.
    await otherWriter('printf nexT > u.txt');
    await guarded.readFile('u.txt');
    await guarded.writeFile('u.txt', text('last'), { create: false, overwrite: true });
    assert.equal(await inSandbox('u.txt'), 'last');
  });

  it("saves again and again over this window's own writes, and over a file it never read", async () => {
    await files.writeFile('a.txt', text('1'), { create: true, overwrite: false });
    await files.writeFile('a.txt', text('2'), { create: false, overwrite: true });
    await files.writeFile('a.txt', text('3'), { create: false, overwrite: true });
    assert.equal(await inSandbox('a.txt'), '3');

    await otherWriter('printf made > b.txt');
    await files.commandRanIn(''); // the window hears of the new file, never reads it
    await files.writeFile('b.txt', text('over'), { create: false, overwrite: true });
    assert.equal(await inSandbox('b.txt'), 'over');
  });

  it('refuses a save over a new size its listing did not show yet; the stat that follows shows it', async () => {
    await files.writeFile('s.txt', text('short'), { create: true, overwrite: false });
    const before = await files.stat('s.txt');
    await otherWriter('printf "a longer line" > s.txt');
    assert.equal((await files.stat('s.txt')).size, 5, 'the cached listing still says 5 bytes');
    await assert.rejects(files.writeFile('s.txt', text('mine!'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('s.txt'), 'a longer line');
    // What VS Code checks before it writes: a later mtime at another size is its own Compare / Overwrite.
    const after = await files.stat('s.txt');
    assert.equal(after.size, 13);
    assert.ok(after.mtime > before.mtime);
  });

  it('lets through a save over a new size its listing showed (VS Code has asked the user already)', async () => {
    await files.writeFile('t.txt', text('short'), { create: true, overwrite: false });
    await otherWriter('printf "a longer line" > t.txt');
    await files.commandRanIn(''); // announced: the listing shows 13 bytes, and VS Code's own check sees them
    assert.equal((await files.stat('t.txt')).size, 13);
    const reads = files.counters.reads;
    await files.writeFile('t.txt', text('mine!'), { create: false, overwrite: true });
    assert.equal(files.counters.reads, reads, 'nothing read back');
    assert.equal(await inSandbox('t.txt'), 'mine!');
  });

  it('refuses a save when the file grew past one gateway read, until the user overwrites it', async () => {
    await files.writeFile('big.txt', text('small'), { create: true, overwrite: false });
    await otherWriter(`head -c ${GatewayLimits.maxReadBytes + 10} /dev/zero > big.txt`);
    await assert.rejects(files.writeFile('big.txt', text('mine'), { create: false, overwrite: true }), changedElsewhere);
    const size = async () => (await client.runCommand({ argv: ['wc', '-c', 'big.txt'] })).stdout.toString('utf8').trim();
    assert.equal(await size(), `${GatewayLimits.maxReadBytes + 10} big.txt`);
    assert.equal(files.conflictOf('big.txt'), undefined, 'too large to keep for Compare');
    files.overwriteConflict('big.txt');
    await files.writeFile('big.txt', text('mine'), { create: false, overwrite: true });
    assert.equal(await inSandbox('big.txt'), 'mine');
  });

  it('knows a renamed file by its new name, and forgets a deleted one', async () => {
    await files.writeFile('x.txt', text('x'), { create: true, overwrite: false });
    await files.writeFile('y.txt', text('y'), { create: true, overwrite: false });
    await files.rename('x.txt', 'y.txt', { overwrite: true });
    await otherWriter('printf z > y.txt');
    await assert.rejects(files.writeFile('y.txt', text('w'), { create: false, overwrite: true }), changedElsewhere);
    assert.equal(await inSandbox('y.txt'), 'z');

    await files.delete('y.txt', { recursive: false });
    await otherWriter('printf new > y.txt');
    await files.commandRanIn('');
    // The file there now is one this window never read: nothing to compare with, the save goes through.
    await files.writeFile('y.txt', text('w'), { create: false, overwrite: true });
    assert.equal(await inSandbox('y.txt'), 'w');
  });
});
