// CLI start-up benchmark: what one `sandbox-sessions` call costs before it does anything, against the
// named baseline `node -e 0` (the same Node binary) measured in the same run, cases interleaved so both
// see the same machine load. Scripts call the CLI in loops (`sandbox exec` per step), so each call pays it.
//   cases:  `--help`; `bundle cleanup <empty dir>` (a trivial command); `sandbox list` against a
//           running daemon (the gateway round trip included); `sandbox exec NAME -- true` on one Ready
//           local sandbox (process backend), against its own baseline: the same Node spawning `true` and
//           waiting for it — once on the bundled CLI, once through bin/sandbox-sessions as README has people run
//           it; the daemon's RSS once it is healthy and again after the calls (idle).
// Wall time is measured here around the spawn; peak RSS of each child is GNU time's %M (max RSS).
// Acceptance (issue 25): a trivial command ≤ 0.08 s and ≤ 60 MB; `sandbox exec … -- true` ≤ 3× its
// baseline; daemon idle RSS ≤ 60 MB.
// Run: npm run build && npx tsx bench/cliStart.ts [runs per case, default 15]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DAEMON_NODE_FLAGS, ensureGateway, stopGateway } from '../server/gateway/daemonClient';

const RUNS = Number(process.argv[2] ?? '15');
const REPO = path.join(__dirname, '..');
const CLI = path.join(REPO, 'dist/server.js');
const WRAPPER = path.join(REPO, 'bin/sandbox-sessions');
const TIME = '/usr/bin/time';
const BASE = 'node -e 0 (baseline)';

interface Sample {
  wallMs: number;
  maxRssKb: number;
}

/** Runs `node <args>` (or `program <args>`) under GNU time; rejects on a non-zero exit (a broken case must not look fast). */
async function run(args: string[], program: string = process.execPath): Promise<Sample> {
  const out = path.join(os.tmpdir(), `cli-start-${process.pid}.time`);
  const started = process.hrtime.bigint();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(TIME, ['-o', out, '-f', '%M', program, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (c) => (c === 0 ? resolve(c) : reject(new Error(`node ${args.join(' ')} exited ${c}: ${stderr}`))));
  });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  const maxRssKb = Number(fs.readFileSync(out, 'utf8').trim().split('\n').pop());
  fs.rmSync(out, { force: true });
  if (code !== 0 || !Number.isFinite(maxRssKb)) throw new Error(`no max RSS for ${args.join(' ')}`);
  return { wallMs, maxRssKb };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** A live process's resident set: all of it, and its anonymous part (its own memory; the rest is file pages — mostly the Node binary's code, shared by every Node process). */
function rssKb(pid: number): { total: number; anon: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!m) throw new Error(`no ${name} for pid ${pid}`);
    return Number(m[1]);
  };
  return { total: field('VmRSS'), anon: field('RssAnon') };
}

const daemonRss = (kb: { total: number; anon: number }, baseRss: number): string =>
  `${(kb.total / 1024).toFixed(1)} MB (${(kb.total / baseRss).toFixed(2)} × base peak; its own, anonymous: ${(kb.anon / 1024).toFixed(1)} MB)`;

async function main(): Promise<void> {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  if (!fs.existsSync(TIME)) throw new Error(`${TIME} (GNU time) is needed for the peak RSS`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-start-'));
  const stateDir = path.join(work, 'state');
  const empty = path.join(work, 'empty');
  fs.mkdirSync(empty);
  const SPAWN_BASE = 'node spawning `true` (baseline)';
  const sandbox = 'bench';
  /** Each case: its name, the node arguments (or another program's), the baseline its ratios are against, and its goal. */
  const cases: { name: string; args: string[]; program?: string; base: string; goal?: string }[] = [
    { name: BASE, args: ['-e', '0'], base: BASE },
    { name: '--help', args: [CLI, '--help'], base: BASE },
    { name: 'bundle cleanup <empty dir>', args: [CLI, 'bundle', 'cleanup', empty], base: BASE, goal: '≤ 80 ms, ≤ 60 MB' },
    { name: 'sandbox list (daemon running)', args: [CLI, 'sandbox', 'list', '--state-dir', stateDir], base: BASE },
    { name: SPAWN_BASE, args: ['-e', "require('node:child_process').spawnSync('true')"], base: SPAWN_BASE },
    { name: `sandbox exec ${sandbox} -- true`, args: [CLI, 'sandbox', 'exec', sandbox, '--state-dir', stateDir, '--', 'true'], base: SPAWN_BASE, goal: '≤ 3.00 × base wall' },
    // The same call the way README has people run the CLI: bin/sandbox-sessions on PATH (a shell that execs Node).
    { name: `bin/sandbox-sessions sandbox exec`, program: WRAPPER, args: ['sandbox', 'exec', sandbox, '--state-dir', stateDir, '--', 'true'], base: SPAWN_BASE, goal: '≤ 3.00 × base wall' },
  ];
  try {
    // Started as the CLI starts it for a user (defaultGatewayCommand: the daemon's Node flags included).
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, ...DAEMON_NODE_FLAGS, CLI, 'gateway'] });
    const daemonStartKb = rssKb(gateway.pid);
    // One Ready local sandbox (process backend) for `sandbox exec`; created once, not measured.
    await run([CLI, 'sandbox', 'create', '--name', sandbox, '--runtime', 'process', '--state-dir', stateDir]);
    const samples = new Map<string, Sample[]>(cases.map((c) => [c.name, []]));
    for (const c of cases) await run(c.args, c.program); // warm the page cache once, unrecorded
    for (let i = 0; i < RUNS; i++) {
      for (const c of cases) samples.get(c.name)?.push(await run(c.args, c.program));
    }
    const daemonIdleKb = rssKb(gateway.pid);
    const medians = (name: string): { wall: number; rss: number } => {
      const s = samples.get(name)!;
      return { wall: median(s.map((x) => x.wallMs)), rss: median(s.map((x) => x.maxRssKb)) };
    };
    const baseRss = medians(BASE).rss;
    console.log(`Node ${process.version}, ${RUNS} runs per case (medians), ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`${'case'.padEnd(34)} ${'wall ms'.padStart(8)} ${'× base'.padStart(7)} ${'peak MB'.padStart(8)} ${'× base'.padStart(7)}  goal`);
    for (const c of cases) {
      const { wall, rss } = medians(c.name);
      const base = medians(c.base);
      const against = c.base === c.name ? '' : ` (vs ${c.base === BASE ? '`node -e 0`' : 'spawn `true`'})`;
      console.log(
        `${c.name.padEnd(34)} ${wall.toFixed(1).padStart(8)} ${(wall / base.wall).toFixed(2).padStart(7)} ${(rss / 1024).toFixed(1).padStart(8)} ${(rss / base.rss).toFixed(2).padStart(7)}  ${c.goal ?? ''}${c.goal ? against : ''}`,
      );
    }
    console.log(`daemon RSS once healthy: ${daemonRss(daemonStartKb, baseRss)}`);
    console.log(`daemon RSS idle after ${RUNS + 1} lists and execs: ${daemonRss(daemonIdleKb, baseRss)}`);
  } finally {
    await stopGateway({ stateDir }).catch(() => false);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
