// Packs a live state directory and workspace the only safe way: snapshot first (the V1
// workspace policy: exclusions reported, secrets refused), then pack the snapshot. Shared by the
// CLI, the companion server and the workspace mover (sandboxes/workspaceMover.ts: activation, Save
// Sandbox as Revision), so no caller can skip the policy: the only place it is applied.
// A tree nothing can change any more (`quiet`: the sandbox's processes are all gone, or it is a private copy) is
// packed in place, the policy applied as the pack scans it: the same bytes and report, without the copy. The
// snapshot is still taken when the pack refuses what the copy would turn into plain files or report as unsafe
// for the caller (a hard-linked file, a symbolic link, a special file, a name that is not UTF-8). "Quiet" is a
// promise that is checked, not trusted: the pack re-reads every file and directory and refuses a change
// (`source_changed`) rather than pack a tree caught half-written.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SessionBundleArtifact, SessionBundleLimits, SnapshotExclusionCategory, WorkspaceSnapshotReport } from '../../protocol/bundle';
import { SessionBundleError, type SessionSnapshotError } from './errors';
import { type KnownDigest, packSessionBundle, type PackedSourceTree } from './pack';
import type { BundleProgress } from './reader';
import { prepareWorkspaceSnapshot, secretRefused } from './snapshot';
import { classifyWorkspacePath } from './snapshotPolicy';

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
  /** A private directory for the snapshot's staging (default: the OS temp dir). */
  stagingParent?: string | undefined;
  /** Hears each step as it starts: the snapshot (the policy), then the pack; a quiet tree is packed at once. */
  onStep?: ((step: 'snapshot' | 'pack') => void) | undefined;
  /**
   * Nothing writes the trees while this runs (every process that could is gone, or they are this caller's private
   * copy): pack them in place, without the snapshot copy.
   */
  quiet?: boolean | undefined;
  /** For a quiet tree packed in place: digests of files this process hydrated there (pack.ts `knownDigests`). */
  knownDigests?: ReadonlyMap<string, KnownDigest> | undefined;
}

export interface PackedWorkspace {
  artifact: SessionBundleArtifact;
  workspace: WorkspaceSnapshotReport;
  /** Packed in place (`quiet`, no snapshot copy): what the pack read from the trees, as pack.ts `onPacked` says. */
  inPlace?: PackedSourceTree | undefined;
}

/** Pack errors for which the snapshot copy does something else than refuse: it copies or reports the entry. */
const SNAPSHOT_HANDLES: ReadonlySet<string> = new Set(['unsupported_entry', 'unsafe_path']);

export async function packWorkspace(options: PackWorkspaceOptions): Promise<PackedWorkspace> {
  options.signal?.throwIfAborted();
  if (options.quiet === true) {
    try {
      return await packInPlace(options);
    } catch (err) {
      if (!(err instanceof SessionBundleError && SNAPSHOT_HANDLES.has(err.code))) throw err;
    }
  }
  return packSnapshot(options);
}

function envelopeOf(options: PackWorkspaceOptions): { sessionId: string; lastCommittedActivationId?: string } {
  return options.lastCommittedActivationId === undefined
    ? { sessionId: options.sessionId }
    : { sessionId: options.sessionId, lastCommittedActivationId: options.lastCommittedActivationId };
}

function progressOf(options: PackWorkspaceOptions): (p: BundleProgress) => void {
  return (p) => {
    // Throwing from the progress callback aborts the pack; the codec publishes nothing.
    options.signal?.throwIfAborted();
    options.onProgress?.(p);
  };
}

/** The quiet tree packed as it is, the policy deciding what the scan takes; reports exactly what a snapshot would. */
async function packInPlace(options: PackWorkspaceOptions): Promise<PackedWorkspace> {
  const excluded: { path: string; category: SnapshotExclusionCategory }[] = [];
  let included = 0;
  let payloadBytes = 0;
  let rejected: SessionSnapshotError | undefined;
  let inPlace: PackedSourceTree | undefined;
  options.onStep?.('pack');
  let artifact: SessionBundleArtifact;
  try {
    artifact = await packSessionBundle({
      stateRoot: path.resolve(options.stateRoot),
      workspaceRoot: path.resolve(options.workspaceRoot),
      stateIdentity: options.stateIdentity ?? defaultStateIdentity(options.sessionId),
      envelope: envelopeOf(options),
      destination: path.resolve(options.destination),
      limits: options.limits,
      onProgress: progressOf(options),
      ...(options.knownDigests !== undefined ? { knownDigests: options.knownDigests } : {}),
      onPacked: (tree) => (inPlace = tree),
      workspaceFilter: (segments, isDirectory, size) => {
        const verdict = classifyWorkspacePath(segments, isDirectory);
        if (verdict.verdict === 'reject') {
          rejected = secretRefused(['workspace', ...segments].join('/'));
          throw rejected;
        }
        if (verdict.verdict === 'exclude') {
          excluded.push({ path: segments.join('/') + (isDirectory ? '/' : ''), category: verdict.category });
          return false;
        }
        included += 1;
        payloadBytes += size;
        return true;
      },
    });
  } catch (err) {
    throw rejected ?? err;
  }
  const byCategory: Record<SnapshotExclusionCategory, number> = { source_control: 0, dependency_tree: 0, cache: 0, log: 0, runtime_scratch: 0 };
  for (const e of excluded) byCategory[e.category] += 1;
  return {
    artifact,
    workspace: {
      policyVersion: 1,
      includedEntries: included,
      excludedEntries: excluded.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
      excludedEntriesByCategory: byCategory,
      payloadBytes,
    },
    ...(inPlace !== undefined ? { inPlace } : {}),
  };
}

/** A snapshot copy (the policy applied while copying), then the pack of that copy. */
async function packSnapshot(options: PackWorkspaceOptions): Promise<PackedWorkspace> {
  const stagingParent = await mkdtemp(path.join(options.stagingParent ?? tmpdir(), 'sandbox-sessions-snapshot-'));
  try {
    options.onStep?.('snapshot');
    const snapshot = await prepareWorkspaceSnapshot({
      stateRoot: path.resolve(options.stateRoot),
      workspaceRoot: path.resolve(options.workspaceRoot),
      stagingParent,
    });
    try {
      options.signal?.throwIfAborted();
      options.onStep?.('pack');
      const artifact = await packSessionBundle({
        stateRoot: snapshot.snapshot.stateRoot,
        workspaceRoot: snapshot.snapshot.workspaceRoot,
        stateIdentity: options.stateIdentity ?? defaultStateIdentity(options.sessionId),
        envelope: envelopeOf(options),
        destination: path.resolve(options.destination),
        limits: options.limits,
        onProgress: progressOf(options),
      });
      return { artifact, workspace: snapshot.workspace };
    } finally {
      await snapshot.release();
    }
  } finally {
    await rm(stagingParent, { recursive: true, force: true });
  }
}
