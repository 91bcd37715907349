// Benchmark of the local gateway against named baselines measured in the same run:
//   execute: one `operations:execute` of `true` (process backend) vs a bare child_process.spawn('true')
//   write:   a 700 KB writeFile through the gateway vs fs.writeFile
//   read:    a 700 KB read (maxBytes 786000) through the gateway vs fs.readFile
// Run: npx tsx bench/gateway.ts [iterations]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { startGateway } from '../server/gateway/daemon';

const ITER = Number(process.argv[2] ?? '200');
const FILE_BYTES = 700_000;

function spawnTrue(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('true', [], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve());
  });
}

async function measure(iterations: number, fn: () => Promise<void>): Promise<{ median: number; mean: number }> {
  for (let i = 0; i < Math.min(10, iterations); i++) await fn(); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  samples.sort((a, b) => a - b);
  return { median: samples[Math.floor(samples.length / 2)] ?? NaN, mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}

async function main(): Promise<void> {
  const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ss-bench-'));
  const gw = await startGateway({ stateDir });
  const agent = new Agent({ connections: 4, keepAliveTimeout: 10_000 });
  const call = async (method: 'GET' | 'POST', p: string, body?: unknown): Promise<string> => {
    const res = await request(gw.url + p, {
      method,
      dispatcher: agent,
      headers: { authorization: `Bearer ${gw.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200 && res.statusCode !== 201) throw new Error(`${method} ${p}: ${res.statusCode} ${text}`);
    return text;
  };
  try {
    const run = JSON.parse(
      await call('POST', '/local/v1/namespaces/default/runs', {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name: 'bench' },
        spec: { runtime: 'process', mode: { session: {} } },
      }),
    ) as { metadata: { name: string } };
    let P = '';
    for (let i = 0; i < 200 && !P; i++) {
      const cur = JSON.parse(await call('GET', `/local/v1/namespaces/default/runs/${run.metadata.name}`)) as { status?: { phase?: string; endpoint?: { url: string } } };
      if (cur.status?.phase === 'Ready' && cur.status.endpoint) P = new URL(cur.status.endpoint.url).pathname;
      else await new Promise((r) => setTimeout(r, 25));
    }
    if (!P) throw new Error('the bench Run did not become Ready');

    const data = randomBytes(FILE_BYTES);
    const b64 = data.toString('base64');
    const plain = path.join(stateDir, 'plain.bin');

    const exec = await measure(ITER, async () => {
      await call('POST', `${P}/operations:execute`, { command: { argv: ['true'] } });
    });
    const bare = await measure(ITER, spawnTrue);
    const fileIter = Math.max(10, Math.floor(ITER / 4));
    const gwWrite = await measure(fileIter, async () => {
      await call('POST', `${P}/operations:execute`, { writeFile: { path: 'bench.bin', contents: b64 } });
    });
    const fsWrite = await measure(fileIter, () => fs.writeFile(plain, data));
    const gwRead = await measure(fileIter, async () => {
      const body = JSON.parse(await call('GET', `${P}/files/bench.bin?maxBytes=786000`)) as { contents: string };
      if (Buffer.from(body.contents, 'base64').length !== FILE_BYTES) throw new Error('short read');
    });
    const fsRead = await measure(fileIter, async () => {
      if ((await fs.readFile(plain)).length !== FILE_BYTES) throw new Error('short read');
    });

    const row = (name: string, a: { median: number; mean: number }, b: { median: number; mean: number }, baseline: string): string =>
      `${name.padEnd(32)} ${a.median.toFixed(3).padStart(9)} ms  vs ${baseline.padEnd(26)} ${b.median.toFixed(3).padStart(9)} ms  ratio ${(a.median / b.median).toFixed(1)}x (mean ${(a.mean / b.mean).toFixed(1)}x)`;
    console.log(`local gateway bench — ${ITER} executes, ${fileIter} file ops of ${FILE_BYTES} bytes, medians (node ${process.version}, ${os.cpus().length} CPUs)`);
    console.log(row('operations:execute `true`', exec, bare, 'child_process.spawn(true)'));
    console.log(row('write 700 KB via gateway', gwWrite, fsWrite, 'fs.writeFile'));
    console.log(row('read 700 KB via gateway', gwRead, fsRead, 'fs.readFile'));
  } finally {
    await agent.close();
    await gw.close();
    await fs.rm(stateDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
