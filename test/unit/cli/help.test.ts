// `--help`/`-h` for every command and subcommand of `sandbox-sessions`, walked from the CLI's own
// command table (a new command or subcommand is covered without editing this file): usage on
// stdout, exit 0, nothing run; the most specific usage wins; after `--` the flags belong to the
// sandbox command's argv and are never taken as a help request.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { usageFor, wantsHelp } from '../../../server/cli/args';
import { writeGatewayState } from '../../../server/gateway/stateFile';
import { StateLayout } from '../../../server/local/stateRoot';
import { commands, main } from '../../../server/main';
import { captureIo } from '../../fixtures/cliCapture';

async function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const c = captureIo();
  const code = await main(argv, c.io);
  return { code, stdout: c.out(), stderr: c.err() };
}

const REPO_ROOT = path.resolve(__dirname, '../../..');

describe('cli: --help and -h on every command and subcommand', () => {
  const table = Object.entries(commands);

  it('the command table is not empty and every command that lists subcommands has at least one', async () => {
    assert.ok(table.length >= 7, `commands: ${table.map(([n]) => n).join(', ')}`);
    for (const [name, entry] of table) {
      const { help } = await entry.load();
      if (help.subcommands) {
        assert.ok(Object.keys(help.subcommands).length > 0, name);
        // `sandbox-sessions --help` lists every subcommand (`create|list|…`) the command's own help has.
        const listed = /([a-z-]+(?:\|[a-z-]+)+)/.exec(entry.summary)?.[1]?.split('|') ?? [];
        assert.deepEqual([...listed].sort(), Object.keys(help.subcommands).sort(), `${name}: "${entry.summary}"`);
      }
    }
  });

  // Each command's help comes with its code (loaded on demand), so its subcommands are walked inside the test.
  for (const [name, entry] of table) {
    for (const flag of ['--help', '-h']) {
      it(`${name} ${flag}: its usage on stdout, exit 0`, async () => {
        const r = await cli([name, flag]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '');
        assert.ok(r.stdout.includes(`sandbox-sessions ${name}`), r.stdout);
        assert.equal(r.stdout, usageFor((await entry.load()).help, []));
      });
    }
    it(`${name} <each subcommand> --help / -h (also after other arguments): the subcommand's own usage, exit 0`, async () => {
      const commandUsage = (await cli([name, '--help'])).stdout;
      for (const sub of Object.keys((await entry.load()).help.subcommands ?? {})) {
        for (const argv of [
          [name, sub, '--help'],
          [name, sub, '-h'],
          [name, sub, 'some-name', '--json', '-h'],
          [name, '--json', sub, '--help'],
        ]) {
          const r = await cli(argv);
          assert.equal(r.code, 0, `${argv.join(' ')}: ${r.stderr}`);
          assert.equal(r.stderr, '', argv.join(' '));
          assert.ok(r.stdout.includes(`sandbox-sessions ${name} ${sub}`), `${argv.join(' ')}:\n${r.stdout}`);
          assert.notEqual(r.stdout, commandUsage, `${argv.join(' ')} printed the command's usage, not the subcommand's`);
        }
        assert.equal((await cli(['help', name, sub])).stdout, (await cli([name, sub, '--help'])).stdout);
      }
    });
  }

  it('top level: --help, -h and help list every command and exit 0; an unknown command is still an error', async () => {
    for (const argv of [['--help'], ['-h'], ['help'], ['help', '--help'], ['help', '-h'], ['version', '--help']]) {
      const r = await cli(argv);
      assert.equal(r.code, 0, argv.join(' '));
      for (const [name] of table) assert.match(r.stdout, new RegExp(`^  ${name} `, 'm'), `${argv.join(' ')} does not list ${name}`);
    }
    // A command line node:util's parseArgs refuses is a usage error too: exit 2, the command's usage, no stack.
    const bogus = await cli(['server', '--bogus']);
    assert.equal(bogus.code, 2);
    assert.match(bogus.stderr, /^error: Unknown option '--bogus'\nusage: sandbox-sessions server --stdio/);
    const unknown = await cli(['frobnicate', '--help']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command "frobnicate"/);
  });

  it('`gateway stop` (a verb where the gateway takes a flag) names the flag that does it, exit 2, nothing started', async () => {
    for (const verb of ['stop', 'status', 'detach']) {
      const r = await cli(['gateway', verb]);
      assert.equal(r.code, 2, verb);
      assert.match(r.stderr.split('\n')[0] ?? '', new RegExp(`^error: unexpected argument ${verb} \\(did you mean \`gateway --${verb}\`\\?\\)$`));
    }
    const other = await cli(['gateway', 'restart']);
    assert.equal(other.code, 2);
    assert.equal(other.stderr.split('\n')[0], 'error: unexpected argument restart');
  });

  it('-h after `--` is the sandbox command\'s argument: exec runs (and here fails for want of a gateway) instead of printing help', async () => {
    assert.equal(wantsHelp(['exec', 'box', '--', 'ls', '-h']), false);
    assert.equal(wantsHelp(['exec', 'box', '--', 'ls', '--help']), false);
    assert.equal(wantsHelp(['exec', 'box', '-h', '--', 'ls']), true);
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-help-'));
    try {
      // A daemon that lives (this process) but whose port refuses: exec reaches for it and says it is not running.
      const closed = net.createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const { port } = closed.address() as net.AddressInfo;
      await new Promise((resolve) => closed.close(resolve));
      await writeGatewayState(new StateLayout(stateDir).gatewayStateFile, { host: '127.0.0.1', port, url: `http://127.0.0.1:${port}`, token: 'a'.repeat(32), api: 'era-c' });
      const r = await cli(['sandbox', 'exec', 'box', '--state-dir', stateDir, '--', 'ls', '-h']);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /the local gateway is not running/);
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('the real process: `sandbox-sessions bundle pack --help` prints the pack usage and exits 0', async function () {
    this.timeout(30_000);
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'server/main.ts'), 'bundle', 'pack', '--help'], { cwd: REPO_ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^usage: sandbox-sessions bundle pack <state-dir> <workspace-dir>/);
    assert.doesNotMatch(stdout, /bundle inspect/);
  });
});
