// Search benchmark: a text search over a generated tree of 10,000 files / 200 MB in nested folders (a few
// files hold the needle), as `sandboxes/search` runs it for a local sandbox (in place, in the companion),
// against the named baseline `grep -rn` on the same tree in the same run. Prints the time to the first
// result and to all results, medians over N runs (ours and grep alternate, page cache warm), and the
// ratios (goal ≤ 1.5×; grep runs with --line-buffered so its first result is not held in a pipe buffer). With --gateway it also times the same search as a kruntimes sandbox would run it:
// grep as one command through a real local gateway's session (stream, parse, filter); with --simulator,
// through the kruntimes cluster simulator's gateway (era D: the Console over HTTPS, the command over
// `operations:ws`, a Run created through its Kubernetes API; its sandboxes run on this machine, so the
// tree is generated in the sandbox's folder and grep -rn runs on that same tree). With --gateway --busybox the
// sandbox's commands see nothing but BusyBox's applets (an Alpine image: its search runs without find -printf or grep
// -Z/-I), and the same search also walks the gateway's file API (what such an image had before).
// Run: npx tsx bench/search.ts [--small] [--runs N] [--gateway [--busybox] | --simulator]   (--small: 1,000 files / 20 MB)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SearchQuerySchema, type SearchQueryInput } from '../protocol/search';
import { GatewayClient } from '../protocol/kruntimes/gatewayClient';
import { stopGateway } from '../server/gateway/daemonClient';
import { createLogger } from '../server/log';
import { LocalSandboxProvider } from '../server/sandboxes/localProvider';
import { gatewayTree } from '../server/search/gatewayTree';
import { SearchRun } from '../server/search/searchRun';
import { searchHostDirectory, searchThroughGateway } from '../server/search/searchService';
import { searchTree } from '../server/search/treeSearch';
import { startClusterTarget, type ClusterTarget } from '../test/fixtures/cluster/target';
import { ImageClient } from '../test/fixtures/sandboxes/imageClient';

const NEEDLE = 'quixotic_needle_42';
const WORDS = 'const function return import export session sandbox search folder result stream cancel bound limit'.split(' ');

function fileText(size: number, seed: number, needleLine: number | undefined): string {
  const lines: string[] = [];
  let n = 0;
  let x = seed * 2654435761;
  while (n < size) {
    let line = '';
    for (let w = 0; w < 8; w++) {
      x = (x * 1103515245 + 12345) >>> 0;
      line += `${WORDS[x % WORDS.length]} `;
    }
    if (needleLine === lines.length) line += NEEDLE;
    lines.push(line);
    n += line.length + 1;
  }
  return `${lines.join('\n')}\n`.slice(0, size);
}

function generate(root: string, files: number, bytesPerFile: number): number {
  let total = 0;
  for (let i = 0; i < files; i++) {
    const rel = path.join(`m${i % 10}`, `d${Math.floor(i / 10) % 100}`, `f${i}.ts`);
    fs.mkdirSync(path.join(root, path.dirname(rel)), { recursive: true });
    // One file in 200 holds the needle, on a line near its middle.
    const text = fileText(bytesPerFile, i, i % 200 === 7 ? 100 : undefined);
    fs.writeFileSync(path.join(root, rel), text);
    total += text.length;
  }
  return total;
}

interface Timing {
  first: number;
  all: number;
  results: number;
}

function grep(root: string, args: string[]): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    let first = 0;
    let lines = 0;
    const child = spawn('grep', [...args, '--line-buffered', '-rn', NEEDLE, '.'], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.on('data', (d: Buffer) => {
      if (first === 0) first = Number(process.hrtime.bigint() - start) / 1e6;
      for (const b of d) if (b === 10) lines++;
    });
    child.on('error', reject);
    child.on('close', () => resolve({ first, all: Number(process.hrtime.bigint() - start) / 1e6, results: lines }));
  });
}

async function ours(run: (onPartial: () => void) => Promise<{ stats: { matches: number } }>): Promise<Timing> {
  const start = process.hrtime.bigint();
  let first = 0;
  const result = await run(() => {
    if (first === 0) first = Number(process.hrtime.bigint() - start) / 1e6;
  });
  return { first, all: Number(process.hrtime.bigint() - start) / 1e6, results: result.stats.matches };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** The search as the file API walk runs it (8 files at a time, as searchService's fallback). */
async function walkFileApi(client: GatewayClient, query: ReturnType<typeof SearchQuerySchema.parse>, onPartial: () => void): Promise<{ stats: { matches: number } }> {
  const run = new SearchRun(query, onPartial, undefined);
  try {
    await searchTree(gatewayTree(client), '', run, { concurrency: 8 });
    return run.finish('files-api');
  } finally {
    run.dispose();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { small: { type: 'boolean' }, runs: { type: 'string' }, gateway: { type: 'boolean' }, simulator: { type: 'boolean' }, busybox: { type: 'boolean' } },
  });
  if (values.gateway && values.simulator) throw new Error('--gateway or --simulator, not both (each generates the tree in its own sandbox)');
  if (values.busybox && !values.gateway) throw new Error('--busybox goes with --gateway');
  const files = values.small ? 1_000 : 10_000;
  const runs = Number(values.runs ?? 5);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-search-'));
  const stateDir = path.join(work, 'state');
  let provider: LocalSandboxProvider | undefined;
  let client: GatewayClient | undefined;
  let cluster: ClusterTarget | undefined;
  const through = values.simulator ? 'the simulator gateway (era D)' : values.busybox ? 'the local gateway, a BusyBox image' : 'the local gateway';
  try {
    let root = path.join(work, 'tree');
    if (values.gateway) {
      provider = new LocalSandboxProvider({
        stateDir,
        gatewayCommand: [process.execPath, '--import', 'tsx', path.join(__dirname, '..', 'server/main.ts'), 'gateway'],
        log: createLogger(fs.createWriteStream('/dev/null'), 'error'),
      });
      const sandbox = await provider.create({ provider: 'local', runtime: 'process', namespace: 'default' }, { waitForReady: true });
      const connection = await provider.open(sandbox.ref);
      if (values.busybox) {
        const image = new ImageClient({ endpoint: connection.endpoint, token: connection.token });
        image.tools = 'busybox';
        client = image;
      } else client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token });
      root = (await provider.hostDirectory(sandbox.ref)) as string;
    }
    if (values.simulator) {
      cluster = await startClusterTarget({ era: 'D' });
      const kruntimes = cluster.provider();
      const sandbox = await kruntimes.create(cluster.spec(), { waitForReady: true });
      const connection = await kruntimes.open(sandbox.ref);
      client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
      // The simulator runs the sandbox's commands on this machine: its working folder is a folder here.
      const pwd = await client.execute({ command: { argv: ['pwd', '-P'] } });
      root = Buffer.from(pwd.command?.stdout ?? '', 'base64').toString('utf8').trim();
    }
    fs.mkdirSync(root, { recursive: true });
    const bytes = generate(root, files, 20 * 1024);
    const load = (): string => os.loadavg().map((l) => l.toFixed(2)).join(' ');
    console.log(`tree: ${files} files, ${(bytes / 1024 / 1024).toFixed(0)} MiB in 1,000 folders; needle in ${files / 200} files — median of ${runs} runs, warm cache; load average ${load()}`);
    const q = (input: Partial<SearchQueryInput>) =>
      SearchQuerySchema.parse({ kind: 'text', pattern: NEEDLE, maxResults: 20_000, maxTotalBytes: 2 * 1024 ** 3, timeoutMs: 300_000, ...input });
    const cases: { name: string; query: ReturnType<typeof q>; grepArgs: string[] }[] = [
      { name: 'literal, case-sensitive', query: q({ isCaseSensitive: true }), grepArgs: ['-F'] },
      { name: 'literal, any case (VS Code default)', query: q({ isCaseSensitive: false }), grepArgs: ['-F', '-i'] },
      { name: 'regular expression', query: q({ pattern: 'quixotic_\\w+_42', isRegExp: true, isCaseSensitive: true }), grepArgs: ['-E'] },
    ];
    await grep(root, ['-F']); // warm the page cache
    for (const c of cases) {
      const t = { ours: [] as Timing[], grep: [] as Timing[], gateway: [] as Timing[], walk: [] as Timing[] };
      for (let i = 0; i < runs; i++) {
        t.ours.push(await ours((onPartial) => searchHostDirectory(root, c.query, { onPartial })));
        t.grep.push(await grep(root, c.grepArgs));
        if (client) {
          const gw = client;
          t.gateway.push(await ours((onPartial) => searchThroughGateway(gw, c.query, { onPartial })));
          if (values.busybox) t.walk.push(await ours((onPartial) => walkFileApi(gw, c.query, onPartial)));
        }
      }
      const m = (xs: Timing[], k: 'first' | 'all') => median(xs.map((x) => x[k]));
      const f = (ms: number) => `${ms.toFixed(0)} ms`;
      const ratioFirst = m(t.ours, 'first') / m(t.grep, 'first');
      const ratioAll = m(t.ours, 'all') / m(t.grep, 'all');
      console.log(`${c.name}: ${t.ours[0]?.results ?? 0} matches (grep: ${t.grep[0]?.results ?? 0} lines${t.gateway.length > 0 ? `; through the gateway: ${t.gateway[0]?.results ?? 0}` : ''})`);
      console.log(`  first result: in place ${f(m(t.ours, 'first'))} vs grep -rn ${f(m(t.grep, 'first'))} → ${ratioFirst.toFixed(2)}× (goal ≤ 1.50×) ${ratioFirst <= 1.5 ? 'ok' : 'MISSED'}`);
      console.log(`  all results:  in place ${f(m(t.ours, 'all'))} vs grep -rn ${f(m(t.grep, 'all'))} → ${ratioAll.toFixed(2)}× (goal ≤ 1.50×) ${ratioAll <= 1.5 ? 'ok' : 'MISSED'}`);
      console.log(`  runs (ms, first): in place ${t.ours.map((x) => x.first.toFixed(0)).join(' ')}; grep ${t.grep.map((x) => x.first.toFixed(0)).join(' ')}`);
      console.log(`  runs (ms, all): in place ${t.ours.map((x) => x.all.toFixed(0)).join(' ')}; grep ${t.grep.map((x) => x.all.toFixed(0)).join(' ')}; load average ${load()}`);
      if (t.gateway.length > 0) {
        console.log(
          `  through ${through} (find/grep in the sandbox, streamed): first ${f(m(t.gateway, 'first'))} (${(m(t.gateway, 'first') / m(t.grep, 'first')).toFixed(2)}× grep), all ${f(m(t.gateway, 'all'))} (${(m(t.gateway, 'all') / m(t.grep, 'all')).toFixed(2)}× grep); runs (ms, all): ${t.gateway.map((x) => x.all.toFixed(0)).join(' ')}`,
        );
      }
      if (t.walk.length > 0) {
        console.log(
          `  the file API walked (${t.walk[0]?.results ?? 0} matches): first ${f(m(t.walk, 'first'))}, all ${f(m(t.walk, 'all'))} (${(m(t.walk, 'all') / m(t.grep, 'all')).toFixed(2)}× grep; the command took ${(m(t.gateway, 'all') / m(t.walk, 'all')).toFixed(2)}× this); runs (ms, all): ${t.walk.map((x) => x.all.toFixed(0)).join(' ')}`,
        );
      }
    }
  } finally {
    await client?.close();
    if (provider) {
      await provider.dispose();
      await stopGateway({ stateDir });
    }
    await cluster?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
