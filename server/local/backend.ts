// What runs a command: a backend turns a launch request into the program to spawn and
// declares what it isolates. Callers ask for a capability (e.g. isolateNetwork); a backend
// that cannot give it refuses, it never silently ignores the request (seed 003's rule).
// A remote backend (OpenSandbox) runs nothing here: it places the Run's workspace in a sandbox
// elsewhere (`remote`), and the local runtime keeps the Run, its queue, records and artifacts.
import type { Run } from '../../protocol/kruntimes/run';
import type { SessionWorkspace } from './sessionWorkspace';

export type IsolationClass = 'none' | 'namespaces' | 'container';

export interface BackendCapabilities {
  isolation: IsolationClass;
  /** `command.isolateNetwork: true` is honoured (only `lo`). */
  isolateNetwork: boolean;
  /** Cancelling kills every descendant (a pid namespace), not only the process group. */
  pidNamespace: boolean;
  /** Only the workspace is writable. */
  readOnlyHost: boolean;
}

export interface LaunchSpec {
  argv: string[];
  /** Absolute working directory inside the workspace. */
  cwd: string;
  env: Record<string, string>;
  /** Absolute directories commands may write (the workspace and the artifacts dir); all else is read-only under bubblewrap. */
  writable: string[];
  /** A per-Run scratch directory mounted at /tmp by isolating backends. */
  tmpDir: string;
  /** Directories to hide (e.g. the state root holding the gateway token). */
  hide: string[];
  isolateNetwork: boolean;
}

export interface SpawnPlan {
  file: string;
  args: string[];
}

export type ProbeResult = { ok: true; detail: string } | { ok: false; reason: string };

export interface Backend {
  readonly name: string;
  readonly description: string;
  readonly capabilities: BackendCapabilities;
  /** Whether the backend works on this machine, and why not. */
  probe(): Promise<ProbeResult>;
  /** The program to spawn (as its own process group) for a launch; throws SessionError on refusal. */
  plan(spec: LaunchSpec): SpawnPlan;
  /** Set when the backend's sandboxes live elsewhere: commands and files go there, not to a host directory. */
  readonly remote?: RemotePlacement;
}

/** What a remote backend is told about one Run. */
export interface RemoteRunContext {
  run: Run;
  /** The Run's directory in the state root: where the backend keeps its record of the remote sandbox (0600). */
  runDir: string;
  /** The Run's prepared host workspace (inline script, cloned source, artifact inputs): copied in when the sandbox is created. */
  seedDir: string;
  log(line: string): void;
}

export interface RemoteWorkspace extends SessionWorkspace {
  /** `$KRUNTIME_ARTIFACTS_DIR` inside the sandbox. */
  readonly artifactsPath: string;
  /** Copies every top-level entry of the sandbox's artifacts directory into `dir` (an empty host directory). */
  downloadArtifacts(dir: string): Promise<void>;
}

export interface RemotePlacement {
  /** Why a Run like this cannot be created here now (no connection configured, a bad setting), or undefined. */
  refusal(run: Run): string | undefined;
  /** Creates the Run's sandbox, or reattaches to the one its record names (after a daemon restart); throws when that is gone. */
  open(ctx: RemoteRunContext): Promise<RemoteWorkspace>;
  /** Deletes the Run's sandbox, and any other the product left for this Run; idempotent. */
  release(ctx: RemoteRunContext): Promise<void>;
}
