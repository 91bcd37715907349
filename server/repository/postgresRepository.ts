// The same SessionRepository contract on PostgreSQL (`pg`), for teams and for more than one machine.
// Records are rows holding the engine's zod-checked records as jsonb; each write is one
// transaction that locks the Session row (SELECT … FOR UPDATE), so the CAS check and the head
// move are atomic; reads use a REPEATABLE READ snapshot. Configured by a connection string:
// SANDBOX_SESSIONS_REPOSITORY=postgres://user@host:5432/db[?schema=name].
import pg from 'pg';
import type { Pool, PoolClient } from 'pg';
import type { z } from 'zod';
import type { ImmutableObjectRef, StoredSessionCheckpoint } from '../../protocol/repository';
import { admitStoredCheckpoint } from './checkpoint';
import type { SessionRepository } from './contract';
import { RepositoryEngine } from './engine';
import { SessionRepositoryError } from './errors';
import { PostgresObjectStore } from './postgresObjectStore';
import { migrate, quoteIdent } from './postgresSchema';
import {
  type ActivationRecord,
  ActivationRecordSchema,
  type CommitReceipt,
  CommitReceiptSchema,
  type ForkRecord,
  ForkRecordSchema,
  type RevisionRecord,
  RevisionRecordSchema,
  type SessionLease,
  SessionLeaseSchema,
  type SessionRecord,
  SessionRecordSchema,
  type Tombstone,
  TombstoneSchema,
  FINISHED_ACTIVATION_STATES,
} from './records';
import { retentionPolicy } from './retention';
import type { RepositoryReader, RepositoryStorage, RepositoryWriter } from './storage';

export const DEFAULT_POSTGRES_SCHEMA = 'sandbox_sessions';

export interface PostgresRepositoryOptions {
  connectionString: string;
  /** Defaults to the URL's `schema` parameter, else `sandbox_sessions`. */
  schema?: string;
  keepRevisions?: number;
  gcGraceMs?: number;
  /** Finished activations remembered per Session (default 256; retention.ts). */
  finishedActivationsKept?: number;
  /** Pool size (default 10). */
  maxConnections?: number;
  connectTimeoutMs?: number;
}

/** Transient failures after which a write transaction is simply re-run. */
const RETRYABLE = new Set(['40001', '40P01', '23505']);
const MAX_WRITE_ATTEMPTS = 6;

export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}

/** Splits our own `schema` parameter off the URL (pg would otherwise see an unknown option). */
export function parsePostgresUrl(connectionString: string): { connectionString: string; schema: string | undefined } {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new TypeError('the repository connection string is not a valid postgres:// URL');
  }
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  return { connectionString: url.toString(), schema };
}

/** The URL with its password replaced, for logs and people. */
export function redactConnectionString(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'postgres://…';
  }
}

export async function openPostgresSessionRepository(options: PostgresRepositoryOptions): Promise<SessionRepository> {
  const policy = retentionPolicy(options);
  const parsed = parsePostgresUrl(options.connectionString);
  const schema = options.schema ?? parsed.schema ?? DEFAULT_POSTGRES_SCHEMA;
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new TypeError('schema must be a lower-case SQL identifier (a-z, 0-9, _)');
  const pool = new pg.Pool({
    connectionString: parsed.connectionString,
    max: options.maxConnections ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMillis: 10_000,
  });
  // An idle client's error (server restart) must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  try {
    await migrate(pool, schema);
  } catch (err) {
    await pool.end().catch(() => undefined);
    if (err instanceof SessionRepositoryError) throw err;
    throw new SessionRepositoryError('io_failure', `cannot open the postgres repository ${redactConnectionString(parsed.connectionString)}: ${(err as Error).message}`, { cause: err });
  }
  return new RepositoryEngine(new PostgresStorage(pool, quoteIdent(schema)), policy);
}

function parseRecord<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new SessionRepositoryError('integrity_mismatch', `repository row for ${what} is malformed (${parsed.error.issues[0]?.message ?? 'invalid'}); refusing to use it`);
  }
  return parsed.data;
}

class PostgresStorage implements RepositoryStorage {
  readonly kind = 'postgres' as const;
  readonly verifiesInsideWrite = true;
  readonly objects: PostgresObjectStore;

  constructor(
    private readonly pool: Pool,
    private readonly S: string,
  ) {
    this.objects = new PostgresObjectStore(pool, S);
  }

  async read<T>(fn: (reader: RepositoryReader) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const result = await fn(new PostgresRecords(client, this.S, this.objects, false));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async write<T>(fn: (writer: RepositoryWriter) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await client.query('BEGIN');
          const result = await fn(new PostgresRecords(client, this.S, this.objects, true));
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          const code = pgCode(err);
          if (code !== undefined && RETRYABLE.has(code) && attempt < MAX_WRITE_ATTEMPTS) continue;
          if (code === '23503') {
            throw new SessionRepositoryError('object_not_found', 'a checkpoint object disappeared before the commit (garbage-collected); publish the checkpoint again and retry', { cause: err });
          }
          throw err;
        }
      }
    } finally {
      client.release();
    }
  }

  async collectGarbage(candidates: string[] | 'all', graceMs: number): Promise<number> {
    const S = this.S;
    const unreferenced = `NOT EXISTS (SELECT 1 FROM ${S}.revisions r WHERE r.manifest_object = o.object_id OR r.bundle_object = o.object_id)
      AND NOT EXISTS (SELECT 1 FROM ${S}.forks f WHERE f.manifest_object = o.object_id OR f.bundle_object = o.object_id)`;
    const oldEnough = `o.touched_at <= now() - ($1::bigint * interval '1 millisecond')`;
    // The candidates, and the objects released earlier while too young (gc_pending, as the file adapter's gc-pending/).
    const { rows } =
      candidates === 'all'
        ? await this.pool.query<{ object_id: string; old: boolean }>(`SELECT o.object_id, ${oldEnough} AS old FROM ${S}.objects o WHERE ${unreferenced}`, [graceMs])
        : await this.pool.query<{ object_id: string; old: boolean }>(
            `SELECT o.object_id, ${oldEnough} AS old FROM ${S}.objects o
              WHERE (o.object_id = ANY($2::text[]) OR o.object_id IN (SELECT object_id FROM ${S}.gc_pending)) AND ${unreferenced}`,
            [graceMs, candidates],
          );
    let deleted = 0;
    for (const { object_id, old } of rows) {
      if (!old) {
        await this.pool.query(`INSERT INTO ${S}.gc_pending (object_id) VALUES ($1) ON CONFLICT DO NOTHING`, [object_id]);
        continue;
      }
      try {
        // Re-checked at delete time; a commit that references the object concurrently holds a key
        // share lock on it, and the foreign keys refuse the delete (23503) — then it stays.
        const res = await this.pool.query(`DELETE FROM ${S}.objects o WHERE o.object_id = $2 AND ${unreferenced} AND ${oldEnough}`, [graceMs, object_id]);
        deleted += res.rowCount ?? 0;
      } catch (err) {
        if (pgCode(err) !== '23503') throw err;
      }
    }
    // Entries whose object is gone, or referenced again, are done.
    await this.pool.query(`DELETE FROM ${S}.gc_pending p WHERE NOT EXISTS (SELECT 1 FROM ${S}.objects o WHERE o.object_id = p.object_id AND ${unreferenced})`);
    return deleted;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code)
    ? err.code
    : undefined;
}

class PostgresRecords implements RepositoryWriter {
  constructor(
    private readonly client: PoolClient,
    private readonly S: string,
    private readonly objects: PostgresObjectStore,
    private readonly forUpdate: boolean,
  ) {}

  private async one<S extends z.ZodType>(schema: S, what: string, sql: string, values: unknown[]): Promise<z.infer<S> | undefined> {
    const { rows } = await this.client.query<{ record: unknown }>(sql, values);
    return rows[0] === undefined ? undefined : parseRecord(schema, rows[0].record, what);
  }

  private get lock(): string {
    return this.forUpdate ? ' FOR UPDATE' : '';
  }

  getSession(sessionId: string): Promise<SessionRecord | undefined> {
    return this.one(SessionRecordSchema, `session ${sessionId}`, `SELECT record FROM ${this.S}.sessions WHERE session_id = $1${this.lock}`, [sessionId]);
  }
  getTombstone(sessionId: string): Promise<Tombstone | undefined> {
    return this.one(TombstoneSchema, `deleted session ${sessionId}`, `SELECT record FROM ${this.S}.tombstones WHERE session_id = $1`, [sessionId]);
  }
  getRevision(sessionId: string, revision: number): Promise<RevisionRecord | undefined> {
    return this.one(RevisionRecordSchema, `revision ${sessionId}@r${revision}`, `SELECT record FROM ${this.S}.revisions WHERE session_id = $1 AND revision = $2`, [
      sessionId,
      revision,
    ]);
  }
  getReceipt(sessionId: string, commitId: string): Promise<CommitReceipt | undefined> {
    return this.one(CommitReceiptSchema, `commit ${commitId}`, `SELECT record FROM ${this.S}.commit_receipts WHERE session_id = $1 AND commit_id = $2`, [
      sessionId,
      commitId,
    ]);
  }
  getFork(forkId: string): Promise<ForkRecord | undefined> {
    return this.one(ForkRecordSchema, `fork ${forkId}`, `SELECT record FROM ${this.S}.forks WHERE fork_id = $1${this.lock}`, [forkId]);
  }
  async listSessions(): Promise<SessionRecord[]> {
    const { rows } = await this.client.query<{ record: unknown }>(`SELECT record FROM ${this.S}.sessions ORDER BY session_id`);
    return rows.map((r) => parseRecord(SessionRecordSchema, r.record, 'a session'));
  }
  async listRevisions(sessionId: string): Promise<RevisionRecord[]> {
    const { rows } = await this.client.query<{ record: unknown }>(`SELECT record FROM ${this.S}.revisions WHERE session_id = $1 ORDER BY revision`, [sessionId]);
    return rows.map((r) => parseRecord(RevisionRecordSchema, r.record, `a revision of ${sessionId}`));
  }

  getActivation(sessionId: string, activationId: string): Promise<ActivationRecord | undefined> {
    return this.one(
      ActivationRecordSchema,
      `activation ${activationId}`,
      `SELECT record FROM ${this.S}.activations WHERE session_id = $1 AND activation_id = $2${this.lock}`,
      [sessionId, activationId],
    );
  }
  getLease(sessionId: string): Promise<SessionLease | undefined> {
    return this.one(SessionLeaseSchema, `the lease of ${sessionId}`, `SELECT record FROM ${this.S}.activation_leases WHERE session_id = $1${this.lock}`, [sessionId]);
  }
  async insertActivation(record: ActivationRecord): Promise<void> {
    // A concurrent insert of the same key fails with 23505 and the whole transaction is re-run.
    await this.client.query(`INSERT INTO ${this.S}.activations (session_id, activation_id, record) VALUES ($1, $2, $3)`, [
      record.sessionId,
      record.activationId,
      JSON.stringify(record),
    ]);
  }
  async updateActivation(record: ActivationRecord): Promise<void> {
    await this.client.query(`UPDATE ${this.S}.activations SET record = $3 WHERE session_id = $1 AND activation_id = $2`, [
      record.sessionId,
      record.activationId,
      JSON.stringify(record),
    ]);
  }
  async insertLease(record: SessionLease): Promise<void> {
    await this.client.query(`INSERT INTO ${this.S}.activation_leases (session_id, record) VALUES ($1, $2)`, [record.sessionId, JSON.stringify(record)]);
  }
  async updateLease(record: SessionLease): Promise<void> {
    await this.client.query(`UPDATE ${this.S}.activation_leases SET record = $2 WHERE session_id = $1`, [record.sessionId, JSON.stringify(record)]);
  }
  async deleteLease(sessionId: string): Promise<void> {
    await this.client.query(`DELETE FROM ${this.S}.activation_leases WHERE session_id = $1`, [sessionId]);
  }
  async dropFinishedActivations(sessionId: string, keep: number): Promise<number> {
    // The same rule as records.ts forgettableActivation / newestActivationFirst, in SQL.
    const res = await this.client.query(
      `DELETE FROM ${this.S}.activations WHERE session_id = $1 AND activation_id IN (
         SELECT activation_id FROM ${this.S}.activations
          WHERE session_id = $1 AND record->>'state' = ANY($3::text[])
          ORDER BY record->>'updatedAt' COLLATE "C" DESC, activation_id COLLATE "C" DESC OFFSET $2)`,
      [sessionId, keep, [...FINISHED_ACTIVATION_STATES]],
    );
    return res.rowCount ?? 0;
  }

  async insertSession(record: SessionRecord): Promise<void> {
    await this.client.query(`INSERT INTO ${this.S}.sessions (session_id, record) VALUES ($1, $2)`, [record.sessionId, JSON.stringify(record)]);
  }
  async updateSession(record: SessionRecord): Promise<void> {
    const res = await this.client.query(`UPDATE ${this.S}.sessions SET record = $2 WHERE session_id = $1`, [record.sessionId, JSON.stringify(record)]);
    if (res.rowCount !== 1) throw new SessionRepositoryError('session_not_found', `session ${record.sessionId} disappeared during the commit`);
  }
  async insertRevision(record: RevisionRecord): Promise<void> {
    await this.client.query(
      `INSERT INTO ${this.S}.revisions (session_id, revision, manifest_object, bundle_object, record) VALUES ($1, $2, $3, $4, $5)`,
      [
        record.sessionId,
        record.revision,
        this.objects.objectIdOf(record.checkpoint.manifest),
        this.objects.objectIdOf(record.checkpoint.value.compatibilityBundle),
        JSON.stringify(record),
      ],
    );
  }
  async insertReceipt(record: CommitReceipt): Promise<void> {
    const revision = Number(record.result.ref.revision.slice(1));
    await this.client.query(`INSERT INTO ${this.S}.commit_receipts (session_id, commit_id, revision, record) VALUES ($1, $2, $3, $4)`, [
      record.sessionId,
      record.commitId,
      revision,
      JSON.stringify(record),
    ]);
  }
  async insertFork(record: ForkRecord): Promise<void> {
    await this.client.query(
      `INSERT INTO ${this.S}.forks (fork_id, target_session_id, manifest_object, bundle_object, record) VALUES ($1, $2, $3, $4, $5)`,
      [
        record.forkId,
        record.targetSessionId,
        this.objects.objectIdOf(record.sourceCheckpoint.manifest),
        this.objects.objectIdOf(record.sourceCheckpoint.value.compatibilityBundle),
        JSON.stringify(record),
      ],
    );
  }
  async updateFork(record: ForkRecord): Promise<void> {
    await this.client.query(`UPDATE ${this.S}.forks SET record = $2 WHERE fork_id = $1`, [record.forkId, JSON.stringify(record)]);
  }
  async dropRevisionsBelow(sessionId: string, keepFrom: number): Promise<RevisionRecord[]> {
    const { rows } = await this.client.query<{ record: unknown }>(
      `DELETE FROM ${this.S}.revisions WHERE session_id = $1 AND revision < $2 RETURNING record`,
      [sessionId, keepFrom],
    );
    return rows.map((r) => parseRecord(RevisionRecordSchema, r.record, `a revision of ${sessionId}`));
  }
  async deleteSession(sessionId: string, tombstone: Tombstone): Promise<RevisionRecord[]> {
    const { rows } = await this.client.query<{ record: unknown }>(`DELETE FROM ${this.S}.revisions WHERE session_id = $1 RETURNING record`, [sessionId]);
    await this.client.query(`DELETE FROM ${this.S}.sessions WHERE session_id = $1`, [sessionId]);
    await this.client.query(`INSERT INTO ${this.S}.tombstones (session_id, record) VALUES ($1, $2)`, [sessionId, JSON.stringify(tombstone)]);
    return rows.map((r) => parseRecord(RevisionRecordSchema, r.record, `a revision of ${sessionId}`));
  }
  async verifyCheckpoint(checkpoint: StoredSessionCheckpoint): Promise<void> {
    admitStoredCheckpoint(checkpoint);
    await this.objects.assertReadableWith(this.client, checkpoint.manifest);
    await this.objects.assertReadableWith(this.client, checkpoint.value.compatibilityBundle);
  }
  async requireObjectsPresent(refs: ImmutableObjectRef[]): Promise<void> {
    const ids = refs.map((r) => this.objects.objectIdOf(r));
    const { rows } = await this.client.query<{ object_id: string; bytes: string }>(
      `SELECT object_id, bytes::text AS bytes FROM ${this.S}.objects WHERE object_id = ANY($1::text[]) FOR KEY SHARE`,
      [ids],
    );
    const found = new Map(rows.map((r) => [r.object_id, Number(r.bytes)]));
    refs.forEach((ref, i) => {
      const bytes = found.get(ids[i] ?? '');
      if (bytes === undefined) throw new SessionRepositoryError('object_not_found', `object ${ref.objectRef} disappeared before the commit (garbage-collected); publish the checkpoint again and retry`);
      if (bytes !== ref.bytes) throw new SessionRepositoryError('integrity_mismatch', `object ${ref.objectRef} is stored with ${bytes} bytes, expected ${ref.bytes}`);
    });
  }
}

