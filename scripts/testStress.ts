// `npm run test:stress`: runs the unit suites that depend on real processes, timers and sockets
// several times in a row (10 by default) to surface flakes, and stops at the first failing run,
// naming the run, each failed test and its error, and the time of every run. A flake found this
// way is fixed at its cause, never retried away.
//   npm run test:stress [-- --runs N] [-- <spec files or dirs>]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const ROOT = path.resolve(__dirname, '..');

/** Suites that start processes, wait on time or talk over sockets. */
const DEFAULT_SPECS = [
  'test/unit/local',
  'test/unit/gateway',
  'test/unit/kruntimes',
  'test/unit/sandboxes/leaseKeeper.test.ts',
  'test/unit/protocol/gatewayClient.behaviour.test.ts',
];

const MochaJson = z.object({
  stats: z.object({ passes: z.number(), failures: z.number(), pending: z.number(), duration: z.number().optional() }),
  failures: z.array(z.object({ fullTitle: z.string(), file: z.string().optional(), err: z.object({ message: z.string().optional(), stack: z.string().optional() }).loose() })),
});

function parseArgs(argv: string[]): { runs: number; specs: string[] } {
  let runs = 10;
  const specs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--runs') {
      runs = Number(argv[++i]);
      if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs needs a positive integer');
    } else specs.push(a);
  }
  return { runs, specs: specs.length > 0 ? specs : DEFAULT_SPECS };
}

function expand(spec: string): string[] {
  const abs = path.resolve(ROOT, spec);
  if (!fs.existsSync(abs)) throw new Error(`no such spec: ${spec}`);
  if (!fs.statSync(abs).isDirectory()) return [spec];
  // Its subfolders too: `test/unit` names every unit suite.
  return fs
    .readdirSync(abs, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .sort()
    .map((f) => path.join(spec, f));
}

function main(): number {
  const { runs, specs } = parseArgs(process.argv.slice(2));
  const files = specs.flatMap(expand);
  const mocha = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js');
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-stress-'));
  console.log(`stress: ${runs} run(s) of ${files.length} file(s): ${specs.join(' ')}`);
  const times: number[] = [];
  for (let run = 1; run <= runs; run++) {
    const out = path.join(outDir, `run-${run}.json`);
    const started = Date.now();
    // The project's .mocharc.json would add every unit suite: pass its other settings by hand.
    const r = spawnSync(
      process.execPath,
      [mocha, '--no-config', '--node-option', 'import=tsx', '--timeout', '20000', '--reporter', 'json', '--reporter-option', `output=${out}`, ...files],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
    const seconds = (Date.now() - started) / 1000;
    times.push(seconds);
    let report: z.infer<typeof MochaJson> | undefined;
    try {
      report = MochaJson.parse(JSON.parse(fs.readFileSync(out, 'utf8')));
    } catch {
      report = undefined;
    }
    const summary = report ? `${report.stats.passes} passed, ${report.stats.failures} failed, ${report.stats.pending} pending` : 'no report';
    console.log(`run ${run}/${runs}: ${seconds.toFixed(1)} s — ${summary} (exit ${r.status ?? r.signal})`);
    if (r.status !== 0 || !report || report.stats.failures > 0) {
      console.log(`\nstress: run ${run} failed`);
      for (const f of report?.failures ?? []) {
        console.log(`  ✗ ${f.fullTitle}${f.file ? `\n    ${path.relative(ROOT, f.file)}` : ''}`);
        console.log(`    ${(f.err.stack ?? f.err.message ?? '').split('\n').slice(0, 6).join('\n    ')}`);
      }
      if (!report) console.log((r.stderr || r.stdout || '').split('\n').slice(-30).join('\n'));
      console.log(`times (s): ${times.map((t) => t.toFixed(1)).join(', ')}\nlogs: ${outDir}`);
      return 1;
    }
  }
  console.log(`\nstress: all ${runs} runs passed; times (s): ${times.map((t) => t.toFixed(1)).join(', ')}`);
  fs.rmSync(outDir, { recursive: true, force: true });
  return 0;
}

process.exitCode = main();
