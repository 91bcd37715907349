// Where a substrate keeps its Runs, as the one provider core (runProvider.ts) needs them: get, list,
// create, patch termination and labels, delete and watch. It exists so the lifecycle — create, wait for Ready,
// open, terminate, artifacts, delete — is written once over any place Runs live (the local
// gateway's Runs API, the Kubernetes API) and adapters cannot drift in what those steps mean.
import type { Run, RunMetadataPatch, TerminationMode } from '../../protocol/kruntimes/run';

export type RunStoreEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface RunStoreEvent {
  type: RunStoreEventType;
  run: Run;
}

export interface RunStoreWatchHandlers {
  onEvent: (event: RunStoreEvent) => void;
  /** A (re)connect failed; the watch keeps retrying until stopped. */
  onError?: (err: Error) => void;
}

export interface RunStoreWatch {
  stop(): void;
}

export interface RunStore {
  /** The Run; a SandboxError `sandbox_not_found` when there is none. */
  get(namespace: string, name: string): Promise<Run>;
  /** The Runs of `namespace`, or of every namespace the store can list when undefined. */
  list(namespace?: string): Promise<Run[]>;
  create(namespace: string, body: Run): Promise<Run>;
  /** Requests Drain or Immediate termination (a merge patch of `spec.termination`). */
  patchTermination(namespace: string, name: string, mode: TerminationMode): Promise<Run>;
  /**
   * A merge patch of `metadata.labels` and `metadata.annotations`, as `kubectl label` sends it: a string sets one,
   * null removes it, those not named stay. Invalid labels are refused (SandboxError `invalid_spec`) with the store's
   * words.
   */
  patchMetadata(namespace: string, name: string, metadata: RunMetadataPatch): Promise<Run>;
  /** Asks the store to delete the Run (it may stay a while, e.g. behind finalizers). */
  delete(namespace: string, name: string): Promise<void>;
  /**
   * Reports the current Runs of `namespace` (only `name`, when given) as ADDED, then every change, and
   * keeps doing so across reconnects until stopped; resolves once the first listing was delivered.
   */
  watch(query: { namespace: string; name?: string }, handlers: RunStoreWatchHandlers): Promise<RunStoreWatch>;
}
