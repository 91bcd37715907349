// Where the local runtime keeps its records: `$SANDBOX_SESSIONS_STATE_DIR`, else
// `$XDG_STATE_HOME/sandbox-sessions`, else `~/.local/state/sandbox-sessions`. Every path the
// daemon and the CLI touch is derived here, so the layout is written down in one place.
import os from 'node:os';
import path from 'node:path';

export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.SANDBOX_SESSIONS_STATE_DIR;
  if (override) return path.resolve(override);
  const xdg = env.XDG_STATE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.local', 'state');
  return path.join(base, 'sandbox-sessions');
}

/** The record layout under one state root (DESIGN.md "server/local + server/gateway"). */
export class StateLayout {
  constructor(readonly root: string) {}
  get runsDir(): string {
    return path.join(this.root, 'runs');
  }
  runDir(uid: string): string {
    return path.join(this.runsDir, uid);
  }
  runFile(uid: string): string {
    return path.join(this.runDir(uid), 'run.json');
  }
  workspaceDir(uid: string): string {
    return path.join(this.runDir(uid), 'workspace');
  }
  /**
   * `$KRUNTIME_ARTIFACTS_DIR`: beside the workspace, so listings of the workspace show only
   * the user's files; commands reach it through the variable (as kruntimes with a repoURL).
   */
  artifactsDir(uid: string): string {
    return path.join(this.runDir(uid), 'artifacts');
  }
  execDir(uid: string): string {
    return path.join(this.runDir(uid), 'exec');
  }
  execFile(uid: string, operationId: string): string {
    return path.join(this.execDir(uid), `${operationId}.json`);
  }
  /** runtimed's log of the Run (kubelet CRI format, rotated to `runtimed.log.1`, …; server/local/containerLog.ts). */
  runLogFile(uid: string): string {
    return path.join(this.runDir(uid), 'log', 'runtimed.log');
  }
  get artifactStoreRoot(): string {
    return path.join(this.root, 'artifacts');
  }
  /** Session trees activations keep for the session's next activation (activation/keptSessionTrees.ts). */
  get keptSessionTreesDir(): string {
    return path.join(this.root, 'kept-sessions');
  }
  /** Sandboxes' opening snapshots, for "changed since opened" (sessions/openingSnapshots.ts). */
  get openingSnapshotsDir(): string {
    return path.join(this.root, 'opening-snapshots');
  }
  get gatewayStateFile(): string {
    return path.join(this.root, 'gateway.json');
  }
  get gatewayLockFile(): string {
    return path.join(this.root, 'gateway.lock');
  }
  get gatewayLogFile(): string {
    return path.join(this.root, 'gateway.log');
  }
}
