// Packs a live state directory and workspace the only safe way: snapshot first (the V1
// workspace policy: exclusions reported, secrets refused), then pack the snapshot. Shared by the
// CLI, the companion server and the session features, so no caller can skip the policy.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SessionBundleArtifact, SessionBundleLimits, WorkspaceSnapshotReport } from '../../protocol/bundle';
import { packSessionBundle } from './pack';
import type { BundleProgress } from './reader';
import { prepareWorkspaceSnapshot } from './snapshot';

export const MAKA_STATE_IDENTITY_MEDIA_TYPE = 'application/vnd.maka.session-state-identity+json;version=1';

/** Maka's cloud identity descriptor for a session: `{"schemaVersion":1,"makaSessionId":…}\n`. */
export function defaultStateIdentity(sessionId: string): { mediaType: string; bytes: Uint8Array } {
  return { mediaType: MAKA_STATE_IDENTITY_MEDIA_TYPE, bytes: Buffer.from(`${JSON.stringify({ schemaVersion: 1, makaSessionId: sessionId })}\n`) };
}

export interface PackWorkspaceOptions {
  stateRoot: string;
  workspaceRoot: string;
  destination: string;
  sessionId: string;
  lastCommittedActivationId?: string | undefined;
  stateIdentity?: { mediaType: string; bytes: Uint8Array } | undefined;
  limits: SessionBundleLimits;
  onProgress?: ((p: BundleProgress) => void) | undefined;
  /** Aborting stops the pack at its next progress step; nothing is published and temp files are removed. */
  signal?: AbortSignal | undefined;
}

export interface PackedWorkspace {
  artifact: SessionBundleArtifact;
  workspace: WorkspaceSnapshotReport;
}

export async function packWorkspace(options: PackWorkspaceOptions): Promise<PackedWorkspace> {
  options.signal?.throwIfAborted();
  const stagingParent = await mkdtemp(path.join(tmpdir(), 'sandbox-sessions-snapshot-'));
  try {
    const snapshot = await prepareWorkspaceSnapshot({
      stateRoot: path.resolve(options.stateRoot),
      workspaceRoot: path.resolve(options.workspaceRoot),
      stagingParent,
    });
    try {
      options.signal?.throwIfAborted();
      const artifact = await packSessionBundle({
        stateRoot: snapshot.snapshot.stateRoot,
        workspaceRoot: snapshot.snapshot.workspaceRoot,
        stateIdentity: options.stateIdentity ?? defaultStateIdentity(options.sessionId),
        envelope:
          options.lastCommittedActivationId === undefined
            ? { sessionId: options.sessionId }
            : { sessionId: options.sessionId, lastCommittedActivationId: options.lastCommittedActivationId },
        destination: path.resolve(options.destination),
        limits: options.limits,
        onProgress: (p) => {
          // Throwing from the progress callback aborts the pack; the codec publishes nothing.
          options.signal?.throwIfAborted();
          options.onProgress?.(p);
        },
      });
      return { artifact, workspace: snapshot.workspace };
    } finally {
      await snapshot.release();
    }
  } finally {
    await rm(stagingParent, { recursive: true, force: true });
  }
}
