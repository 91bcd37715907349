// The credential canary (seed 000, validation step 6): secrets injected into an activation's env
// and config root reach the agent (it reports their sha256) but appear nowhere in the repository —
// every stored object's bytes, raw and zstd-decompressed, and every record — for the file adapter
// and PostgreSQL. A positive control (an agent that leaks its key into state) proves the scan finds
// what is there.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import pg from 'pg';
import type { ActivationRunRequest } from '../../../protocol/activation';
import { ActivationRunner } from '../../../server/activation/runner';
import type { SessionRepository } from '../../../server/repository/contract';
import { openFileSessionRepository } from '../../../server/repository/fileRepository';
import { openPostgresSessionRepository } from '../../../server/repository/postgresRepository';
import { type ActivationWorld, agentCommand, createActivationWorld, message, quietLogger } from '../../fixtures/activation/harness';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

/** Where `needle` occurs in one stored blob: in its raw bytes, or in its decompressed bytes (bundles are zstd). */
function findIn(name: string, bytes: Buffer, needles: string[]): string[] {
  const hits: string[] = [];
  const views: [string, Buffer][] = [[name, bytes]];
  if (bytes.subarray(0, 4).equals(ZSTD_MAGIC)) views.push([`${name} (decompressed)`, zlib.zstdDecompressSync(bytes)]);
  for (const [where, view] of views) for (const n of needles) if (view.includes(Buffer.from(n, 'utf8'))) hits.push(`${n.slice(0, 12)}… in ${where}`);
  return hits;
}

function scanFileRepository(root: string, needles: string[]): { hits: string[]; blobs: number } {
  const hits: string[] = [];
  let blobs = 0;
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.isFile()) {
        blobs += 1;
        hits.push(...findIn(path.relative(root, p), fs.readFileSync(p), needles));
      }
    }
  };
  visit(root);
  return { hits, blobs };
}

async function scanPostgres(url: string, schema: string, needles: string[]): Promise<{ hits: string[]; blobs: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const hits: string[] = [];
    let blobs = 0;
    const objects = await client.query<{ object_id: string }>(`SELECT object_id FROM "${schema}".objects`);
    for (const { object_id } of objects.rows) {
      const chunks = await client.query<{ data: Buffer }>(`SELECT data FROM "${schema}".object_chunks WHERE object_id = $1 ORDER BY seq`, [object_id]);
      blobs += 1;
      hits.push(...findIn(`object ${object_id}`, Buffer.concat(chunks.rows.map((r) => r.data)), needles));
    }
    for (const table of ['sessions', 'revisions', 'commit_receipts', 'forks', 'tombstones', 'activations', 'activation_leases']) {
      const rows = await client.query<{ record: unknown }>(`SELECT record FROM "${schema}".${table}`);
      for (const r of rows.rows) {
        blobs += 1;
        hits.push(...findIn(`${table} row`, Buffer.from(JSON.stringify(r.record), 'utf8'), needles));
      }
    }
    return { hits, blobs };
  } finally {
    await client.end();
  }
}

function canaries() {
  const envKey = `sk-canary-env-${randomBytes(12).toString('hex')}`;
  const fileKey = `canary-file-${randomBytes(12).toString('hex')}`;
  return { envKey, fileKey, needles: [envKey, fileKey] };
}

function runnerFor(world: ActivationWorld, repo: SessionRepository, keys: { envKey: string; fileKey: string }): ActivationRunner {
  return new ActivationRunner({
    repository: repo,
    providers: { local: world.provider },
    log: quietLogger(),
    command: agentCommand(world.counterFile),
    scratchParent: world.dir,
    credentials: () => ({
      env: { AGENT_API_KEY: keys.envKey },
      configFiles: { 'credentials.json': JSON.stringify({ apiKey: keys.fileKey }), 'agent.json': JSON.stringify({ model: 'canary-model' }) },
    }),
  });
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function exercise(runner: ActivationRunner, keys: { envKey: string; fileKey: string }, sessionId: string): Promise<void> {
  const requests: ActivationRunRequest[] = [message(sessionId, 'c1', 'use the key'), message(sessionId, 'c2', 'use it again'), message(sessionId, 'c3', '!block')];
  for (const r of requests) {
    const result = await runner.run(r);
    assert.equal(result.commit, 'committed', JSON.stringify(result));
  }
  const last = await runner.run(message(sessionId, 'c4', 'report'));
  const response = last.outcome?.response as { envCredentialSha256?: string; fileCredentialSha256?: string; model?: string };
  assert.equal(response.envCredentialSha256, sha(keys.envKey), 'the env credential reached the agent');
  assert.equal(response.fileCredentialSha256, sha(keys.fileKey), 'the config-root credential reached the agent');
  assert.equal(response.model, 'canary-model');
}

describe('credential canary: injected secrets never reach the repository', function () {
  this.timeout(120_000);
  let world: ActivationWorld;
  let server: PostgresServer | undefined;

  before(async function () {
    this.timeout(180_000);
    world = await createActivationWorld();
    server = await startPostgres();
  });
  after(async function () {
    this.timeout(60_000);
    await world?.dispose();
    await server?.stop();
  });

  it('file adapter: no object or record holds the env or config-root secret; a leaking agent is caught by the same scan', async () => {
    const keys = canaries();
    await exercise(runnerFor(world, world.repo, keys), keys, 'canary');
    const scan = scanFileRepository(world.repoRoot, keys.needles);
    assert.ok(scan.blobs >= 9, `scanned ${scan.blobs} blobs`);
    assert.deepEqual(scan.hits, []);

    // Positive control, in a repository of its own.
    const leakRoot = path.join(world.dir, 'leak-repository');
    const leakRepo = await openFileSessionRepository({ storageRoot: leakRoot });
    try {
      const leaked = await runnerFor(world, leakRepo, keys).run(message('leaky', 'l1', '!leak'));
      assert.equal(leaked.commit, 'committed');
      const control = scanFileRepository(leakRoot, keys.needles);
      assert.ok(control.hits.some((h) => h.includes('(decompressed)') && h.startsWith(keys.envKey.slice(0, 12))), JSON.stringify(control.hits));
    } finally {
      await leakRepo.close();
    }
  });

  it('postgres adapter: no object chunk or record row holds the env or config-root secret', async () => {
    if (!server) throw new Error('the PostgreSQL test server did not start');
    const keys = canaries();
    const schema = `canary_${process.pid}`;
    const repo = await openPostgresSessionRepository({ connectionString: server.url(schema) });
    try {
      await exercise(runnerFor(world, repo, keys), keys, 'canary-pg');
      const scan = await scanPostgres(server.url(), schema, keys.needles);
      assert.ok(scan.blobs >= 9, `scanned ${scan.blobs} blobs`);
      assert.deepEqual(scan.hits, []);
      const leaked = await runnerFor(world, repo, keys).run(message('leaky', 'l1', '!leak'));
      assert.equal(leaked.commit, 'committed');
      const control = await scanPostgres(server.url(), schema, keys.needles);
      assert.ok(control.hits.length > 0, 'the scan finds a leaked key');
    } finally {
      await repo.close();
    }
  });
});
