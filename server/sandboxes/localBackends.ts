// The backends of the local runtime on this machine: the local ones (process, bubblewrap) and
// OpenSandbox, whose sandboxes live on an OpenSandbox server (it lives here, not in server/local,
// because the local runtime knows backends only through their interface).
import { defaultBackends, type BackendRegistry } from '../local/backends';
import { OpenSandboxBackend } from './opensandbox/opensandboxBackend';

export function localBackends(stateDir: string, env: NodeJS.ProcessEnv = process.env): BackendRegistry {
  const all = new Map(defaultBackends());
  const opensandbox = new OpenSandboxBackend({ stateDir, env });
  all.set(opensandbox.name, opensandbox);
  return all;
}
