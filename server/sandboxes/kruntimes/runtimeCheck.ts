// Whether a new sandbox's Runtime exists in its namespace, asked before its Run is created. The API
// server admits a Run naming any well-formed Runtime, and one the namespace lacks sits in Pending
// ("waiting for available runtime pods") until someone deletes it — so a misspelt `--runtime` would
// wait for nothing and leave a Run behind. Listing Runtimes needs RBAC `list runtimes`: a user without
// it gets the Run created unchecked (as New Sandbox takes a typed name when it cannot list them), with a
// warning that says so.
import type { Logger } from '../../log';
import { SandboxError } from '../provider';
import type { ClusterApi } from './clusterApi';

/** Refuses (`invalid_spec`, naming the namespace's Runtimes) a `runtime` that `namespace` does not have. */
export async function checkRuntimeExists(api: ClusterApi, namespace: string, runtime: string, log: Logger): Promise<void> {
  let names: string[];
  try {
    names = (await api.listRuntimes(namespace)).map((r) => r.metadata.name);
  } catch (err) {
    if (!(err instanceof SandboxError && err.code === 'cluster_forbidden')) throw err;
    log.warn(`cannot check that namespace ${namespace} of context ${api.context} has Runtime "${runtime}" (${err.message}); creating the Run unchecked: it waits in Pending if there is none`);
    return;
  }
  if (names.includes(runtime)) return;
  throw new SandboxError(
    'invalid_spec',
    `namespace ${namespace} of context ${api.context} has no Runtime "${runtime}"; its Runtimes: ${names.length > 0 ? names.sort().join(', ') : 'none (a cluster administrator installs them)'}`,
  );
}
