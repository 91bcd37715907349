// Chooses the repository adapter from configuration: an explicit `--repository` value or
// SANDBOX_SESSIONS_REPOSITORY — a postgres:// URL selects PostgreSQL, anything else is a directory
// for the file adapter; unset means the embedded default under $XDG_DATA_HOME.
import path from 'node:path';
import type { SessionRepository } from './contract';
import { defaultFileRepositoryRoot, openFileSessionRepository } from './fileRepository';
import { isPostgresUrl, openPostgresSessionRepository, redactConnectionString } from './postgresRepository';

export interface OpenRepositoryOptions {
  /** A directory or a postgres:// URL; overrides the environment. */
  location?: string;
  env?: NodeJS.ProcessEnv;
  keepRevisions?: number;
  gcGraceMs?: number;
}

export type RepositoryLocation = { kind: 'file'; storageRoot: string } | { kind: 'postgres'; connectionString: string };

export function resolveRepositoryLocation(options: OpenRepositoryOptions = {}): RepositoryLocation {
  const env = options.env ?? process.env;
  const configured = options.location ?? env.SANDBOX_SESSIONS_REPOSITORY;
  if (configured === undefined || configured.trim() === '') return { kind: 'file', storageRoot: defaultFileRepositoryRoot(env) };
  if (isPostgresUrl(configured)) return { kind: 'postgres', connectionString: configured };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(configured)) {
    throw new TypeError(`unsupported repository location ${configured.split('://')[0]}://…; use a directory path or a postgres:// URL`);
  }
  return { kind: 'file', storageRoot: path.resolve(configured) };
}

/** Where the repository is, safe to show: the directory, or the URL without its password. */
export function describeRepositoryLocation(location: RepositoryLocation): string {
  return location.kind === 'file' ? location.storageRoot : redactConnectionString(location.connectionString);
}

/** Retention from SANDBOX_SESSIONS_KEEP_REVISIONS when not given explicitly. */
function keepRevisionsFrom(options: OpenRepositoryOptions): number | undefined {
  if (options.keepRevisions !== undefined) return options.keepRevisions;
  const raw = (options.env ?? process.env).SANDBOX_SESSIONS_KEEP_REVISIONS;
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`SANDBOX_SESSIONS_KEEP_REVISIONS must be an integer ≥ 1 (got ${JSON.stringify(raw)})`);
  return n;
}

export async function openSessionRepository(options: OpenRepositoryOptions = {}): Promise<SessionRepository> {
  const location = resolveRepositoryLocation(options);
  const common = {
    ...(keepRevisionsFrom(options) !== undefined ? { keepRevisions: keepRevisionsFrom(options) } : {}),
    ...(options.gcGraceMs !== undefined ? { gcGraceMs: options.gcGraceMs } : {}),
  };
  return location.kind === 'postgres'
    ? openPostgresSessionRepository({ connectionString: location.connectionString, ...common })
    : openFileSessionRepository({ storageRoot: location.storageRoot, ...common });
}
