// The CLI faces of activation and fork, run in-process against the real local gateway: streamed
// provisional events, the committed outcome, dedupe on retry, credentials by --env/--config-file,
// fork with an explicit revision, usage errors and refusals as exit codes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { runActivateCommand, runForkCommand } from '../../../server/cli/activation';
import { captureIo } from '../../fixtures/cliCapture';
import { AGENT_SCRIPT, type ActivationWorld, createActivationWorld } from '../../fixtures/activation/harness';

describe('session activate / session fork CLI (real local gateway)', function () {
  this.timeout(120_000);
  let world: ActivationWorld;

  before(async () => {
    world = await createActivationWorld();
  });
  after(async () => {
    await world?.dispose();
  });

  it('activates with streamed provisional events, prints the committed outcome, dedupes a retry, forks a named revision', async () => {
    const cfg = path.join(world.dir, 'creds.json');
    fs.writeFileSync(cfg, JSON.stringify({ apiKey: 'from-file' }));
    const deps = { providers: { local: world.provider }, env: { MY_KEY: 'from-env' } };
    const common = ['--repository', world.repoRoot, '--env', 'MY_KEY', '--config-file', `credentials.json=${cfg}`, '--', process.execPath, AGENT_SCRIPT, 'activate'];
    const a = captureIo();
    assert.equal(await runActivateCommand(['cli', '--message', 'hi there', '--activation-id', 'cli-1', ...common], a.io, deps), 0, a.err());
    assert.match(a.out(), /\[provisional\] start cli-1/);
    assert.match(a.out(), /\[provisional\] outcome completed/);
    assert.match(a.out(), /committed cli@r1: completed\n/);
    assert.match(a.out(), /"text": "turn 1: hi there"/);
    assert.match(a.out(), /fileCredentialSha256/);

    const j = captureIo();
    assert.equal(await runActivateCommand(['cli', '--message', 'hi there', '--activation-id', 'cli-1', '--json', ...common], j.io, deps), 0);
    const lines = j.out().trim().split('\n').map((l) => JSON.parse(l) as { result?: { deduplicated: boolean; revision: string } });
    assert.equal(lines.length, 1, 'a deduplicated retry streams nothing');
    assert.equal(lines[0]?.result?.deduplicated, true);
    assert.equal(lines[0]?.result?.revision, 'r1');

    const f = captureIo();
    assert.equal(await runForkCommand(['cli@r1', '--to', 'cli-copy', '--fork-id', 'cli-fork', '--repository', world.repoRoot], f.io), 0, f.err());
    assert.match(f.out(), /forked cli@r1 → cli-copy@r1\n/);
    assert.match(f.out(), /state identity: rewrote makaSessionId/);
    const again = captureIo();
    assert.equal(await runForkCommand(['cli@r1', '--to', 'cli-copy', '--fork-id', 'cli-fork', '--repository', world.repoRoot], again.io), 0);
    assert.match(again.out(), /already done by this fork id/);
  });

  it('an activation command the sandbox does not have: agent_failed, naming it and where to set another; SANDBOX_SESSIONS_ACTIVATION_COMMAND is used', async () => {
    const notInstalled = captureIo();
    const deps = { providers: { local: world.provider }, env: {} };
    assert.equal(await runActivateCommand(['cli-missing', '--message', 'x', '--repository', world.repoRoot, '--', 'no-such-agent-here', 'activate'], notInstalled.io, deps), 1);
    assert.match(notInstalled.out(), /not committed: agent_failed: the activation command `no-such-agent-here` could not start in the sandbox \(.*executable file not found in \$PATH\)/);
    assert.match(notInstalled.out(), /SANDBOX_SESSIONS_ACTIVATION_COMMAND/);
    assert.doesNotMatch(notInstalled.out() + notInstalled.err(), /sandbox_lost|\{"code"/, 'not a lost sandbox, and no raw JSON');
    assert.equal(notInstalled.err(), '', 'the result says it once: no log line beside it');

    // With no `--` command, the environment's command is the one that runs.
    const fromEnv = captureIo();
    const env = { SANDBOX_SESSIONS_ACTIVATION_COMMAND: JSON.stringify([process.execPath, AGENT_SCRIPT, 'activate']) };
    assert.equal(await runActivateCommand(['cli-env', '--message', 'from env', '--repository', world.repoRoot], fromEnv.io, { providers: { local: world.provider }, env }), 0, fromEnv.out() + fromEnv.err());
    assert.match(fromEnv.out(), /committed cli-env@r1: completed\n/);
    const bad = captureIo();
    assert.equal(await runActivateCommand(['cli-env', '--message', 'x', '--repository', world.repoRoot], bad.io, { providers: { local: world.provider }, env: { SANDBOX_SESSIONS_ACTIVATION_COMMAND: 'maka activate' } }), 2);
    assert.match(bad.err(), /invalid_request: SANDBOX_SESSIONS_ACTIVATION_COMMAND must be a JSON array of strings/);
  });

  it('usage errors exit 2; a failed activation exits 1 and says why; a refused fork exits 3 or 1', async () => {
    const deps = { providers: { local: world.provider }, env: {} };
    const u1 = captureIo();
    assert.equal(await runActivateCommand(['cli'], u1.io, deps), 2);
    assert.match(u1.err(), /--message is required/);
    const u2 = captureIo();
    assert.equal(await runActivateCommand(['cli', '--message', 'x', '--env', 'NOT_SET_ANYWHERE'], u2.io, deps), 2);
    assert.match(u2.err(), /not set/);
    const u3 = captureIo();
    assert.equal(await runForkCommand(['cli', '--repository', world.repoRoot], u3.io), 2);
    assert.match(u3.err(), /name the source revision explicitly/);
    const crash = captureIo();
    assert.equal(
      await runActivateCommand(['cli', '--message', '!crash', '--repository', world.repoRoot, '--', process.execPath, AGENT_SCRIPT, 'activate'], crash.io, deps),
      1,
    );
    assert.match(crash.out(), /not committed: agent_failed/);
    const missing = captureIo();
    assert.equal(await runForkCommand(['cli@r9', '--repository', world.repoRoot], missing.io), 1);
    assert.match(missing.err(), /source_revision_not_available/);
    const self = captureIo();
    assert.equal(await runForkCommand(['cli@r1', '--to', 'cli', '--repository', world.repoRoot], self.io), 3);
  });
});
