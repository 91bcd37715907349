// The postgres adapter's schema, as versioned migrations applied on open under an advisory lock
// (several servers may open the same database at once). A database migrated by a newer version is
// refused rather than misread. Later features (e.g. the activation dedupe table) append a migration.
import type { Pool, PoolClient } from 'pg';
import { SessionRepositoryError } from './errors';

export interface Migration {
  version: number;
  name: string;
  /** SQL statements; `S` is the quoted schema name. */
  statements: (S: string) => string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'objects, sessions, revisions, commit receipts, forks, tombstones',
    statements: (S) => [
      `CREATE TABLE ${S}.objects (
         object_id text PRIMARY KEY CHECK (object_id ~ '^[0-9a-f]{64}$'),
         digest text NOT NULL,
         media_type text NOT NULL,
         bytes bigint NOT NULL CHECK (bytes >= 0),
         chunk_size integer NOT NULL CHECK (chunk_size > 0),
         touched_at timestamptz NOT NULL DEFAULT now())`,
      `CREATE TABLE ${S}.object_chunks (
         object_id text NOT NULL REFERENCES ${S}.objects (object_id) ON DELETE CASCADE,
         seq integer NOT NULL CHECK (seq >= 0),
         data bytea NOT NULL,
         PRIMARY KEY (object_id, seq))`,
      // Bundles are zstd-compressed already: store chunks out of line without pglz.
      `ALTER TABLE ${S}.object_chunks ALTER COLUMN data SET STORAGE EXTERNAL`,
      `CREATE TABLE ${S}.sessions (
         session_id text PRIMARY KEY,
         record jsonb NOT NULL)`,
      `CREATE TABLE ${S}.revisions (
         session_id text NOT NULL REFERENCES ${S}.sessions (session_id) ON DELETE CASCADE,
         revision integer NOT NULL CHECK (revision >= 1),
         manifest_object text NOT NULL REFERENCES ${S}.objects (object_id),
         bundle_object text NOT NULL REFERENCES ${S}.objects (object_id),
         record jsonb NOT NULL,
         PRIMARY KEY (session_id, revision))`,
      `CREATE INDEX revisions_manifest_object ON ${S}.revisions (manifest_object)`,
      `CREATE INDEX revisions_bundle_object ON ${S}.revisions (bundle_object)`,
      `CREATE TABLE ${S}.commit_receipts (
         session_id text NOT NULL,
         commit_id text NOT NULL,
         revision integer NOT NULL,
         record jsonb NOT NULL,
         PRIMARY KEY (session_id, commit_id),
         FOREIGN KEY (session_id, revision) REFERENCES ${S}.revisions (session_id, revision) ON DELETE CASCADE)`,
      `CREATE TABLE ${S}.forks (
         fork_id text PRIMARY KEY,
         target_session_id text NOT NULL,
         manifest_object text NOT NULL REFERENCES ${S}.objects (object_id),
         bundle_object text NOT NULL REFERENCES ${S}.objects (object_id),
         record jsonb NOT NULL)`,
      `CREATE INDEX forks_manifest_object ON ${S}.forks (manifest_object)`,
      `CREATE INDEX forks_bundle_object ON ${S}.forks (bundle_object)`,
      `CREATE TABLE ${S}.tombstones (
         session_id text PRIMARY KEY,
         record jsonb NOT NULL)`,
    ],
  },
  {
    version: 2,
    name: 'activation store (dedupe table) and per-session activation leases',
    statements: (S) => [
      // Not tied to sessions: the first activation of a Session runs before the Session exists.
      `CREATE TABLE ${S}.activations (
         session_id text NOT NULL,
         activation_id text NOT NULL,
         record jsonb NOT NULL,
         PRIMARY KEY (session_id, activation_id))`,
      `CREATE TABLE ${S}.activation_leases (
         session_id text PRIMARY KEY,
         record jsonb NOT NULL)`,
    ],
  },
  {
    version: 3,
    name: 'objects released while too young to collect (collected by a later commit)',
    statements: (S) => [
      // No foreign key: an entry outlives its object for a moment, and is dropped by the next collection.
      `CREATE TABLE ${S}.gc_pending (object_id text PRIMARY KEY)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Brings the schema to LATEST_SCHEMA_VERSION; returns the versions applied now. */
export async function migrate(pool: Pool, schema: string): Promise<number[]> {
  const S = quoteIdent(schema);
  const client: PoolClient = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`sandbox-sessions:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${S}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${S}.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${S}.schema_migrations ORDER BY version`);
    const applied = new Set(rows.map((r) => r.version));
    const newest = Math.max(0, ...applied);
    if (newest > LATEST_SCHEMA_VERSION) {
      throw new SessionRepositoryError(
        'io_failure',
        `the repository schema ${schema} is at version ${newest}, newer than this sandbox-sessions supports (${LATEST_SCHEMA_VERSION}); upgrade sandbox-sessions`,
      );
    }
    const now: number[] = [];
    for (const m of MIGRATIONS) {
      if (applied.has(m.version)) continue;
      for (const sql of m.statements(S)) await client.query(sql);
      await client.query(`INSERT INTO ${S}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      now.push(m.version);
    }
    await client.query('COMMIT');
    return now;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
