// hydrate: validate a bundle while extracting it into private staging beside a destination that must not exist,
// then publish with one atomic rename (spec §8). A failure at any point leaves the destination absent and removes
// the staging; a crash leaves only authenticated staging that cleanupHydrationStaging removes.
import { promises as fsp } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { isWellFormedUnicode, type SessionBundleHydration, type SessionBundleLimits } from '../../protocol/bundle';
import { withDestinationLock } from './destinationLock';
import { SessionBundleError, toSessionBundleError } from './errors';
import { errnoOf, fsyncDirectory, lstatOrUndefined, sameInode } from './fsx';
import { cleanupStagingFor, createHydrationStaging, discardHydrationStaging, type HydrationStaging } from './hydrationStaging';
import { assertBundleSource } from './inspect';
import { assertSessionBundleLimits } from './limits';
import { readBundle, type BundleProgress, type BundleSource } from './reader';
import { type OnFileWritten, StagingWriter } from './stagingWriter';

export interface HydrateOptions {
  source: BundleSource;
  expectedSessionId: string;
  destinationRoot: string;
  limits: SessionBundleLimits;
  onProgress?: (p: BundleProgress) => void;
  /**
   * false: the files are not fsynced before publication — for a destination that does not outlive a crash (an
   * activation's throw-away sandbox, destroyed and made anew by a retry), where waiting for the disk buys nothing.
   * The staging's ownership protocol is kept either way. Default true (spec §8 step 5).
   */
  durable?: boolean;
  /**
   * Told of each file as it is written (its archive path, its identity once finished, and the SHA-256 of exactly the
   * bytes written), for a later pack's `knownDigests`. Meaningful only once the hydrate has succeeded.
   */
  onFileWritten?: OnFileWritten;
}

function exists(): SessionBundleError {
  return new SessionBundleError('destination_exists', 'the hydration destination already exists; it must not exist', { operation: 'hydrate' });
}

async function publish(staging: HydrationStaging, destinationRoot: string): Promise<void> {
  if ((await lstatOrUndefined(destinationRoot)) !== undefined) throw exists();
  const st = await lstatOrUndefined(staging.stagingPath);
  if (st === undefined || !st.isDirectory() || !sameInode(st, staging)) {
    throw new SessionBundleError('source_changed', 'the hydration staging directory changed before publication', { operation: 'hydrate' });
  }
  await fsp.rename(staging.stagingPath, destinationRoot);
  await fsp.unlink(staging.ownerPath);
  await fsyncDirectory(staging.parent);
}

export async function hydrateSessionBundle(options: HydrateOptions): Promise<SessionBundleHydration> {
  const source = assertBundleSource(options.source);
  const limits = assertSessionBundleLimits(options.limits);
  const expectedSessionId = options.expectedSessionId;
  if (typeof expectedSessionId !== 'string' || expectedSessionId === '' || !isWellFormedUnicode(expectedSessionId)) {
    throw new TypeError('expectedSessionId must be a non-empty, well-formed Unicode string');
  }
  if (typeof options.destinationRoot !== 'string' || options.destinationRoot === '') throw new TypeError('destinationRoot must be a non-empty path');
  const destinationRoot = resolve(options.destinationRoot);
  const parent = dirname(destinationRoot);
  const name = basename(destinationRoot);
  try {
    const parentStat = await fsp.stat(parent).catch((err: unknown) => {
      throw new SessionBundleError('io_failure', `the destination's parent directory is unusable (${errnoOf(err) ?? 'error'})`, { operation: 'hydrate' });
    });
    if (!parentStat.isDirectory()) throw new SessionBundleError('io_failure', "the destination's parent is not a directory", { operation: 'hydrate' });
    return await withDestinationLock(destinationRoot, 'hydrate', async () => {
      await cleanupStagingFor(parent, name);
      if ((await lstatOrUndefined(destinationRoot)) !== undefined) throw exists();
      const staging = await createHydrationStaging(parent, name);
      const writer = new StagingWriter(staging.stagingPath, expectedSessionId, options.durable !== false, options.onFileWritten);
      try {
        const inspection = await readBundle(source, limits, 'hydrate', writer, options.onProgress);
        await writer.drain();
        await publish(staging, destinationRoot);
        return {
          ...inspection,
          destinationRoot,
          stateRoot: join(destinationRoot, 'state'),
          workspaceRoot: join(destinationRoot, 'workspace'),
        };
      } catch (err) {
        await writer.abort();
        await discardHydrationStaging(staging).catch(() => undefined);
        throw err;
      }
    });
  } catch (err) {
    throw toSessionBundleError(err, 'hydrate');
  }
}
