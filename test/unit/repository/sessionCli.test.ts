// `sandbox-sessions session …` end to end against both adapters: create, commit (CAS and commitId
// retry), list, show, revisions, checkout of the head and of an older revision, conflicts as exit
// code 3 with a JSON error, delete.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
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

function cliSuite(location: () => string): void {
  let scratch: string;
  beforeEach(() => {
    scratch = fs.mkdtempSync(path.join(scratchBase(), 'ss-cli-'));
  });
  afterEach(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('create, commit, list, show, revisions, checkout, conflict, delete', async () => {
    const repo = ['--repository', location()];
    const v1 = path.join(scratch, 'v1.tar.zst');
    const v2 = path.join(scratch, 'v2.tar.zst');
    fs.writeFileSync(v1, 'bundle one');
    fs.writeFileSync(v2, 'bundle two');

    let r = await cli(['commit', 'demo', v1, '--agent-id', 'agent-7', '--activation-id', 'act-1', ...repo]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^created demo@r1 \(10 bytes, sha256:[0-9a-f]{64}\)\n$/);

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
    assert.equal(fs.readFileSync(out1, 'utf8'), 'bundle one');
    const outHead = path.join(scratch, 'out-head.tar.zst');
    r = await cli(['checkout', 'demo', outHead, '--json', ...repo]);
    assert.equal(fs.readFileSync(outHead, 'utf8'), 'bundle two');
    assert.equal((JSON.parse(r.stdout) as { bytes: number }).bytes, 10);
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
