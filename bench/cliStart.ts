// CLI start-up benchmark: what one `sandbox-sessions` call costs before it does anything, against the
// named baseline `node -e 0` (the same Node binary) measured in the same run, cases interleaved so both
// see the same machine load. Scripts call the CLI in loops (`sandbox exec` per step), so each call pays it.
//   cases:  `--help`; `bundle cleanup <empty dir>` (a trivial command); `sandbox list` against a
//           running daemon (the gateway round trip included); the daemon's RSS once it is healthy and
//           again after the `sandbox list` calls (idle).
// Wall time is measured here around the spawn; peak RSS of each child is GNU time's %M (max RSS).
// Acceptance (issue 25): a trivial command ≤ 0.08 s and ≤ 60 MB; daemon idle RSS ≤ 60 MB.
// Run: npm run build && npx tsx bench/cliStart.ts [runs per case, default 15]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureGateway, stopGateway } from '../server/gateway/daemonClient';

const RUNS = Number(process.argv[2] ?? '15');
const REPO = path.join(__dirname, '..');
const CLI = path.join(REPO, 'dist/server.js');
const TIME = '/usr/bin/time';

interface Sample {
  wallMs: number;
  maxRssKb: number;
}

/** Runs `node <args>` under GNU time; rejects on a non-zero exit (a broken case must not look fast). */
async function run(args: string[]): Promise<Sample> {
  const out = path.join(os.tmpdir(), `cli-start-${process.pid}.time`);
  const started = process.hrtime.bigint();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(TIME, ['-o', out, '-f', '%M', process.execPath, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
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

function rssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

async function main(): Promise<void> {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  if (!fs.existsSync(TIME)) throw new Error(`${TIME} (GNU time) is needed for the peak RSS`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-start-'));
  const stateDir = path.join(work, 'state');
  const empty = path.join(work, 'empty');
  fs.mkdirSync(empty);
  const cases: [string, string[]][] = [
    ['node -e 0 (baseline)', ['-e', '0']],
    ['--help', [CLI, '--help']],
    ['bundle cleanup <empty dir>', [CLI, 'bundle', 'cleanup', empty]],
    ['sandbox list (daemon running)', [CLI, 'sandbox', 'list', '--state-dir', stateDir]],
  ];
  try {
    const gateway = await ensureGateway({ stateDir, command: [process.execPath, CLI, 'gateway'] });
    const daemonStartKb = rssKb(gateway.pid);
    const samples = new Map<string, Sample[]>(cases.map(([name]) => [name, []]));
    for (const [, args] of cases) await run(args); // warm the page cache once, unrecorded
    for (let i = 0; i < RUNS; i++) {
      for (const [name, args] of cases) samples.get(name)?.push(await run(args));
    }
    const daemonIdleKb = rssKb(gateway.pid);
    const base = samples.get(cases[0]![0])!;
    const baseWall = median(base.map((s) => s.wallMs));
    const baseRss = median(base.map((s) => s.maxRssKb));
    console.log(`Node ${process.version}, ${RUNS} runs per case (medians), ${os.cpus().length} CPUs`);
    console.log(`${'case'.padEnd(32)} ${'wall ms'.padStart(8)} ${'× base'.padStart(7)} ${'peak MB'.padStart(8)} ${'× base'.padStart(7)}`);
    for (const [name] of cases) {
      const s = samples.get(name)!;
      const wall = median(s.map((x) => x.wallMs));
      const rss = median(s.map((x) => x.maxRssKb));
      console.log(
        `${name.padEnd(32)} ${wall.toFixed(1).padStart(8)} ${(wall / baseWall).toFixed(2).padStart(7)} ${(rss / 1024).toFixed(1).padStart(8)} ${(rss / baseRss).toFixed(2).padStart(7)}`,
      );
    }
    console.log(`daemon RSS once healthy: ${(daemonStartKb / 1024).toFixed(1)} MB (${(daemonStartKb / baseRss).toFixed(2)} × base peak)`);
    console.log(`daemon RSS idle after ${RUNS + 1} lists: ${(daemonIdleKb / 1024).toFixed(1)} MB (${(daemonIdleKb / baseRss).toFixed(2)} × base peak)`);
  } finally {
    await stopGateway({ stateDir }).catch(() => false);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
