// The postgres adapter's versioned migrations: applied once on open even when several servers open
// the same database at the same moment; a database migrated by a newer version is refused.
import assert from 'node:assert/strict';
import pg from 'pg';
import { isSessionRepositoryError } from '../../../server/repository/errors';
import { openPostgresSessionRepository, parsePostgresUrl } from '../../../server/repository/postgresRepository';
import { LATEST_SCHEMA_VERSION } from '../../../server/repository/postgresSchema';
import { type PostgresServer, startPostgres } from '../../fixtures/postgres';

describe('postgres repository: schema migrations', function () {
  this.timeout(60_000);
  let server: PostgresServer | undefined;
  let admin: pg.Pool;
  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
    admin = new pg.Pool({ connectionString: server.url(), max: 2 });
  });
  after(async function () {
    this.timeout(60_000);
    await admin?.end();
    await server?.stop();
  });

  it('applies every migration exactly once when 6 servers open the same schema concurrently', async () => {
    const repos = await Promise.all(Array.from({ length: 6 }, () => openPostgresSessionRepository({ connectionString: server!.url('concurrent') })));
    await Promise.all(repos.map((r) => r.close()));
    const { rows } = await admin.query<{ version: number }>('SELECT version FROM concurrent.schema_migrations ORDER BY version');
    assert.deepEqual(
      rows.map((r) => r.version),
      Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1),
    );
    // Reopening applies nothing and keeps the data.
    const again = await openPostgresSessionRepository({ connectionString: server!.url('concurrent') });
    assert.deepEqual(await again.listSessions(), []);
    await again.close();
  });

  it('refuses a schema migrated by a newer sandbox-sessions, with an upgrade hint', async () => {
    const repo = await openPostgresSessionRepository({ connectionString: server!.url('newer') });
    await repo.close();
    await admin.query(`INSERT INTO newer.schema_migrations (version, name) VALUES (${LATEST_SCHEMA_VERSION + 1}, 'from the future')`);
    await assert.rejects(openPostgresSessionRepository({ connectionString: server!.url('newer') }), (err: unknown) => {
      return isSessionRepositoryError(err, 'io_failure') && /upgrade sandbox-sessions/.test(err.message);
    });
  });

  it('reports an unreachable server as io_failure without the password', async () => {
    const url = `postgres://user:secret-pw@127.0.0.1:1/db`;
    await assert.rejects(openPostgresSessionRepository({ connectionString: url, connectTimeoutMs: 2_000 }), (err: unknown) => {
      return isSessionRepositoryError(err, 'io_failure') && !err.message.includes('secret-pw') && err.message.includes('127.0.0.1:1');
    });
  });

  it('takes the schema from ?schema= and keeps the rest of the URL for pg', () => {
    assert.deepEqual(parsePostgresUrl('postgres://u@h:5432/db?schema=team_a&sslmode=disable'), {
      connectionString: 'postgres://u@h:5432/db?sslmode=disable',
      schema: 'team_a',
    });
  });
});
