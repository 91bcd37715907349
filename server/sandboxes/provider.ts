// Where sandboxes come from. Every provider offers the same operations on Runs — list, create,
// get, open (endpoint + token), terminate, download artifacts, watch — and differs only in where
// the Runs live (the local gateway's Runs API, or the Kubernetes API for kruntimes).
import type { Run, TerminationMode } from '../../protocol/kruntimes/run';
import type { RunLogQuery } from '../../protocol/kruntimes/runtimedLog';
import type {
  DownloadedArtifact,
  ProviderInfo,
  ProviderKind,
  SandboxConnection,
  SandboxCreateSpec,
  SandboxRef,
  SandboxSummary,
} from '../../protocol/sandboxes';

export interface WorkOptions {
  signal?: AbortSignal;
  progress?: (phase: string, message?: string) => void;
}

export interface SandboxChange {
  sandbox: SandboxSummary;
  removed: boolean;
}

export interface SandboxProvider {
  readonly kind: ProviderKind;
  info(): Promise<ProviderInfo>;
  list(filter: { context?: string; namespace?: string }): Promise<SandboxSummary[]>;
  /** Creates a session Run and, when `waitForReady`, waits (bounded) until it is Ready or terminal. */
  create(spec: SandboxCreateSpec, options: WorkOptions & { waitForReady: boolean; timeoutMs?: number }): Promise<SandboxSummary>;
  get(ref: SandboxRef): Promise<{ sandbox: SandboxSummary; run: Run }>;
  /** What the data plane needs; only for a Ready session Run whose endpoint matches its UID. */
  open(ref: SandboxRef): Promise<SandboxConnection>;
  /**
   * The sandbox's root as a directory of this machine, when the provider keeps it here (the local runtime), so
   * activations, saves and opens of revisions can move a session in or snapshot it in place instead of making one
   * gateway call per file. Undefined when it lives elsewhere.
   */
  hostDirectory?(ref: SandboxRef): Promise<string | undefined>;
  /** Stops holding the sandbox's session lease (the sandbox keeps running); false when none was held. */
  release(ref: SandboxRef): Promise<boolean>;
  terminate(ref: SandboxRef, mode: TerminationMode, options: WorkOptions & { wait: boolean; timeoutMs?: number }): Promise<SandboxSummary>;
  delete(ref: SandboxRef): Promise<void>;
  downloadArtifacts(
    ref: SandboxRef,
    destination: string,
    options: WorkOptions & { names?: string[]; unpack: boolean },
  ): Promise<DownloadedArtifact[]>;
  /**
   * runtimed's log of the sandbox's Run, read like `kubectl logs`: `onLine` per line; with `follow`, resolves once
   * the Run's log ends or `signal` aborts. Absent where the provider cannot read it yet (kruntimes).
   */
  logs?(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void>;
  /** Calls `listener` on every phase change until the returned function is called. */
  /**
   * Follows phase changes. `onGateway` (optional) hears when the provider's gateway stops or starts
   * answering (the local daemon exited or is back) — never before it answered once.
   */
  watch(listener: (change: SandboxChange) => void, onGateway?: (state: { reachable: boolean; message?: string }) => void): () => void;
  /** Stops what the provider keeps running (lease heartbeats, port-forwards, watches). */
  dispose(): Promise<void>;
}

export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  constructor(
    readonly code:
      | 'sandbox_not_found'
      | 'provider_unavailable'
      | 'sandbox_wait_timeout'
      | 'artifact_invalid'
      | 'run_state'
      | 'invalid_destination'
      | 'invalid_spec'
      | 'cluster_unauthorized'
      | 'cluster_forbidden'
      | 'cluster_conflict'
      | 'port_forward_failed',
    message: string,
  ) {
    super(message);
  }
}
