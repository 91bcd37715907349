// README's "Using the CLI" exactly as written, as a new user runs it: its set-up line
// (`npm run build && export PATH="$PWD/bin:$PATH"`) in the checkout, by bash, then every command of its
// example block, in order, by bash, in an empty folder with a fresh HOME, no SANDBOX_SESSIONS_* or XDG_*
// variables and no project tools on PATH but what the set-up line added. `<name>` becomes the sandbox the
// block's `sandbox create` made; `state/` and `workspace/` are folders a user packs (made here with a file
// each). The commands that need a kruntimes cluster are named below and not run (the kruntimes CLI is
// tested against the cluster simulator in test/unit/kruntimes/cli.test.ts): a new line in the README's
// block is run by this test unless it is named here.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../scripts/packageExtension';
import { newUserEnv } from './newUser';

/** The README's "Using the CLI" section: its set-up line and the lines of its example block. */
function readmeCli(): { setup: string; lines: string[] } {
  const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Using the CLI'), readme.indexOf('\n## ', readme.indexOf('## Using the CLI') + 1));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => (m[1] as string).trim().split('\n'));
  assert.equal(blocks.length, 2, 'the section has its set-up block and its example block');
  const [setup, lines] = blocks as [string[], string[]];
  assert.equal(setup.length, 1);
  return { setup: setup[0] as string, lines };
}

/** Lines that need a kruntimes cluster (a kubeconfig context with kruntimes installed). */
const NEEDS_CLUSTER = /^sandbox-sessions kruntimes (create|exec|close|port-forward) /;

/** What each command must show a new user; every line that is run has an entry. */
const EXPECT: Array<{ line: RegExp; exit: number; output: (out: string, name: string) => void }> = [
  { line: /^sandbox-sessions help/, exit: 0, output: (out) => assert.match(out, /^Usage: sandbox-sessions <command>/m) },
  { line: /^sandbox-sessions doctor/, exit: 0, output: (out) => assert.match(out, /^ok +backend process:/m) },
  // No kubeconfig here: it says what to set up (and not the usage of a mistyped command).
  {
    line: /^sandbox-sessions kruntimes contexts/,
    exit: 1,
    output: (out) => {
      assert.match(out, /no kubeconfig found: set KUBECONFIG or create ~\/\.kube\/config/);
      assert.doesNotMatch(out, /usage:/);
    },
  },
  { line: /^sandbox-sessions sandbox create --runtime process --json/, exit: 0, output: (out) => assert.match(out, /"phase":"Ready"/) },
  { line: /^sandbox-sessions sandbox exec <name> -- sh -c/, exit: 0, output: (out) => assert.equal(out, '') },
  { line: /^printf 'some input' \| sandbox-sessions sandbox exec <name> --stdin -- wc -c/, exit: 0, output: (out) => assert.equal(out.trim(), '10') },
  { line: /^sandbox-sessions sandbox close <name>/, exit: 0, output: (out, name) => assert.match(out, new RegExp(`^${name}\tSucceeded\t.*1 artifact\\(s\\): out\\.txt \\(`, 'm')) },
  { line: /^sandbox-sessions sandbox artifacts <name>/, exit: 0, output: (out) => assert.match(out, /^out\.txt\tfile\t3\tsha256:[0-9a-f]{64}\tok\t/m) },
  // The Run has ended, so following its log ends too: the audit line of each command, and their output.
  {
    line: /^sandbox-sessions sandbox logs <name> -f --tail 20/,
    exit: 0,
    output: (out) => {
      assert.match(out, /"stream":"audit","message":"session operation completed","operation":"command","outcome":"succeeded"/);
      assert.match(out, /"stream":"stdout","message":"10"/);
      assert.doesNotMatch(out, /some input|echo hi/, 'no command text or stdin in the log');
    },
  },
  { line: /^sandbox-sessions bundle pack/, exit: 0, output: (out) => assert.match(out, /^packed .*s\.tar\.zst\n {2}digest sha256:[0-9a-f]{64}$/m) },
  { line: /^sandbox-sessions bundle inspect/, exit: 0, output: (out) => assert.match(out, /^ok s\.tar\.zst\n[\s\S]*^ {2}session demo$/m) },
  { line: /^sandbox-sessions bundle hydrate/, exit: 0, output: (out) => assert.match(out, /^hydrated .*\/restored$/m) },
  { line: /^sandbox-sessions session commit demo/, exit: 0, output: (out) => assert.match(out, /^created demo@r1 /m) },
  { line: /^sandbox-sessions session revisions demo/, exit: 0, output: (out) => assert.match(out, /^r1 \(head\) /m) },
  { line: /^sandbox-sessions session checkout demo@r1/, exit: 0, output: (out) => assert.match(out, /^checked out demo@r1 to \.\/r1\.tar\.zst/m) },
  // The default agent (`maka activate`) is not installed here: nothing is committed, and it says what to do.
  {
    line: /^sandbox-sessions session activate demo/,
    exit: 1,
    output: (out) => {
      assert.match(out, /not committed: agent_failed: the activation command `maka` could not start in the sandbox/);
      assert.match(out, /set another with SANDBOX_SESSIONS_ACTIVATION_COMMAND/);
    },
  },
  { line: /^sandbox-sessions session fork demo@r1 --to demo-experiment/, exit: 0, output: (out) => assert.match(out, /^forked demo@r1 → demo-experiment@r1$/m) },
  { line: /^sandbox-sessions gateway --status/, exit: 0, output: (out) => assert.match(out, /^gateway running: http:\/\/127\.0\.0\.1:\d+ \(pid \d+\), api era-c$/m) },
  // The stdio servers: run with no client (stdin at its end), they start and exit 0.
  { line: /^sandbox-sessions server --stdio/, exit: 0, output: (out) => assert.match(out, /companion server listening on stdio/) },
  { line: /^sandbox-sessions mcp/, exit: 0, output: (out) => assert.match(out, /MCP server listening on stdio/) },
];

/** Runs one line with bash as a user's shell would; stdout and stderr as one text, as a terminal shows them. */
function bash(line: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', line], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`\`${line}\` did not finish within ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe("e2e: README's CLI commands as a new user runs them", function () {
  this.timeout(240_000);
  const { setup, lines } = readmeCli();
  const { home, env } = newUserEnv('readme-cli');
  const work = path.join(home, 'work');
  let name = '';

  before(async () => {
    // The set-up line in the checkout, then the PATH it leaves for the commands after it.
    const done = await bash(`${setup} >&2 && printf '%s' "$PATH"`, REPO_ROOT, env, 200_000);
    assert.equal(done.code, 0, done.out);
    env.PATH = done.out.slice(done.out.lastIndexOf('\n') + 1);
    assert.ok(env.PATH.startsWith(path.join(REPO_ROOT, 'bin') + path.delimiter), env.PATH);
    fs.mkdirSync(path.join(work, 'state'), { recursive: true });
    fs.mkdirSync(path.join(work, 'workspace'));
    fs.writeFileSync(path.join(work, 'state', 'notes.json'), '{}\n');
    fs.writeFileSync(path.join(work, 'workspace', 'README.md'), '# demo\n');
  });

  after(async () => {
    await bash('sandbox-sessions gateway --stop', work, env, 30_000).catch(() => undefined);
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('names every line of the example block: run here, or needing a cluster', () => {
    for (const line of lines) {
      const known = NEEDS_CLUSTER.test(line) || EXPECT.some((e) => e.line.test(line));
      assert.ok(known, `README line not covered by this test: ${line}`);
    }
  });

  for (const line of lines.filter((l) => !NEEDS_CLUSTER.test(l))) {
    const expect = EXPECT.find((e) => e.line.test(line));
    it(line.replace(/\s+#.*$/, ''), async () => {
      assert.ok(expect, `README line not covered by this test: ${line}`);
      if (line.includes('<name>')) assert.ok(name, 'the block creates its sandbox before it uses <name>');
      const { code, out } = await bash(line.replaceAll('<name>', name), work, env, 120_000);
      assert.equal(code, expect.exit, `\`${line}\` exited ${code}:\n${out}`);
      expect.output(out, name);
      if (/sandbox create .*--json/.test(line)) name = (JSON.parse(out) as { name: string }).name;
    });
  }
});
