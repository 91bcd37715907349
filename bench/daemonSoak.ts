// Footprint and latency of the local gateway daemon under many executes, and whether its memory drifts
// over a long run (issue 25: idle RSS ≤ 60 MB; ≤ 150 MB after 20,000 executes at concurrency 64 over 20
// sandboxes, p99 ≤ 100 ms there; a 1-hour soak with RSS sampled). The daemon is the shipped one
// (`node <DAEMON_NODE_FLAGS> dist/server.js gateway`, process backend, era C) in a temp state dir; its RSS is VmRSS of
// /proc/<pid>/status, the pid from its state file. Each execute is `true` as argv (not shell: bash would
// source ~/.bashrc) through GatewayClient's `operations:execute`, the same call the CLI's `sandbox exec` makes.
//   1. idle:  RSS once healthy with one sandbox, then with all the sandboxes Ready.
//   2. load:  N executes at concurrency C spread over S sandboxes (caller i uses sandbox i mod S), RSS sampled
//             every second: p50/p95/p99 per call, executes/s, RSS idle/peak/final, the daemon's CPU seconds;
//             against the named baseline measured right before: N bare child_process.spawn of `true` from this
//             process at the same concurrency (no gateway, no sandbox). At a fixed concurrency C, mean latency
//             is C / throughput (Little's law): p99 ≤ 100 ms at C = 64 needs ≥ 640 executes/s.
//   3. soak (`--minutes M`): a steady `--rate R` executes/s (at most C in flight) for M minutes, RSS sampled
//             every 10 s; drift = RSS at the end − RSS after the first minute, and the slope (MB/h) of a
//             least-squares line through the samples after that minute. Every minute the daemon also writes a
//             Node diagnostic report (SIGUSR2, `--report-on-signal`, environment left out): its JavaScript heap in
//             use and reserved tell a high-water mark (RSS stays, heap in use does not grow) from a leak (it grows).
//             Writing a report stalls the daemon for a moment: the soak's p99 includes those stalls.
// The bench process shares the machine with the daemon (and, here, with other people): the load average is
// printed with every figure.
// Run: npm run build && npx tsx bench/daemonSoak.ts [--executes 20000] [--concurrency 64] [--sandboxes 20]
//        [--minutes 0] [--rate 100] [--cpu-prof DIR] [--node-flags '…']   (`--minutes 60` is the 1-hour soak; `--cpu-prof` runs the
//        daemon under `node --cpu-prof`, its .cpuprofile written to DIR when the bench stops it)
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { GatewayClient } from '../protocol/kruntimes/gatewayClient';
import { DAEMON_NODE_FLAGS, stopGateway } from '../server/gateway/daemonClient';
import { LocalGatewayClient } from '../server/gateway/localClient';
import { createSandbox, measure, quantile, spawnCommand, startDaemon, type Call, type Stats } from './gateway';

const { values: flags } = parseArgs({
  options: {
    executes: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '64' },
    sandboxes: { type: 'string', default: '20' },
    minutes: { type: 'string', default: '0' },
    rate: { type: 'string', default: '100' },
    'cpu-prof': { type: 'string' },
    'node-flags': { type: 'string', default: '' },
  },
});
const EXECUTES = Number(flags.executes);
const CONCURRENCY = Number(flags.concurrency);
const SANDBOXES = Number(flags.sandboxes);
const MINUTES = Number(flags.minutes);
const RATE = Number(flags.rate);
const CLI = path.join(__dirname, '..', 'dist/server.js');
/** More Node flags for the daemon (after DAEMON_NODE_FLAGS, so they win), e.g. `--max-semi-space-size=16` to compare. */
const extraFlags = flags['node-flags'] ? flags['node-flags'].split(' ').filter(Boolean) : [];

/** VmRSS of a live process, in MB (1 MB = 1024 KiB, as the kernel's kB are KiB). */
function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** User + system CPU seconds a process has used (/proc/<pid>/stat fields 14 and 15). */
function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

const load = (): string => `load avg ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`;
const mb = (x: number): string => `${x.toFixed(1)} MB`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Samples a process's RSS every `everyMs` until stopped. */
function sampler(pid: number, everyMs: number): { samples: Array<{ t: number; mb: number }>; stop(): void } {
  const t0 = Date.now();
  const samples = [{ t: 0, mb: rssMb(pid) }];
  const timer = setInterval(() => samples.push({ t: (Date.now() - t0) / 1000, mb: rssMb(pid) }), everyMs);
  return { samples, stop: () => clearInterval(timer) };
}

/** Least-squares slope of y over t, per hour. */
function slopePerHour(points: Array<{ t: number; mb: number }>): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const my = points.reduce((s, p) => s + p.mb, 0) / n;
  const num = points.reduce((s, p) => s + (p.t - mt) * (p.mb - my), 0);
  const den = points.reduce((s, p) => s + (p.t - mt) ** 2, 0);
  return (num / den) * 3600;
}

/** `rate` calls per second for `ms`, at most `maxInFlight` at once (a tick with no free slot is skipped). */
async function steadyLoad(call: (i: number) => Promise<void>, rate: number, ms: number, maxInFlight: number): Promise<{ latencies: number[]; skipped: number }> {
  const latencies: number[] = [];
  let inFlight = 0;
  let skipped = 0;
  let failure: unknown;
  const inFlightDone: Array<Promise<void>> = [];
  const t0 = performance.now();
  for (let i = 0; ; i++) {
    const due = t0 + (i * 1000) / rate;
    if (due - t0 >= ms || failure !== undefined) break;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    if (inFlight >= maxInFlight) {
      skipped++;
      continue;
    }
    inFlight++;
    const start = performance.now();
    const p = call(i).then(
      () => void latencies.push(performance.now() - start),
      (err: unknown) => void (failure ??= err),
    ).finally(() => inFlight--);
    inFlightDone.push(p);
    if (inFlightDone.length > 4 * maxInFlight) inFlightDone.splice(0, inFlightDone.length - 4 * maxInFlight);
  }
  await Promise.all(inFlightDone);
  if (failure !== undefined) throw failure;
  return { latencies, skipped };
}

/** Asks the daemon for a diagnostic report (SIGUSR2) and reads its JavaScript heap: in use and reserved, in MB. */
async function heapReport(pid: number, dir: string): Promise<{ usedMb: number; totalMb: number } | undefined> {
  const before = new Set(fs.existsSync(dir) ? fs.readdirSync(dir) : []);
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const fresh = (fs.existsSync(dir) ? fs.readdirSync(dir) : []).filter((f) => f.endsWith('.json') && !before.has(f));
    for (const name of fresh) {
      try {
        const report = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as { javascriptHeap: { usedMemory: number; totalMemory: number } };
        fs.rmSync(path.join(dir, name));
        return { usedMb: report.javascriptHeap.usedMemory / 2 ** 20, totalMb: report.javascriptHeap.totalMemory / 2 ** 20 };
      } catch {
        // still being written: read it on the next turn
      }
    }
    await sleep(100); // polling for the report file
  }
  return undefined;
}

async function main(): Promise<void> {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'ss-bench-soak-'));
  const clients: GatewayClient[] = [];
  try {
    const profile = flags['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(flags['cpu-prof'])}`] : [];
    const reports = path.join(root, 'reports');
    await fsp.mkdir(reports, { mode: 0o700 }); // Node writes a report only into a folder that exists
    const reporting = MINUTES > 0 ? ['--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${reports}`, '--report-exclude-env'] : [];
    const daemon = await startDaemon('era-c', root, [process.execPath, ...DAEMON_NODE_FLAGS, ...profile, ...reporting, ...extraFlags, CLI, 'gateway']);
    const pid = daemon.pid;
    console.log(`daemon soak — node ${process.version}, ${os.cpus().length} CPUs shared with the bench client (and other users), daemon pid ${pid}`);
    await sleep(2000); // let start-up garbage settle before the idle figure (no condition to wait for: RSS just is)
    const idleOne = rssMb(pid);
    console.log(`idle, 1 sandbox:            RSS ${mb(idleOne)}  (${load()})`);

    const local = new LocalGatewayClient(daemon.url, daemon.token);
    const endpoints = [daemon.endpointUrl];
    for (let i = 1; i < SANDBOXES; i++) endpoints.push(await createSandbox(local, `soak-${i}`));
    for (const url of endpoints) clients.push(new GatewayClient({ endpoint: { url }, token: daemon.token }));
    await sleep(2000); // as above
    const idle = rssMb(pid);
    console.log(`idle, ${SANDBOXES} sandboxes:          RSS ${mb(idle)}  (${load()})`);

    const execTrue = (c: GatewayClient): Call => async () => {
      const out = await c.runCommand({ argv: ['true'] });
      if (out.exitCode !== 0) throw new Error(`true exited ${out.exitCode}`);
    };
    const perCaller = Math.ceil(EXECUTES / CONCURRENCY);
    const warmUp = Math.min(5, perCaller) * CONCURRENCY; // measure() runs 5 unrecorded calls per caller first
    const bare = await measure(CONCURRENCY, perCaller, () => () => spawnCommand('true', [], 0));
    const cpu0 = cpuSeconds(pid);
    const during = sampler(pid, 1000);
    const stats = await measure(CONCURRENCY, perCaller, (i) => execTrue(clients[i % clients.length]!));
    during.stop();
    const cpuLoad = cpuSeconds(pid) - cpu0;
    const afterLoad = rssMb(pid);
    const line = (s: Stats): string =>
      `p50 ${s.median.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  p99 ${s.p99.toFixed(1)} ms; ${(s.calls / (s.wallMs / 1000)).toFixed(0)}/s`;
    console.log(
      `\n${stats.calls} executes of \`true\` (+${warmUp} warm-up) at concurrency ${CONCURRENCY} over ${SANDBOXES} sandboxes (${load()}):\n` +
        `  bare spawn (baseline)  ${line(bare)}\n` +
        `  daemon execute         ${line(stats)}  (p99 ×${(stats.p99 / bare.p99).toFixed(1)} baseline, throughput ×` +
        `${(stats.calls / stats.wallMs / (bare.calls / bare.wallMs)).toFixed(2)})\n` +
        `  daemon CPU ${cpuLoad.toFixed(1)} s (${((cpuLoad / (stats.wallMs / 1000)) * 100).toFixed(0)}% of one core)\n` +
        `  RSS idle ${mb(idle)}  peak ${mb(Math.max(...during.samples.map((s) => s.mb), afterLoad))}  final ${mb(afterLoad)}`,
    );
    await sleep(10_000); // RSS after 10 s without load: what the daemon keeps, not what a burst needed
    console.log(`  RSS 10 s after the load:   ${mb(rssMb(pid))}  (${load()})`);

    if (MINUTES > 0) {
      console.log(`\nsoak: ${RATE} executes/s for ${MINUTES} min (at most ${CONCURRENCY} in flight), RSS every 10 s`);
      const soak = sampler(pid, 10_000);
      const heaps: Array<{ t: number; mb: number }> = [];
      const progress = setInterval(() => {
        const last = soak.samples[soak.samples.length - 1]!;
        void heapReport(pid, reports).then((heap) => {
          if (heap !== undefined) heaps.push({ t: last.t, mb: heap.usedMb });
          const h = heap === undefined ? 'heap: no report' : `heap in use ${mb(heap.usedMb)} of ${mb(heap.totalMb)}`;
          console.log(`  ${(last.t / 60).toFixed(1).padStart(5)} min  RSS ${mb(last.mb)}  ${h}  (${load()})`);
        });
      }, 60_000);
      const cpuSoak0 = cpuSeconds(pid);
      const { latencies, skipped } = await steadyLoad((i) => execTrue(clients[i % clients.length]!)(), RATE, MINUTES * 60_000, CONCURRENCY);
      clearInterval(progress);
      soak.stop();
      const end = rssMb(pid);
      soak.samples.push({ t: MINUTES * 60, mb: end });
      const afterWarm = soak.samples.filter((s) => s.t >= 60);
      const warm = afterWarm[0]?.mb ?? NaN;
      latencies.sort((a, b) => a - b);
      console.log(
        `soak done: ${latencies.length} executes (${skipped} ticks skipped with ${CONCURRENCY} in flight), ` +
          `p50 ${quantile(latencies, 0.5).toFixed(1)} ms  p99 ${quantile(latencies, 0.99).toFixed(1)} ms; ` +
          `daemon CPU ${(cpuSeconds(pid) - cpuSoak0).toFixed(0)} s (${load()})\n` +
          `  RSS after the first minute ${mb(warm)}, at the end ${mb(end)}: drift ${(end - warm).toFixed(1)} MB; ` +
          `slope ${slopePerHour(afterWarm).toFixed(1)} MB/h; min ${mb(Math.min(...afterWarm.map((s) => s.mb)))}  max ${mb(Math.max(...afterWarm.map((s) => s.mb)))}\n` +
          `  JavaScript heap in use (one report a minute): first ${mb(heaps[0]?.mb ?? NaN)}, last ${mb(heaps[heaps.length - 1]?.mb ?? NaN)}, ` +
          `min ${mb(Math.min(...heaps.map((h) => h.mb)))}  max ${mb(Math.max(...heaps.map((h) => h.mb)))}; slope ${slopePerHour(heaps).toFixed(1)} MB/h`,
      );
    }
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await stopGateway({ stateDir: path.join(root, 'era-c') }).catch(() => false);
    await fsp.rm(root, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
