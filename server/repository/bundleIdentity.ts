// Whose session a bundle is, checked before it is published for a create or commit. Maka's repository stores bytes
// and never looks (spec §9), but every later read of a revision — checkout into a sandbox, activation, fork,
// `bundle hydrate` — hydrates it as its session and refuses a bundle packed for another (identity_mismatch, §7): a
// commit to any other session would store a revision nobody can open. Only the manifest is read (the start of the
// stream). Asked for bundles made elsewhere (`session commit`, `sessions/import`); a save, a fork or an activation
// packs its bundle for the session it commits in the same call, so it is not asked again (checkpoint.ts).
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleErrorCode, type SessionBundleLimits } from '../../protocol/bundle';
import type { SessionRepositoryErrorCode } from '../../protocol/repository';
import { shellQuote } from '../../protocol/shellQuote';
import { SessionRepositoryError } from './errors';

/** Only the manifest is read: the people limits for it, and no cap on the sizes of the rest (the bundle's producer chose those). */
const MANIFEST_LIMITS: SessionBundleLimits = Object.freeze({
  ...DEFAULT_PEOPLE_LIMITS,
  maxCompressedBytes: Number.MAX_SAFE_INTEGER,
  maxDecompressedTarBytes: Number.MAX_SAFE_INTEGER,
});

/** A codec failure as the repository's code: the file is not a bundle it can read. */
function repositoryCodeOf(code: SessionBundleErrorCode): SessionRepositoryErrorCode {
  return code === 'io_failure' ? 'io_failure' : code === 'quota_exceeded' ? 'quota_exceeded' : 'integrity_mismatch';
}

/**
 * Refuses (`identity_mismatch`) a bundle whose manifest names another session than `sessionId`, and a file that is
 * not a readable Session Bundle (the codec's code as the repository's), before anything is published.
 */
export async function assertBundleIsForSession(bundlePath: string, sessionId: string): Promise<void> {
  // Loaded on use: `session list` and the other commands that never commit do not load the codec.
  const [{ readBundleManifest }, { isSessionBundleError }] = await Promise.all([import('../bundle/reader.js'), import('../bundle/errors.js')]);
  let found: string;
  try {
    found = (await readBundleManifest(bundlePath, MANIFEST_LIMITS, 'inspect')).envelope.sessionId;
  } catch (err) {
    if (!isSessionBundleError(err)) throw err;
    throw new SessionRepositoryError(
      repositoryCodeOf(err.code),
      `${bundlePath} cannot be committed to session ${JSON.stringify(sessionId)}: it is not a Session Bundle that can be read (${err.code}: ${err.message})`,
      { cause: err },
    );
  }
  if (found !== sessionId) {
    const [f, s] = [JSON.stringify(found), JSON.stringify(sessionId)];
    throw new SessionRepositoryError(
      'identity_mismatch',
      `the bundle ${bundlePath} was packed for session ${f}, not for session ${s}, so no one could open it as ${s}: ` +
        `commit it to session ${f}, or pack it again for ${s} (sandbox-sessions bundle pack … --session-id ${shellQuote(sessionId)})`,
    );
  }
}
