// Bundle codec benchmark: pack and hydrate a generated tree (mixed text and binary) with the Session Bundle codec
// and with the named baseline `tar -cf - | zstd -3` / `zstd -d | tar -xf -` on the same tree in the same run.
// Prints time ratios (goal: pack ≤ 1.3×, hydrate ≤ 1.5×) and the codec's peak RSS (goal: < 200 MB), measured in a
// child process through process.resourceUsage().maxRSS.
// Run: npx tsx bench/bundle.ts [--small] [--runs N]      (--small: ~20 MB, 500 files)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_PEOPLE_LIMITS } from '../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle, packSessionBundle } from '../server/bundle';

const SESSION = 'bench-session';

/** Deterministic pseudo-random bytes (fast, incompressible enough to stand for binaries). */
function binary(size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let block = createHash('sha256').update(`seed-${seed}`).digest();
  for (let o = 0; o < size; o += 32) {
    block.copy(out, o, 0, Math.min(32, size - o));
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

const WORDS = 'session bundle state workspace manifest digest canonical header stream quota zstd frame tar directory file hydrate pack inspect const function return import export'.split(' ');
function text(size: number, seed: number): Buffer {
  const lines: string[] = [];
  let n = 0;
  let x = seed * 2654435761;
  while (n < size) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const words = Array.from({ length: 4 + (x % 9) }, (_, i) => WORDS[(x >>> (i % 24)) % WORDS.length]);
    const line = `${'  '.repeat(x % 4)}${words.join(' ')}; // ${x.toString(16)}\n`;
    lines.push(line);
    n += line.length;
  }
  return Buffer.from(lines.join('').slice(0, size));
}

export function generateTree(root: string, files: number, totalBytes: number): number {
  const state = join(root, 'state');
  const workspace = join(root, 'workspace');
  mkdirSync(state, { recursive: true });
  let written = 0;
  const mean = Math.floor(totalBytes / files);
  for (let i = 0; i < files; i++) {
    const base = i % 10 === 0 ? state : workspace;
    const dir = join(base, `d${i % 50}`, `s${i % 7}`);
    mkdirSync(dir, { recursive: true });
    const size = Math.max(1, Math.floor(mean * (0.25 + ((i * 7919) % 150) / 100)));
    const isBinary = i % 2 === 1;
    writeFileSync(join(dir, `f${i}.${isBinary ? 'bin' : 'txt'}`), isBinary ? binary(size, i) : text(size, i));
    written += size;
  }
  return written;
}

function timeShell(script: string): number {
  const start = process.hrtime.bigint();
  execFileSync('sh', ['-c', script], { stdio: ['ignore', 'ignore', 'inherit'] });
  return Number(process.hrtime.bigint() - start) / 1e6;
}

interface ChildResult {
  ms: number;
  maxRssMiB: number;
}

function runChild(args: string[]): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename, '--child', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as ChildResult) : reject(new Error(`child ${args[0]} exited ${code}`))));
  });
}

async function child(mode: string, a: string, b: string): Promise<void> {
  const start = process.hrtime.bigint();
  if (mode === 'pack') {
    await packSessionBundle({
      stateRoot: join(a, 'state'),
      workspaceRoot: join(a, 'workspace'),
      stateIdentity: { mediaType: 'application/vnd.maka.session-state-identity+json;version=1', bytes: Buffer.from('{"schemaVersion":1,"makaSessionId":"bench"}\n') },
      envelope: { sessionId: SESSION },
      destination: b,
      limits: DEFAULT_PEOPLE_LIMITS,
    });
  } else if (mode === 'inspect') {
    await inspectSessionBundle({ source: { path: a }, limits: DEFAULT_PEOPLE_LIMITS });
  } else {
    await hydrateSessionBundle({ source: { path: a }, expectedSessionId: SESSION, destinationRoot: b, limits: DEFAULT_PEOPLE_LIMITS });
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  process.stdout.write(JSON.stringify({ ms, maxRssMiB: process.resourceUsage().maxRSS / 1024 }));
}

function hasZstd(): boolean {
  try {
    execFileSync('zstd', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { small: { type: 'boolean' }, runs: { type: 'string' }, child: { type: 'boolean' } } });
  if (values.child === true) {
    const [mode, a, b] = positionals as [string, string, string];
    await child(mode, a, b);
    return;
  }
  if (!hasZstd()) {
    console.error('bench/bundle: the `zstd` command is missing; install it (Debian: apt-get install zstd) to measure the baseline.');
    process.exit(1);
  }
  const files = values.small === true ? 500 : 5000;
  const bytes = values.small === true ? 20 * 1024 * 1024 : 200 * 1024 * 1024;
  const runs = Number(values.runs ?? 3);
  const work = mkdtempSync(join(tmpdir(), 'bundle-bench-'));
  try {
    const tree = join(work, 'tree');
    const generated = generateTree(tree, files, bytes);
    console.log(`tree: ${files} files, ${(generated / 1024 / 1024).toFixed(1)} MiB (half text, half binary) — best of ${runs} runs each`);
    execFileSync('sh', ['-c', `cat $(find ${tree} -type f) > /dev/null`]); // warm the page cache for everyone
    const best = { basePack: Infinity, codecPack: Infinity, baseHydrate: Infinity, codecHydrate: Infinity, codecInspect: Infinity, packRss: 0, hydrateRss: 0 };
    let sizes = { base: 0, codec: 0 };
    for (let r = 0; r < runs; r++) {
      const baseOut = join(work, `base-${r}.tar.zst`);
      const codecOut = join(work, `codec-${r}.tar.zst`);
      best.basePack = Math.min(best.basePack, timeShell(`tar -cf - -C ${tree} state workspace | zstd -3 -q -o ${baseOut}`));
      const pack = await runChild(['pack', tree, codecOut]);
      best.codecPack = Math.min(best.codecPack, pack.ms);
      best.packRss = Math.max(best.packRss, pack.maxRssMiB);
      const baseDest = join(work, `base-h-${r}`);
      mkdirSync(baseDest);
      best.baseHydrate = Math.min(best.baseHydrate, timeShell(`zstd -d -q -c ${baseOut} | tar -xf - -C ${baseDest}`));
      best.codecInspect = Math.min(best.codecInspect, (await runChild(['inspect', codecOut, ''])).ms);
      const hydrate = await runChild(['hydrate', codecOut, join(work, `codec-h-${r}`)]);
      best.codecHydrate = Math.min(best.codecHydrate, hydrate.ms);
      best.hydrateRss = Math.max(best.hydrateRss, hydrate.maxRssMiB);
      sizes = { base: statSync(baseOut).size, codec: statSync(codecOut).size };
      rmSync(baseDest, { recursive: true, force: true });
      rmSync(join(work, `codec-h-${r}`), { recursive: true, force: true });
      rmSync(baseOut, { force: true });
      rmSync(codecOut, { force: true });
    }
    const f = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
    const packRatio = best.codecPack / best.basePack;
    const hydrateRatio = best.codecHydrate / best.baseHydrate;
    console.log(`archive size: codec ${(sizes.codec / 1024 / 1024).toFixed(1)} MiB, baseline ${(sizes.base / 1024 / 1024).toFixed(1)} MiB`);
    console.log(`pack:    codec ${f(best.codecPack)} vs tar|zstd -3 ${f(best.basePack)} → ${packRatio.toFixed(2)}× (goal ≤ 1.30×) ${packRatio <= 1.3 ? 'ok' : 'MISSED'}`);
    console.log(`hydrate: codec ${f(best.codecHydrate)} vs zstd -d|tar -x ${f(best.baseHydrate)} → ${hydrateRatio.toFixed(2)}× (goal ≤ 1.50×) ${hydrateRatio <= 1.5 ? 'ok' : 'MISSED'}`);
    console.log(`         (of which validation alone, as inspect: ${f(best.codecInspect)}; the rest is creating and fsyncing files)`);
    const rss = Math.max(best.packRss, best.hydrateRss);
    console.log(`peak RSS: pack ${best.packRss.toFixed(0)} MiB, hydrate ${best.hydrateRss.toFixed(0)} MiB (goal < 200 MB) ${rss * 1.048576 < 200 ? 'ok' : 'MISSED'}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
