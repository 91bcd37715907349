// Chooses the repository adapter from configuration: an explicit `--repository` value or
// SANDBOX_SESSIONS_REPOSITORY — a postgres:// URL selects PostgreSQL, anything else is a directory
// for the file adapter; unset means the embedded default under $XDG_DATA_HOME.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { SessionRepository } from './contract';
import { errnoCode } from './durableFs';
import { SessionRepositoryError } from './errors';
import { defaultFileRepositoryRoot, openFileSessionRepository } from './fileRepository';
import { isPostgresUrl, openPostgresSessionRepository, redactConnectionString } from './postgresRepository';

export interface OpenRepositoryOptions {
  /** A directory or a postgres:// URL; overrides the environment. */
  location?: string;
  env?: NodeJS.ProcessEnv;
  keepRevisions?: number;
  gcGraceMs?: number;
  /**
   * `false` (commands that only read): a repository directory given explicitly (`location` or the environment) must
   * exist — a mistyped path is refused (`repository_not_found`) rather than answered as an empty repository it
   * creates. The default location is not refused: before the first commit it is empty, which is the right answer.
   */
  createIfMissing?: boolean;
}

export type RepositoryLocation = { kind: 'file'; storageRoot: string } | { kind: 'postgres'; connectionString: string };

/** The location given explicitly, and where: the option (`--repository`), else the environment; undefined for the default. */
function configuredLocation(options: OpenRepositoryOptions): { value: string; from: 'option' | 'environment' } | undefined {
  if (options.location !== undefined && options.location.trim() !== '') return { value: options.location, from: 'option' };
  if (options.location !== undefined) return undefined;
  const fromEnv = (options.env ?? process.env).SANDBOX_SESSIONS_REPOSITORY;
  return fromEnv !== undefined && fromEnv.trim() !== '' ? { value: fromEnv, from: 'environment' } : undefined;
}

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

/** A file repository given explicitly must be a directory that exists (OpenRepositoryOptions.createIfMissing). */
async function requireExistingDirectory(storageRoot: string, given: { value: string; from: 'option' | 'environment' }): Promise<void> {
  const origin = given.from === 'option' ? `--repository ${given.value}` : `SANDBOX_SESSIONS_REPOSITORY=${given.value}`;
  const st = await fs.stat(storageRoot).catch((err: unknown) => {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw new SessionRepositoryError('io_failure', `cannot open the session repository ${storageRoot} (${origin}): ${(err as Error).message}`, { cause: err });
  });
  if (st === undefined) {
    throw new SessionRepositoryError(
      'repository_not_found',
      `there is no session repository at ${storageRoot} (${origin}): the directory does not exist. Check the path; ` +
        'the first `sandbox-sessions session commit` to a new repository creates it',
    );
  }
  if (!st.isDirectory()) {
    throw new SessionRepositoryError('repository_not_found', `there is no session repository at ${storageRoot} (${origin}): it is not a directory`);
  }
}

export async function openSessionRepository(options: OpenRepositoryOptions = {}): Promise<SessionRepository> {
  const location = resolveRepositoryLocation(options);
  const given = configuredLocation(options);
  if (options.createIfMissing === false && location.kind === 'file' && given !== undefined) await requireExistingDirectory(location.storageRoot, given);
  const common = {
    ...(keepRevisionsFrom(options) !== undefined ? { keepRevisions: keepRevisionsFrom(options) } : {}),
    ...(options.gcGraceMs !== undefined ? { gcGraceMs: options.gcGraceMs } : {}),
  };
  return location.kind === 'postgres'
    ? openPostgresSessionRepository({ connectionString: location.connectionString, ...common })
    : openFileSessionRepository({ storageRoot: location.storageRoot, ...common });
}
