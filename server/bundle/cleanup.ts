// cleanupHydrationStaging: remove orphan staging left by a hydrate that crashed or was killed (spec §8 step 7),
// under the same destination lock hydrate holds, touching only staging its ownership records authenticate.
import { basename, dirname, resolve } from 'node:path';
import type { HydrationStagingCleanup } from '../../protocol/bundle';
import { withDestinationLock } from './destinationLock';
import { toSessionBundleError } from './errors';
import { cleanupStagingFor } from './hydrationStaging';

export async function cleanupHydrationStaging(options: { destinationRoot: string }): Promise<HydrationStagingCleanup> {
  if (typeof options?.destinationRoot !== 'string' || options.destinationRoot === '') throw new TypeError('destinationRoot must be a non-empty path');
  const destinationRoot = resolve(options.destinationRoot);
  try {
    const removed = await withDestinationLock(destinationRoot, 'cleanup', () => cleanupStagingFor(dirname(destinationRoot), basename(destinationRoot)));
    return { destinationRoot, ...removed };
  } catch (err) {
    throw toSessionBundleError(err, 'cleanup');
  }
}
