// Session repository benchmark (run: `npx tsx bench/repository.ts`). Measures, for the file
// adapter (on the OS temp dir, a real disk) and the postgres adapter (a private server with
// fsync on): commits per second of a 1 MB bundle — publish + CAS commit — with one writer and with
// 8 writers contending on one session; and checkout throughput of a 200 MB bundle (verify while
// copying, fsync) against a plain file copy (fs.copyFile + fsync) measured in the same run; each
// throughput figure is the median of 3 runs with a warm page cache.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { StoredSessionCheckpoint } from '../protocol/repository';
import { materializeSessionCheckpointV1, publishSessionCheckpointV1, type SessionBundleArtifactRef } from '../server/repository/checkpoint';
import type { SessionRepository } from '../server/repository/contract';
import { isSessionRepositoryError } from '../server/repository/errors';
import { openFileSessionRepository } from '../server/repository/fileRepository';
import { openPostgresSessionRepository } from '../server/repository/postgresRepository';
import { startPostgres } from '../test/fixtures/postgres';

const MB = 1024 * 1024;
const SINGLE_COMMITS = Number(process.env.BENCH_SINGLE_COMMITS ?? 60);
const CONTENDED_COMMITS = Number(process.env.BENCH_CONTENDED_COMMITS ?? 60);
const WRITERS = 8;
const BIG_BYTES = Number(process.env.BENCH_BIG_MB ?? 200) * MB;

function writeBundle(dir: string, name: string, bytes: number): SessionBundleArtifactRef {
  const file = path.join(dir, name);
  const hash = createHash('sha256');
  const fd = fs.openSync(file, 'w');
  for (let done = 0; done < bytes; ) {
    const chunk = randomBytes(Math.min(8 * MB, bytes - done));
    hash.update(chunk);
    fs.writeSync(fd, chunk);
    done += chunk.length;
  }
  fs.closeSync(fd);
  return { path: file, archiveDigest: `sha256:${hash.digest('hex')}`, compressedBytes: bytes };
}

const RUNS = 3;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** MB/s of `fn` over BIG_BYTES, median of RUNS runs (this machine is shared; single runs are noisy). */
async function throughput(fn: (run: number) => Promise<void>): Promise<number> {
  const rates: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const t = performance.now();
    await fn(run);
    rates.push(BIG_BYTES / MB / ((performance.now() - t) / 1000));
  }
  return median(rates);
}

function fsyncFile(file: string): void {
  const fd = fs.openSync(file, 'r');
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

/** One writer: publish a fresh 1 MB bundle and commit it, SINGLE_COMMITS times. */
async function singleWriter(repo: SessionRepository, bundles: SessionBundleArtifactRef[]): Promise<{ perSecond: number; commitOnlyPerSecond: number }> {
  const first = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: bundles[0]! });
  await repo.createSession({ sessionId: 'single', agentId: 'bench', checkpoint: first });
  let head = 'r1';
  const started = performance.now();
  for (let i = 0; i < SINGLE_COMMITS; i++) {
    const checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: bundles[(i + 1) % bundles.length]! });
    head = (await repo.commit({ sessionId: 'single', expectedRevision: head, checkpoint })).ref.revision;
  }
  const perSecond = SINGLE_COMMITS / ((performance.now() - started) / 1000);
  // The CAS step alone (checkpoint already published): what a commit costs beyond moving bytes.
  const cps: StoredSessionCheckpoint[] = [];
  for (let i = 0; i < 4; i++) cps.push(await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: bundles[i]! }));
  const casStarted = performance.now();
  for (let i = 0; i < SINGLE_COMMITS; i++) head = (await repo.commit({ sessionId: 'single', expectedRevision: head, checkpoint: cps[i % 4]! })).ref.revision;
  const commitOnlyPerSecond = SINGLE_COMMITS / ((performance.now() - casStarted) / 1000);
  return { perSecond, commitOnlyPerSecond };
}

/** 8 writers on one session: each loops checkout → publish its own bundle → commit; a loser re-checks out and retries. */
async function contendedWriters(repo: SessionRepository, bundles: SessionBundleArtifactRef[]): Promise<{ perSecond: number; conflicts: number }> {
  const first = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: bundles[0]! });
  await repo.createSession({ sessionId: 'contended', agentId: 'bench', checkpoint: first });
  let committed = 0;
  let conflicts = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (committed < CONTENDED_COMMITS) {
        const checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: bundles[next++ % bundles.length]! });
        for (;;) {
          const head = await repo.checkoutCurrent('contended');
          try {
            await repo.commit({ sessionId: 'contended', expectedRevision: head.ref.revision, checkpoint });
            committed++;
            break;
          } catch (err) {
            if (!isSessionRepositoryError(err, 'revision_conflict')) throw err;
            conflicts++;
          }
        }
      }
    }),
  );
  return { perSecond: committed / ((performance.now() - started) / 1000), conflicts };
}

async function bigCheckout(repo: SessionRepository, big: SessionBundleArtifactRef, outDir: string, label: string): Promise<{ materializeMBs: number; checkoutMBs: number }> {
  const checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: big });
  await repo.createSession({ sessionId: `big-${label}`, agentId: 'bench', checkpoint });
  const dest = (kind: string, run: number) => path.join(outDir, `${label}-${kind}-${run}`);
  const materializeMBs = await throughput(async (run) => {
    await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint, destination: dest('materialize', run), maxBytes: BIG_BYTES });
    fs.rmSync(dest('materialize', run));
  });
  const checkoutMBs = await throughput(async (run) => {
    const head = await repo.checkoutCurrent(`big-${label}`);
    await materializeSessionCheckpointV1({ objectStore: repo.objects, checkpoint: head.checkpoint, destination: dest('checkout', run), maxBytes: BIG_BYTES });
    fs.rmSync(dest('checkout', run));
  });
  return { materializeMBs, checkoutMBs };
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ss-bench-repo-'));
  const server = await startPostgres({ fsync: true });
  const opened: SessionRepository[] = [];
  try {
    console.log(`session repository benchmark — node ${process.version}, ${os.cpus().length} CPUs, work dir ${work}`);
    const bundles = Array.from({ length: 16 }, (_, i) => writeBundle(work, `b${i}.tar.zst`, MB));
    const adapters: [string, () => Promise<SessionRepository>][] = [
      ['file', () => openFileSessionRepository({ storageRoot: path.join(work, 'repository') })],
      ['postgres', () => openPostgresSessionRepository({ connectionString: server.url('bench'), maxConnections: 20 })],
    ];
    const results: Record<string, Record<string, number>> = {};
    for (const [name, open] of adapters) {
      const repo = await open();
      opened.push(repo);
      const single = await singleWriter(repo, bundles);
      const contended = await contendedWriters(repo, bundles);
      results[name] = {
        singleCommitsPerSec: single.perSecond,
        singleCasOnlyPerSec: single.commitOnlyPerSecond,
        contendedCommitsPerSec: contended.perSecond,
        contendedConflicts: contended.conflicts,
      };
      console.log(
        `${name.padEnd(8)} 1 MB bundle: 1 writer ${single.perSecond.toFixed(1)} commits/s (publish+commit), CAS alone ${single.commitOnlyPerSecond.toFixed(1)}/s; ` +
          `${WRITERS} writers ${contended.perSecond.toFixed(1)} commits/s (${contended.conflicts} revision_conflict retries over ${CONTENDED_COMMITS} commits)`,
      );
    }

    const big = writeBundle(work, 'big.tar.zst', BIG_BYTES);
    const copyDest = path.join(work, 'big-copy');
    const copyMBs = await throughput(async () => {
      fs.copyFileSync(big.path, copyDest);
      fsyncFile(copyDest);
      fs.rmSync(copyDest);
    });
    const streamCopyMBs = await throughput(async () => {
      await pipeline(fs.createReadStream(big.path, { highWaterMark: MB }), fs.createWriteStream(copyDest, { highWaterMark: MB }));
      fsyncFile(copyDest);
      fs.rmSync(copyDest);
    });
    console.log(`baseline ${BIG_BYTES / MB} MB: fs.copyFile+fsync ${copyMBs.toFixed(0)} MB/s; stream copy+fsync ${streamCopyMBs.toFixed(0)} MB/s`);
    for (const [i, [name]] of adapters.entries()) {
      const r = await bigCheckout(opened[i]!, big, work, name);
      results[name]!.materializeMBs = r.materializeMBs;
      results[name]!.checkoutMBs = r.checkoutMBs;
      console.log(
        `${name.padEnd(8)} ${BIG_BYTES / MB} MB: materialize (verify while copying) ${r.materializeMBs.toFixed(0)} MB/s = ${(r.materializeMBs / copyMBs).toFixed(2)}× copyFile, ` +
          `${(r.materializeMBs / streamCopyMBs).toFixed(2)}× stream copy; full checkout (re-verify both objects + materialize) ${r.checkoutMBs.toFixed(0)} MB/s = ${(r.checkoutMBs / copyMBs).toFixed(2)}× copyFile`,
      );
    }
    console.log(JSON.stringify({ copyMBs, streamCopyMBs, results }));
  } finally {
    for (const r of opened) await r.close().catch(() => undefined);
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
