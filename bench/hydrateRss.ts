// Peak memory of the CLI's hydrate as a whole process (issue 25: ≤ 200 MB for a 199 MiB / 5,000-file tree), with
// what it is made of, each measured in the same run as GNU time's maximum resident set size (%M, KiB) of the
// process: `node -e 0` (the Node floor), `bundle cleanup` of nothing (the CLI floor: Node plus the bundle command's
// code), `bundle inspect` (the reading worker, decompression and validation, no files written), `bundle hydrate`
// (plus the file-writer threads), and the named baseline `zstd -d | tar -x` of the same bundle.
// Run: npm run build && npx tsx bench/hydrateRss.ts [runs, default 3]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateTree, median } from './bundle';

const RUNS = Number(process.argv[2] ?? '3');
const CLI = path.join(__dirname, '..', 'dist/server.js');
const TIME = '/usr/bin/time';
const GOAL_MB = 200;

/** Runs `argv` under GNU time; returns its peak RSS in KiB (a failing command throws: it must not look small). */
function peakKib(argv: string[]): number {
  const out = path.join(os.tmpdir(), `hydrate-rss-${process.pid}.time`);
  const r = spawnSync(TIME, ['-o', out, '-f', '%M', ...argv], { stdio: ['ignore', 'ignore', 'pipe'] });
  const kib = Number(fs.readFileSync(out, 'utf8').trim().split('\n').pop());
  fs.rmSync(out, { force: true });
  if (r.status !== 0 || !Number.isFinite(kib)) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr.toString()}`);
  return kib;
}

function main(): void {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  if (!fs.existsSync(TIME)) throw new Error(`${TIME} (GNU time) is needed for the peak RSS`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hydrate-rss-'));
  try {
    const tree = path.join(work, 'tree');
    const bytes = generateTree(tree, 5000, 200 * 1024 * 1024);
    const bundle = path.join(work, 'b.tar.zst');
    const node = process.execPath;
    const packed = spawnSync(node, [CLI, 'bundle', 'pack', path.join(tree, 'state'), path.join(tree, 'workspace'), '-o', bundle, '--session-id', 'rss'], { stdio: 'ignore' });
    if (packed.status !== 0) throw new Error('bundle pack failed');
    console.log(`tree: 5000 files, ${(bytes / 1024 / 1024).toFixed(1)} MiB; bundle ${(fs.statSync(bundle).size / 1024 / 1024).toFixed(1)} MiB; median of ${RUNS} runs, peak RSS of the whole process`);
    const cases: Record<string, () => string[]> = {
      'node -e 0': () => [node, '-e', '0'],
      'CLI bundle cleanup (nothing)': () => [node, CLI, 'bundle', 'cleanup', path.join(work, 'nothing')],
      'CLI bundle inspect': () => [node, CLI, 'bundle', 'inspect', bundle],
      'CLI bundle hydrate': () => [node, CLI, 'bundle', 'hydrate', bundle, path.join(work, `h-${Math.random().toString(36).slice(2)}`), '--session-id', 'rss'],
      'zstd -d | tar -x (baseline)': () => {
        const dest = fs.mkdtempSync(path.join(work, 'tar-'));
        return ['sh', '-c', `zstd -d -q -c ${bundle} | tar -xf - -C ${dest}`];
      },
    };
    const samples: Record<string, number[]> = {};
    for (let r = 0; r < RUNS; r++) for (const [name, argv] of Object.entries(cases)) (samples[name] ??= []).push(peakKib(argv()));
    for (const [name, kib] of Object.entries(samples)) console.log(`  ${name.padEnd(30)} ${(median(kib) * 1024 / 1e6).toFixed(1).padStart(7)} MB   (runs, KiB: ${kib.join(' ')})`);
    const hydrateMb = (median(samples['CLI bundle hydrate'] ?? []) * 1024) / 1e6;
    console.log(`hydrate peak ${hydrateMb.toFixed(1)} MB (goal ≤ ${GOAL_MB} MB): ${hydrateMb <= GOAL_MB ? 'ok' : 'MISSED'}`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main();
