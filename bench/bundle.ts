// Bundle codec benchmark: pack and hydrate a generated tree (mixed text and binary) with the Session Bundle codec
// and with the named baseline `tar -cf - | zstd -3` / `zstd -d | tar -xf -` on the same tree in the same run.
// Prints time ratios of the medians over N runs (goal: pack ≤ 1.3×, hydrate ≤ 1.5×; baseline and codec alternate, so
// both see the same machine load) and the codec's peak RSS (goal: < 200 MB), measured in a child process through
// process.resourceUsage().maxRSS.
// Also the floors, measured in the same runs: Node's built-in zstd alone compressing the baseline's tar (same
// parameters, streamed from a file to a file) and decompressing the codec's archive. The format pins Node's zstd
// (its bytes are the bundle's bytes), so pack can never be faster than the first, and it must hash every file
// before it may start compressing (the manifest with the tree digest comes first).
// Run: npx tsx bench/bundle.ts [--small] [--runs N]      (--small: ~20 MB, 500 files; default 5 runs)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_PEOPLE_LIMITS } from '../protocol/bundle';
import { hydrateSessionBundle, inspectSessionBundle, packSessionBundle } from '../server/bundle';
import { createBundleZstdCompressor, createBundleZstdDecompressor } from '../server/bundle/zstdFrame';

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
  } else if (mode === 'zstd') {
    await pipeline(createReadStream(a, { highWaterMark: 2 * 1024 * 1024 }), createBundleZstdCompressor(8 * 1024 * 1024), createWriteStream(b));
  } else if (mode === 'unzstd') {
    await pipeline(createReadStream(a, { highWaterMark: 2 * 1024 * 1024 }), createBundleZstdDecompressor(), new Writable({ write: (_chunk, _enc, done) => done() }));
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
  const runs = Number(values.runs ?? 5);
  const work = mkdtempSync(join(tmpdir(), 'bundle-bench-'));
  try {
    const tree = join(work, 'tree');
    const generated = generateTree(tree, files, bytes);
    console.log(`tree: ${files} files, ${(generated / 1024 / 1024).toFixed(1)} MiB (half text, half binary) — median of ${runs} runs each`);
    execFileSync('sh', ['-c', `cat $(find ${tree} -type f) > /dev/null`]); // warm the page cache for everyone
    const times = { basePack: [] as number[], codecPack: [] as number[], baseHydrate: [] as number[], codecHydrate: [] as number[], codecInspect: [] as number[], nodeZstd: [] as number[], nodeUnzstd: [] as number[] };
    const baseTar = join(work, 'base.tar');
    execFileSync('tar', ['-cf', baseTar, '-C', tree, 'state', 'workspace']);
    let packRss = 0;
    let hydrateRss = 0;
    let sizes = { base: 0, codec: 0 };
    for (let r = 0; r < runs; r++) {
      const baseOut = join(work, `base-${r}.tar.zst`);
      const codecOut = join(work, `codec-${r}.tar.zst`);
      times.basePack.push(timeShell(`tar -cf - -C ${tree} state workspace | zstd -3 -q -o ${baseOut}`));
      const pack = await runChild(['pack', tree, codecOut]);
      times.codecPack.push(pack.ms);
      times.nodeZstd.push((await runChild(['zstd', baseTar, join(work, `node-${r}.zst`)])).ms);
      packRss = Math.max(packRss, pack.maxRssMiB);
      const baseDest = join(work, `base-h-${r}`);
      mkdirSync(baseDest);
      times.baseHydrate.push(timeShell(`zstd -d -q -c ${baseOut} | tar -xf - -C ${baseDest}`));
      times.codecInspect.push((await runChild(['inspect', codecOut, ''])).ms);
      times.nodeUnzstd.push((await runChild(['unzstd', codecOut, ''])).ms);
      const hydrate = await runChild(['hydrate', codecOut, join(work, `codec-h-${r}`)]);
      times.codecHydrate.push(hydrate.ms);
      hydrateRss = Math.max(hydrateRss, hydrate.maxRssMiB);
      sizes = { base: statSync(baseOut).size, codec: statSync(codecOut).size };
      // Outputs are removed only at the end: ext4 skips recently freed inodes when it allocates new ones, so deleting
      // 10,000 files between runs made every later hydrate (codec and baseline alike) slower than the one before.
    }
    const f = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
    const all = (xs: number[]): string => xs.map((ms) => (ms / 1000).toFixed(2)).join(' ');
    const m = { basePack: median(times.basePack), codecPack: median(times.codecPack), baseHydrate: median(times.baseHydrate), codecHydrate: median(times.codecHydrate), codecInspect: median(times.codecInspect), nodeZstd: median(times.nodeZstd), nodeUnzstd: median(times.nodeUnzstd) };
    const packRatio = m.codecPack / m.basePack;
    const hydrateRatio = m.codecHydrate / m.baseHydrate;
    console.log(`archive size: codec ${(sizes.codec / 1024 / 1024).toFixed(1)} MiB, baseline ${(sizes.base / 1024 / 1024).toFixed(1)} MiB`);
    console.log(`pack:    codec ${f(m.codecPack)} vs tar|zstd -3 ${f(m.basePack)} → ${packRatio.toFixed(2)}× (goal ≤ 1.30×) ${packRatio <= 1.3 ? 'ok' : 'MISSED'}`);
    console.log(`         runs (s): codec ${all(times.codecPack)}; baseline ${all(times.basePack)}`);
    console.log(`         floor: Node's zstd alone on the same tar ${f(m.nodeZstd)} → ${(m.nodeZstd / m.basePack).toFixed(2)}× (runs: ${all(times.nodeZstd)})`);
    console.log(`hydrate: codec ${f(m.codecHydrate)} vs zstd -d|tar -x ${f(m.baseHydrate)} → ${hydrateRatio.toFixed(2)}× (goal ≤ 1.50×) ${hydrateRatio <= 1.5 ? 'ok' : 'MISSED'}`);
    console.log(`         runs (s): codec ${all(times.codecHydrate)}; baseline ${all(times.baseHydrate)}`);
    console.log(`         (of which validation alone, as inspect: ${f(m.codecInspect)}; the rest is creating and fsyncing files)`);
    console.log(`         Node's zstd decompression alone ${f(m.nodeUnzstd)} → ${(m.nodeUnzstd / m.baseHydrate).toFixed(2)}× (runs: ${all(times.nodeUnzstd)})`);
    const rss = Math.max(packRss, hydrateRss);
    console.log(`peak RSS: pack ${packRss.toFixed(0)} MiB, hydrate ${hydrateRss.toFixed(0)} MiB (goal < 200 MB) ${rss * 1.048576 < 200 ? 'ok' : 'MISSED'}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** How long `work` took (ms), and what it gave. */
export async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const t0 = process.hrtime.bigint();
  const result = await work();
  return [Number(process.hrtime.bigint() - t0) / 1e6, result];
}

export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
