// `sandbox-sessions session …` end to end against both adapters: create, commit (CAS and commitId
// retry), list, show, revisions, checkout of the head and of an older revision, conflicts as exit
// code 3 with a JSON error, delete; a bundle packed for another session refused before anything is
// written; a repository path that does not exist refused by the commands that only read.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { runBundleCommand } from '../../../server/cli/bundle';
import { runSessionCommand } from '../../../server/cli/session';
import { main } from '../../../server/main';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';
import { scratchBase } from '../../fixtures/repository/harness';
import { captureIo } from '../../fixtures/cliCapture';

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const c = captureIo();
  const code = await runSessionCommand(argv, c.io);
  return { code, stdout: c.out(), stderr: c.err() };
}

/** A real bundle packed for `sessionId` (`bundle pack`), its workspace holding one file with `content`. */
async function packBundle(dir: string, name: string, sessionId: string, content: string): Promise<string> {
  const root = path.join(dir, `${name}-src`);
  fs.mkdirSync(path.join(root, 'state'), { recursive: true });
  fs.mkdirSync(path.join(root, 'workspace'), { recursive: true });
  fs.writeFileSync(path.join(root, 'workspace', 'file.txt'), content);
  const out = path.join(dir, `${name}.tar.zst`);
  const c = captureIo();
  const code = await runBundleCommand(['pack', path.join(root, 'state'), path.join(root, 'workspace'), '-o', out, '--session-id', sessionId], c.io);
  assert.equal(code, 0, c.err());
  return out;
}

function cliSuite(location: () => string): void {
  let scratch: string;
  beforeEach(() => {
    scratch = fs.mkdtempSync(path.join(scratchBase(), 'ss-cli-'));
  });
  afterEach(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('create, commit, list, show, revisions, checkout, conflict, delete', async () => {
    const repo = ['--repository', location()];
    const v1 = await packBundle(scratch, 'v1', 'demo', 'bundle one');
    const v2 = await packBundle(scratch, 'v2', 'demo', 'bundle two');
    const v1Bytes = fs.statSync(v1).size;

    let r = await cli(['commit', 'demo', v1, '--agent-id', 'agent-7', '--activation-id', 'act-1', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^created demo@r1 \\(${v1Bytes} bytes, sha256:[0-9a-f]{64}\\)\n$`));

    r = await cli(['commit', 'demo', v2, '--expected-revision', 'r1', '--commit-id', 'c-1', '--json', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    const committed = JSON.parse(r.stdout) as { ref: { revision: string } };
    assert.equal(committed.ref.revision, 'r2');
    r = await cli(['commit', 'demo', v2, '--expected-revision', 'r1', '--commit-id', 'c-1', '--json', ...repo]);
    assert.equal(r.code, 0, 'a commitId retry returns the same revision');
    assert.deepEqual(JSON.parse(r.stdout), committed);

    r = await cli(['commit', 'demo', v1, '--expected-revision', 'r1', '--json', ...repo]);
    assert.equal(r.code, 3);
    assert.equal((JSON.parse(r.stderr) as { error: { code: string } }).error.code, 'revision_conflict');

    r = await cli(['list', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^SESSION\s+HEAD\s+RETAINED\s+AGENT/);
    assert.match(r.stdout, /demo\s+r2\s+r1…r2\s+agent-7/);

    r = await cli(['show', 'demo', ...repo]);
    assert.match(r.stdout, /revision:\s+r2/);

    r = await cli(['revisions', 'demo', '--json', ...repo]);
    const revisions = JSON.parse(r.stdout) as { ref: { revision: string }; isHead: boolean; lastCommittedActivationId?: string }[];
    assert.deepEqual(revisions.map((x) => [x.ref.revision, x.isHead]), [
      ['r2', true],
      ['r1', false],
    ]);
    assert.equal(revisions[1]?.lastCommittedActivationId, 'act-1');

    const out1 = path.join(scratch, 'out-r1.tar.zst');
    r = await cli(['checkout', 'demo@r1', out1, ...repo]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(fs.readFileSync(out1), fs.readFileSync(v1));
    const outHead = path.join(scratch, 'out-head.tar.zst');
    r = await cli(['checkout', 'demo', outHead, '--json', ...repo]);
    assert.deepEqual(fs.readFileSync(outHead), fs.readFileSync(v2));
    assert.equal((JSON.parse(r.stdout) as { bytes: number }).bytes, fs.statSync(v2).size);
    r = await cli(['checkout', 'demo', outHead, ...repo]);
    assert.equal(r.code, 1, 'checkout never overwrites');
    assert.match(r.stderr, /already exists/);
    r = await cli(['checkout', 'demo@r9', path.join(scratch, 'x'), ...repo]);
    assert.match(r.stderr, /revision_not_available/);
    r = await cli(['checkout', 'demo', path.join(scratch, 'small'), '--max-bytes', '5', ...repo]);
    assert.match(r.stderr, /quota_exceeded/);

    r = await cli(['delete', 'demo', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    r = await cli(['show', 'demo', ...repo]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /session_not_found/);
    r = await cli(['gc', '--json', ...repo]);
    assert.equal(r.code, 0, r.stderr);
  });

  it('refuses a bundle packed for another session before anything is written, naming both sessions', async () => {
    const where = location();
    const repo = ['--repository', where];
    const packedForDemo = await packBundle(scratch, 's', 'demo', 'work');
    // Creating a session with it.
    let r = await cli(['commit', 'other', packedForDemo, '--agent-id', 'me', '--json', ...repo]);
    assert.equal(r.code, 1, r.stdout);
    const refused = (JSON.parse(r.stderr) as { error: { code: string; message: string } }).error;
    assert.equal(refused.code, 'identity_mismatch');
    assert.match(refused.message, /packed for session "demo", not for session "other"/);
    assert.match(refused.message, /commit it to session "demo", or pack it again for "other" \(sandbox-sessions bundle pack … --session-id other\)/);
    if (!where.startsWith('postgres')) assert.equal(fs.existsSync(where), false, 'the refused commit created the repository');
    r = await cli(['commit', 'other', packedForDemo, '--agent-id', 'me', ...repo]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^sandbox-sessions session: identity_mismatch: the bundle .*s\.tar\.zst was packed for session "demo"/);
    // Committing it onto an existing session: its head stays.
    const own = await packBundle(scratch, 'own', 'other', 'mine');
    r = await cli(['commit', 'other', own, '--agent-id', 'me', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    r = await cli(['commit', 'other', packedForDemo, '--expected-revision', 'r1', '--json', ...repo]);
    assert.equal(r.code, 1);
    assert.equal((JSON.parse(r.stderr) as { error: { code: string } }).error.code, 'identity_mismatch');
    r = await cli(['revisions', 'other', '--json', ...repo]);
    assert.deepEqual((JSON.parse(r.stdout) as { ref: { revision: string } }[]).map((x) => x.ref.revision), ['r1']);
    // The bundle itself is fine for the session it was packed for.
    r = await cli(['commit', 'demo', packedForDemo, '--agent-id', 'me', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    // A file that is not a bundle at all is refused too, saying so.
    const junk = path.join(scratch, 'junk.tar.zst');
    fs.writeFileSync(junk, 'not a bundle');
    r = await cli(['commit', 'other', junk, '--expected-revision', 'r1', ...repo]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /junk\.tar\.zst cannot be committed to session "other": it is not a Session Bundle/);
  });

  it('usage errors exit 2 and say what is missing', async () => {
    const f = path.join(scratch, 'b');
    fs.writeFileSync(f, 'x');
    let r = await cli(['commit', 'demo', f, '--repository', location()]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--expected-revision rN/);
    r = await cli(['frobnicate', '--repository', location()]);
    assert.equal(r.code, 2);
    r = await cli(['list', '--bogus']);
    assert.equal(r.code, 2);
    // --help is answered by the CLI's dispatcher for every command (test/unit/cli/help.test.ts).
    const c = captureIo();
    assert.equal(await main(['session', '--help'], c.io), 0);
    assert.match(c.out(), /checkout <id>\[@rN\] <dest-file>/);
  });
}

describe('session CLI: file repository', () => {
  let root: string;
  before(() => {
    root = fs.mkdtempSync(path.join(scratchBase(), 'ss-cli-repo-'));
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  let n = 0;
  cliSuite(() => path.join(root, `repo-${++n}`));
});

describe('session CLI: a repository directory that does not exist', () => {
  let scratch: string;
  const saved = { XDG_DATA_HOME: process.env.XDG_DATA_HOME, SANDBOX_SESSIONS_REPOSITORY: process.env.SANDBOX_SESSIONS_REPOSITORY };
  beforeEach(() => {
    scratch = fs.mkdtempSync(path.join(scratchBase(), 'ss-cli-missing-'));
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('is refused by the commands that only read, named, and not created; the first commit creates it', async () => {
    const missing = path.join(scratch, 'typo-repo');
    for (const argv of [['list'], ['show', 'demo'], ['revisions', 'demo'], ['checkout', 'demo', path.join(scratch, 'out')], ['diff', 'demo', 'sb'], ['gc'], ['delete', 'demo'], ['fork', 'demo@r1']]) {
      const r = await cli([...argv, '--repository', missing]);
      assert.equal(r.code, 1, `${argv[0]}: ${r.stdout}`);
      assert.match(r.stderr, /repository_not_found: there is no session repository at .*typo-repo \(--repository .*typo-repo\): the directory does not exist/, argv[0]);
      assert.match(r.stderr, /the first `sandbox-sessions session commit` to a new repository creates it/);
      assert.equal(fs.existsSync(missing), false, `${argv[0]} created the directory`);
    }
    let r = await cli(['list', '--repository', missing, '--json']);
    assert.equal((JSON.parse(r.stderr) as { error: { code: string } }).error.code, 'repository_not_found');
    // Also when it comes from the environment.
    process.env.SANDBOX_SESSIONS_REPOSITORY = missing;
    r = await cli(['list']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\(SANDBOX_SESSIONS_REPOSITORY=.*typo-repo\)/);
    delete process.env.SANDBOX_SESSIONS_REPOSITORY;
    // A file where the directory should be.
    const file = path.join(scratch, 'a-file');
    fs.writeFileSync(file, '');
    r = await cli(['list', '--repository', file]);
    assert.match(r.stderr, /repository_not_found: .*a-file.*: it is not a directory/);

    const bundle = await packBundle(scratch, 'b', 'demo', 'x');
    r = await cli(['commit', 'demo', bundle, '--agent-id', 'me', '--repository', missing]);
    assert.equal(r.code, 0, r.stderr);
    r = await cli(['list', '--repository', missing]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^demo\s+r1/m);
  });

  it('the default repository of a new user answers "no sessions yet"', async () => {
    delete process.env.SANDBOX_SESSIONS_REPOSITORY;
    process.env.XDG_DATA_HOME = path.join(scratch, 'data');
    const r = await cli(['list']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^no sessions yet \(`sandbox-sessions session commit <id> <bundle-file> --agent-id A` creates one\)\n$/);
    const json = await cli(['list', '--json']);
    assert.deepEqual(JSON.parse(json.stdout), []);
  });
});

describe('session CLI: postgres repository', function () {
  let server: PostgresServer | undefined;
  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
  });
  after(async function () {
    this.timeout(60_000);
    await server?.stop();
  });
  let n = 0;
  cliSuite(() => {
    if (!server) throw new Error('the PostgreSQL test server did not start');
    return server.url(`cli_${process.pid}_${++n}`);
  });
});
