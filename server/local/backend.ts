// What runs a command: a backend turns a launch request into the program to spawn and
// declares what it isolates. Callers ask for a capability (e.g. isolateNetwork); a backend
// that cannot give it refuses, it never silently ignores the request (seed 003's rule).
export type IsolationClass = 'none' | 'namespaces';

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
}
