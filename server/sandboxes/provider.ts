// Where sandboxes come from: the contract the rest of the server (RPC, CLI, MCP, activation, sessions)
// uses. Every provider offers the same operations — list, create, get, open (endpoint + token),
// terminate, download artifacts, watch. A substrate whose sandboxes are Runs (the local gateway's Runs
// API, the Kubernetes API for kruntimes) gets them from the one provider core (runProvider.ts) over its
// RunStore; a substrate without Run objects implements this interface itself, describing each sandbox
// in the Run shape `get` returns, and serving its data plane through the same access API.
import type { Run, RunMetadataPatch, TerminationMode } from '../../protocol/kruntimes/run';
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
import { SandboxSessionsError } from '../../protocol/errors';

export interface WorkOptions {
  signal?: AbortSignal;
  progress?: (phase: string, message?: string) => void;
}

export interface CreateOptions extends WorkOptions {
  waitForReady: boolean;
  timeoutMs?: number;
  annotations?: Record<string, string>;
}

export interface SandboxChange {
  sandbox: SandboxSummary;
  removed: boolean;
}

export interface SandboxProvider {
  readonly kind: ProviderKind;
  info(): Promise<ProviderInfo>;
  list(filter: { context?: string; namespace?: string }): Promise<SandboxSummary[]>;
  /**
   * Creates a session Run (with `annotations` of the server's own, e.g. the session revision it is opened from) and,
   * when `waitForReady`, waits (bounded) until it is Ready or terminal.
   */
  create(spec: SandboxCreateSpec, options: CreateOptions): Promise<SandboxSummary>;
  get(ref: SandboxRef): Promise<{ sandbox: SandboxSummary; run: Run }>;
  /** What the data plane needs; only for a Ready session Run whose endpoint matches its UID. */
  open(ref: SandboxRef): Promise<SandboxConnection>;
  /**
   * The sandbox's root as a directory of this machine, when the provider keeps it here (the local runtime), so
   * activations, saves and opens of revisions can move a session in or snapshot it in place instead of making one
   * gateway call per file. Undefined when it lives elsewhere. Only while the sandbox is Ready, unless `access` is
   * 'read' (a caller that only reads, e.g. search): then also while it is Finalizing (Drain: reads still allowed).
   */
  hostDirectory?(ref: SandboxRef, access?: 'read' | 'write'): Promise<string | undefined>;
  /**
   * Whether a sandbox created from `spec` will live on this machine (`hostDirectory` then offers its root once it is
   * Ready): false for a backend whose sandboxes live elsewhere (the local runtime's `opensandbox`). Absent: never.
   */
  keepsHere?(spec: Pick<SandboxCreateSpec, 'runtime'>): boolean;
  /**
   * Set when a directory `hostDirectory` offers is, by construction, the one the sandbox's commands start in (the
   * local runtime runs its own backends' commands there): it is then used without asking the sandbox's `pwd` first.
   */
  readonly hostDirectoryIsCommandRoot?: boolean;
  /**
   * A private directory of this machine on the same file system as the sandboxes' host directories, where an
   * activation keeps the session tree it packed for the session's next activation (activation/keptSessionTrees.ts).
   * Absent where sandboxes are not directories here.
   */
  keptSessionTreesDirectory?(): string;
  /** Stops holding the sandbox's session lease (the sandbox keeps running); false when none was held. */
  release(ref: SandboxRef): Promise<boolean>;
  terminate(ref: SandboxRef, mode: TerminationMode, options: WorkOptions & { wait: boolean; timeoutMs?: number }): Promise<SandboxSummary>;
  /**
   * Sets (string) or removes (null) labels and annotations of the sandbox's Run, leaving the others; e.g. a grant to
   * agents, the session revision it was saved as.
   */
  patchMetadata(ref: SandboxRef, metadata: RunMetadataPatch): Promise<SandboxSummary>;
  delete(ref: SandboxRef): Promise<void>;
  downloadArtifacts(
    ref: SandboxRef,
    destination: string,
    options: WorkOptions & { names?: string[]; unpack: boolean },
  ): Promise<DownloadedArtifact[]>;
  /**
   * runtimed's log of the sandbox's Run, read like `kubectl logs`: `onLine` per line; with `follow`, resolves once
   * the Run's log ends or `signal` aborts. Absent where the provider cannot read it.
   */
  logs?(ref: SandboxRef, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void>;
  /** Calls `listener` on every phase change until the returned function is called. */
  /**
   * Follows phase changes. `onGateway` (optional) hears when the provider's gateway stops or starts
   * answering (the local daemon exited or is back) — never before it answered once.
   */
  watch(listener: (change: SandboxChange) => void, onGateway?: (state: { reachable: boolean; message?: string }) => void): () => void;
  /** Where the local runtime's `opensandbox` backend finds OpenSandbox (local provider only). */
  configureOpenSandbox?(conn: { domain?: string; apiKey?: string; credentials?: Record<string, string> }): Promise<void>;
  /** Stops what the provider keeps running (lease heartbeats, port-forwards, watches). */
  dispose(): Promise<void>;
}

export type SandboxErrorCode =
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
  | 'port_forward_failed';

export class SandboxError extends SandboxSessionsError<SandboxErrorCode> {
  override readonly name = 'SandboxError';
  readonly service = 'sandbox';
}
