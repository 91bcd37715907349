// Benchmark of a command's round trip through the local gateway daemon, against the named
// baseline measured in the same run: a bare child_process.spawn of the same command.
//   transports: era D — GatewayClient over the sandbox's one `operations:ws` Session connection,
//               against a daemon started with `--api era-d`;
//               era C — GatewayClient over `operations:execute` (HTTP), against a default daemon;
//               spawn — child_process.spawn in this process (no gateway, no sandbox).
//   commands:   `true`, and `head -c 65536 /dev/zero` (64 KiB of output, its length checked on
//               every call), both as argv: a `shell` command runs under bash, which sources
//               ~/.bashrc when its stdin is a socket (as Node's pipes are) — that would measure the
//               machine's ~/.bashrc, not the gateway.
//   load:       sequential (one caller), then K callers at once. On era D the K callers of one
//               process share its one socket, so their commands queue client-side (the protocol
//               runs one operation per connection); "era D, K sockets" gives each caller its own
//               Session connection, as K processes (or windows) would have.
//   files:      a 700 KB writeFile over each era vs fs.writeFile, and a 700 KB read vs fs.readFile.
// Each daemon is a real `sandbox-sessions gateway` process (process backend), stopped at the end.
// Prints median and p95 per call, and ratios (median/median) against the baseline.
// Run: npx tsx bench/gateway.ts [iterations per case, default 200] [concurrent callers, default 4]
// bench/daemonSoak.ts reuses its helpers (measure, startDaemon, createSandbox).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GatewayClient } from '../protocol/kruntimes/gatewayClient';
import type { SessionCommand } from '../protocol/kruntimes/gateway';
import { SessionConnection } from '../protocol/kruntimes/sessionConnection';
import type { GatewayApi } from '../server/gateway/apiEra';
import { ensureGateway, stopGateway } from '../server/gateway/daemonClient';
import { LocalGatewayClient } from '../server/gateway/localClient';

const ITER = Number(process.argv[2] ?? '200');
const CALLERS = Number(process.argv[3] ?? '4');
const FILE_BYTES = 700_000;
const OUTPUT_BYTES = 65_536;
const REPO = path.join(__dirname, '..');

interface Case {
  name: string;
  command: SessionCommand;
  spawnArgs: [string, string[]];
  expectedStdout: number;
}

const CASES: Case[] = [
  { name: '`true`', command: { argv: ['true'] }, spawnArgs: ['true', []], expectedStdout: 0 },
  {
    name: '64 KiB of output',
    command: { argv: ['head', '-c', String(OUTPUT_BYTES), '/dev/zero'] },
    spawnArgs: ['head', ['-c', String(OUTPUT_BYTES), '/dev/zero']],
    expectedStdout: OUTPUT_BYTES,
  },
];

export type Call = () => Promise<void>;

export interface Stats {
  median: number;
  p95: number;
  p99: number;
  /** Wall time of the whole batch (concurrent runs: calls per second come from it). */
  wallMs: number;
  calls: number;
}

export function spawnCommand(file: string, args: string[], expectedStdout: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let bytes = 0;
    child.stdout.on('data', (chunk: Buffer) => (bytes += chunk.length));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`${file} exited ${code}`));
      else if (bytes !== expectedStdout) reject(new Error(`${file}: ${bytes} bytes of output, expected ${expectedStdout}`));
      else resolve();
    });
  });
}

export const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;

/** `callers` loops at once, each timing `perCaller` sequential calls (after a short warm-up). */
export async function measure(callers: number, perCaller: number, makeCall: (caller: number) => Call): Promise<Stats> {
  const calls = Array.from({ length: callers }, (_, i) => makeCall(i));
  await Promise.all(calls.map(async (call) => {
    for (let i = 0; i < Math.min(5, perCaller); i++) await call();
  }));
  const samples: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    calls.map(async (call) => {
      for (let i = 0; i < perCaller; i++) {
        const start = performance.now();
        await call();
        samples.push(performance.now() - start);
      }
    }),
  );
  const wallMs = performance.now() - t0;
  samples.sort((a, b) => a - b);
  return { median: quantile(samples, 0.5), p95: quantile(samples, 0.95), p99: quantile(samples, 0.99), wallMs, calls: samples.length };
}

export interface Daemon {
  api: GatewayApi;
  stateDir: string;
  /** The sandbox's `status.endpoint.url`. */
  endpointUrl: string;
  token: string;
  /** The daemon's own URL (the local Runs API) and pid. */
  url: string;
  pid: number;
}

/** The daemon run from source (tsx); a bench of the shipped daemon passes `[node, dist/server.js, 'gateway']`. */
export const SOURCE_DAEMON = [process.execPath, '--import', 'tsx', path.join(REPO, 'server/main.ts'), 'gateway'];

/** A new session Run on the process backend, once Ready: its `status.endpoint.url`. */
export async function createSandbox(local: LocalGatewayClient, name: string): Promise<string> {
  const created = await local.createRun('default', {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name },
    spec: { runtime: 'process', mode: { session: {} } },
  });
  const run = await local.waitPhase('default', created.metadata.name ?? '', ['Ready']);
  const endpointUrl = run.status?.endpoint?.url;
  if (run.status?.phase !== 'Ready' || !endpointUrl) throw new Error(`the bench sandbox ${name} is ${run.status?.phase ?? 'Pending'}`);
  return endpointUrl;
}

/** State dirs of the daemons started (each is stopped at the end, even when its set-up failed). */
const started: string[] = [];

/** A daemon with one Ready sandbox; its state dir is `<root>/<api>` (stop it there with `stopGateway`, also when this throws). */
export async function startDaemon(api: GatewayApi, root: string, command = SOURCE_DAEMON): Promise<Daemon> {
  const stateDir = path.join(root, api);
  started.push(stateDir);
  const gateway = await ensureGateway({ stateDir, api, command, timeoutMs: 60_000 });
  const endpointUrl = await createSandbox(new LocalGatewayClient(gateway.url, gateway.token), `bench-${api}`);
  return { api, stateDir, endpointUrl, token: gateway.token, url: gateway.url, pid: gateway.pid };
}

function checkOutput(stdout: Buffer, exitCode: number, expected: number): void {
  if (exitCode !== 0) throw new Error(`exit ${exitCode}`);
  if (stdout.length !== expected) throw new Error(`${stdout.length} bytes of output, expected ${expected}`);
}

const ms = (x: number) => `${x.toFixed(2).padStart(7)} ms`;

async function main(): Promise<void> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-bench-gateway-'));
  const clients: GatewayClient[] = [];
  const sockets: SessionConnection[] = [];
  try {
    const eraC = await startDaemon('era-c', root);
    const eraD = await startDaemon('era-d', root);
    const client = (d: Daemon) => {
      const c = new GatewayClient({ endpoint: { url: d.endpointUrl }, token: d.token });
      clients.push(c);
      return c;
    };
    const cClient = client(eraC);
    const dClient = client(eraD);
    // The first operation call learns each daemon's era; check the bench measures what it says.
    await cClient.runCommand({ argv: ['true'] });
    await dClient.runCommand({ argv: ['true'] });
    if (cClient.era !== undefined && cClient.era !== 'C') throw new Error(`the era-c daemon was taken for era ${cClient.era}`);
    if (dClient.era !== 'D') throw new Error(`the era-d daemon was taken for era ${dClient.era ?? '?'}`);

    const perCallerConcurrent = Math.max(10, Math.floor(ITER / CALLERS));
    console.log(
      `local gateway bench — ${ITER} sequential calls per case, ${CALLERS} concurrent callers × ${perCallerConcurrent}; ` +
        `median / p95 per call (node ${process.version}, ${os.cpus().length} CPUs, ${os.platform()} ${os.release()})`,
    );
    for (const kase of CASES) {
      const viaClient = (c: GatewayClient): Call => async () => {
        const out = await c.runCommand(kase.command);
        checkOutput(out.stdout, out.exitCode, kase.expectedStdout);
      };
      const viaOwnSocket = (): Call => {
        const socket = new SessionConnection({ endpointUrl: eraD.endpointUrl, token: eraD.token });
        sockets.push(socket);
        return async () => {
          let stdout = 0;
          let exitCode: number | undefined;
          for await (const event of socket.operate({ command: kase.command })) {
            if (event.type === 'output' && event.output.data) stdout += Buffer.from(event.output.data, 'base64').length;
            if (event.type === 'completed') exitCode = event.completed.command?.exitCode;
          }
          checkOutput(Buffer.alloc(stdout), exitCode ?? -1, kase.expectedStdout);
        };
      };
      const bare: Call = () => spawnCommand(kase.spawnArgs[0], kase.spawnArgs[1], kase.expectedStdout);

      const seq = {
        spawn: await measure(1, ITER, () => bare),
        c: await measure(1, ITER, () => viaClient(cClient)),
        d: await measure(1, ITER, () => viaClient(dClient)),
      };
      const con = {
        spawn: await measure(CALLERS, perCallerConcurrent, () => bare),
        c: await measure(CALLERS, perCallerConcurrent, () => viaClient(client(eraC))),
        dShared: await measure(CALLERS, perCallerConcurrent, () => viaClient(client(eraD))),
        dOwn: await measure(CALLERS, perCallerConcurrent, () => viaOwnSocket()),
      };
      const row = (label: string, s: Stats, base: Stats, extra = ''): string =>
        `  ${label.padEnd(40)} median ${ms(s.median)}  p95 ${ms(s.p95)}  ${(s.calls / (s.wallMs / 1000)).toFixed(0).padStart(5)} calls/s  ` +
        `×${(s.median / base.median).toFixed(1).padStart(5)} spawn${extra}`;
      console.log(`\n${kase.name}, sequential`);
      console.log(row('spawn (baseline)', seq.spawn, seq.spawn));
      console.log(row('era C  operations:execute', seq.c, seq.spawn));
      console.log(row('era D  operations:ws', seq.d, seq.spawn, `  ×${(seq.d.median / seq.c.median).toFixed(2)} era C`));
      console.log(`${kase.name}, ${CALLERS} callers at once`);
      console.log(row('spawn (baseline)', con.spawn, con.spawn));
      console.log(row('era C  operations:execute', con.c, con.spawn));
      console.log(row('era D  operations:ws, one shared socket', con.dShared, con.spawn, `  ×${(con.dShared.median / con.c.median).toFixed(2)} era C`));
      console.log(row(`era D  operations:ws, ${CALLERS} sockets`, con.dOwn, con.spawn, `  ×${(con.dOwn.median / con.c.median).toFixed(2)} era C`));
      for (const s of sockets.splice(0)) s.close();
    }

    const fileIter = Math.max(10, Math.floor(ITER / 4));
    const data = randomBytes(FILE_BYTES);
    const plain = path.join(root, 'plain.bin');
    const fsWrite = await measure(1, fileIter, () => () => fs.writeFile(plain, data));
    const cWrite = await measure(1, fileIter, () => () => cClient.writeFile('bench.bin', data));
    const dWrite = await measure(1, fileIter, () => () => dClient.writeFile('bench.bin', data));
    const fsRead = await measure(1, fileIter, () => async () => {
      if ((await fs.readFile(plain)).length !== FILE_BYTES) throw new Error('short read');
    });
    const dRead = await measure(1, fileIter, () => async () => {
      if ((await dClient.read('bench.bin', { maxBytes: 786_000 })).contents.length !== FILE_BYTES) throw new Error('short read');
    });
    const frow = (label: string, s: Stats, base: Stats, baseLabel: string): string =>
      `  ${label.padEnd(40)} median ${ms(s.median)}  p95 ${ms(s.p95)}  ×${(s.median / base.median).toFixed(1).padStart(5)} ${baseLabel}`;
    console.log(`\nfiles of ${FILE_BYTES} bytes, sequential, ${fileIter} calls each`);
    console.log(frow('fs.writeFile (baseline)', fsWrite, fsWrite, 'fs.writeFile'));
    console.log(frow('era C  writeFile (operations:execute)', cWrite, fsWrite, 'fs.writeFile'));
    console.log(frow('era D  writeFile (operations:ws)', dWrite, fsWrite, 'fs.writeFile'));
    console.log(frow('fs.readFile (baseline)', fsRead, fsRead, 'fs.readFile'));
    console.log(frow('read (GET files, both eras)', dRead, fsRead, 'fs.readFile'));
  } finally {
    for (const s of sockets) s.close();
    await Promise.all(clients.map((c) => c.close()));
    for (const stateDir of started) await stopGateway({ stateDir });
    await fs.rm(root, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
