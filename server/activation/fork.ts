// Fork (spec §11): a new Session from an explicit, retained revision of another. claimFork pins the
// source checkpoint (so a source that moves on is never forked at an unintended revision); the
// source bundle is checked out and repacked by the workspace mover (sandboxes/workspaceMover.ts),
// its state identity re-keyed in between by a pluggable hook, with the target's envelope.sessionId
// (no lastCommittedActivationId), published, created as the target's r1 with forkedFrom lineage,
// and completed. Every step is deterministic, so the same forkId always yields the same target,
// also after a crash between claim and completion. Activation records, leases and credentials are
// never copied (they are not in the bundle).
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type ForkRequest, ForkRequestSchema, type ForkResult } from '../../protocol/activation';
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleLimits } from '../../protocol/bundle';
import type { SessionRevisionRef } from '../../protocol/repository';
import { publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { checkoutSession, repackSession } from '../sandboxes/workspaceMover';
import { ActivationError } from './errors';
import { MAKA_CLOUD_IDENTITY_MEDIA_TYPE, makaCloudIdentity, makaSessionIdOf, type StateIdentity } from './stateIdentity';

export interface RekeyInput {
  forkId: string;
  source: SessionRevisionRef;
  targetSessionId: string;
  identity: StateIdentity;
  /** The hydrated source state and workspace; a hook may rewrite files here (deterministically). */
  stateRoot: string;
  workspaceRoot: string;
}

export interface RekeyResult {
  identity: StateIdentity;
  changed: boolean;
  /** Said to the person: what was re-keyed, or why nothing was. */
  note: string;
}

/** Must be deterministic in its input: a retried forkId has to produce the same bytes. */
export type RekeyHook = (input: RekeyInput) => RekeyResult | Promise<RekeyResult>;

/** The target's Maka session id: derived from the source id and the forkId (stable across retries). */
export function forkedMakaSessionId(sourceMakaSessionId: string, forkId: string, targetSessionId: string): string {
  const suffix = createHash('sha256').update(`${forkId}\u0000${targetSessionId}`).digest('hex').slice(0, 16);
  return `${sourceMakaSessionId.slice(0, 100)}-f${suffix}`;
}

/**
 * Default re-key: a Maka cloud identity descriptor gets a new makaSessionId; any other media type
 * is left as it is, and the note says so. `state/` itself is not rewritten (that is the state
 * layer's business: pass a hook that also re-keys it).
 */
export const defaultRekey: RekeyHook = (input) => {
  const current = makaSessionIdOf(input.identity);
  if (input.identity.mediaType === MAKA_CLOUD_IDENTITY_MEDIA_TYPE && current !== undefined) {
    const next = forkedMakaSessionId(current, input.forkId, input.targetSessionId);
    return {
      identity: makaCloudIdentity(next),
      changed: true,
      note: `rewrote makaSessionId ${current} → ${next} in the Maka cloud identity descriptor (state/ was not rewritten)`,
    };
  }
  return {
    identity: input.identity,
    changed: false,
    note: `state identity of media type ${input.identity.mediaType} is not one this fork knows how to re-key; it was left as it is`,
  };
};

/** The target Session id when none is given: derived from the forkId, so a retry names the same one. */
export function defaultForkTarget(forkId: string): string {
  return `fork-${createHash('sha256').update(forkId).digest('hex').slice(0, 24)}`;
}

export async function forkSession(
  repo: SessionRepository,
  input: unknown,
  options: { rekey?: RekeyHook; limits?: SessionBundleLimits; scratchParent?: string; onProgress?: (phase: string, message?: string) => void } = {},
): Promise<ForkResult> {
  const parsed = ForkRequestSchema.safeParse(input);
  if (!parsed.success) throw new ActivationError('invalid_request', `invalid fork request: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const request: ForkRequest = parsed.data;
  const targetSessionId = request.targetSessionId ?? defaultForkTarget(request.forkId);
  const limits = options.limits ?? DEFAULT_PEOPLE_LIMITS;
  const progress = options.onProgress ?? (() => undefined);

  progress('claim', `claiming fork ${request.forkId} of ${request.source.sessionId}@${request.source.revision}`);
  const claim = await repo.claimFork({ forkId: request.forkId, source: request.source, targetSessionId });
  if (claim.state === 'completed') return { forkId: claim.forkId, target: claim.target, forkedFrom: claim.source, deduplicated: true };

  const scratch = await fsp.mkdtemp(path.join(options.scratchParent ?? os.tmpdir(), 'ss-fork-'));
  try {
    progress('materialize', 'reading the source revision');
    // Always the checkpoint pinned by the claim, never the source's current head.
    const hydrated = await checkoutSession({ objects: repo.objects, checkpoint: claim.sourceCheckpoint, sessionId: claim.source.sessionId, limits, scratch });
    const identity: StateIdentity = hydrated.identity;
    const rekey = await (options.rekey ?? defaultRekey)({
      forkId: claim.forkId,
      source: claim.source,
      targetSessionId,
      identity,
      stateRoot: hydrated.stateRoot,
      workspaceRoot: hydrated.workspaceRoot,
    });
    progress('pack', `repacking for ${targetSessionId}`);
    const artifact = await repackSession(hydrated, { sessionId: targetSessionId, stateIdentity: rekey.identity, limits, destination: path.join(scratch, 'target.tar.zst') });
    const checkpoint = await publishSessionCheckpointV1({ objectStore: repo.objects, compatibilityBundle: artifact });
    progress('create', `creating ${targetSessionId}@r1`);
    await repo.createSession({ sessionId: targetSessionId, agentId: claim.sourceAgentId, checkpoint, forkedFrom: claim.source, createdByForkId: claim.forkId });
    const completed = await repo.completeFork({ forkId: claim.forkId });
    return {
      forkId: completed.forkId,
      target: completed.target,
      forkedFrom: completed.source,
      rekey: { mediaType: rekey.identity.mediaType, changed: rekey.changed, note: rekey.note },
      deduplicated: false,
    };
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true }).catch(() => undefined);
  }
}
