// Where the product keeps its things on this machine — the local runtime's records (state root),
// the session repository and the kubeconfig kruntimes reads — resolved ONCE, by the process a
// person starts (`npm start`, the CLI), and handed explicitly to every process the product starts:
// the editor (code-server runs with a HOME of its own), the companion server it spawns and the
// gateway daemon. No process may resolve these from its own HOME, or a window would look for
// sandboxes in a different state root than the one they were created in (docs/local-gateway.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultStateDir } from './local/stateRoot';
import { describeRepositoryLocation, resolveRepositoryLocation } from './repository/open';

export interface Locations {
  /** The local runtime's state root (records, workspaces, the gateway daemon's state file). */
  stateDir: string;
  /** The session repository: a directory or a postgres:// URL (may hold a password: never log it). */
  repository: string;
  /** The kubeconfig path list kruntimes reads, when there is one to read. */
  kubeconfig?: string | undefined;
}

/** The locations as this process's environment defines them (explicit variables, else XDG, else HOME). */
export function resolveLocations(env: NodeJS.ProcessEnv = process.env): Locations {
  const repository = resolveRepositoryLocation({ env });
  return {
    stateDir: defaultStateDir(env),
    repository: repository.kind === 'file' ? repository.storageRoot : repository.connectionString,
    kubeconfig: resolveKubeconfig(env),
  };
}

/** KUBECONFIG when set, else `~/.kube/config` of THIS process's HOME when it exists (as kubectl). */
function resolveKubeconfig(env: NodeJS.ProcessEnv): string | undefined {
  if (env.KUBECONFIG !== undefined && env.KUBECONFIG.trim() !== '') return env.KUBECONFIG;
  const home = env.HOME && path.isAbsolute(env.HOME) ? env.HOME : os.homedir();
  const file = path.join(home, '.kube', 'config');
  return fs.existsSync(file) ? file : undefined;
}

/** The environment variables that pin these locations in a child process, whatever its HOME. */
export function locationsEnv(locations: Locations): Record<string, string> {
  return {
    SANDBOX_SESSIONS_STATE_DIR: locations.stateDir,
    SANDBOX_SESSIONS_REPOSITORY: locations.repository,
    ...(locations.kubeconfig !== undefined ? { KUBECONFIG: locations.kubeconfig } : {}),
  };
}

/** One line per location, safe to print (a repository URL without its password). */
export function describeLocations(locations: Locations): string[] {
  return [
    `state root: ${locations.stateDir}`,
    `repository: ${describeRepositoryLocation(resolveRepositoryLocation({ location: locations.repository, env: {} }))}`,
    ...(locations.kubeconfig !== undefined ? [`kubeconfig: ${locations.kubeconfig}`] : []),
  ];
}
