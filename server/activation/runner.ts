// One activation (one agent turn) of a Session in a fresh, throw-away sandbox — seed 000's sequence, in this order:
// claim the activation id (a committed id returns its stored outcome and runs nothing), taking the Session's lease in
// the same write when it is free (else waiting for it) → check out (no Session yet: an empty bundle) → create a fresh
// sandbox → hydrate the bundle into it → write the ActivationRequest as a JSON file → run the activation command,
// streaming its JSONL as provisional events → bring state and workspace back and pack them through the snapshot policy
// → publish → one write: the CAS commit with lastCommittedActivationId and a commitId, the outcome marked committed
// and the lease given back (repository/engine.ts, ActivationStore.commitIn) — so a revision never exists without its
// outcome — and return it; the sandbox is destroyed in `finally`. A CAS loser returns `revision_conflict` and never
// its output. Credentials reach the sandbox per activation (config-root files, env) and never the bundle. Moving the
// session in and out is the workspace mover's (sandboxes/workspaceMover.ts): a local sandbox's directory is hydrated
// in place and, once the agent has exited, packed in place (no staging or snapshot copies; files still as hydrate left
// them are not hashed again, and the bundle goes into a file store without being read again: digests our codec
// computed over the bytes it wrote, see bundle/pack.ts knownDigests and repository/objectStore.ts WrittenFile), and
// the packed tree is kept for the session's next activation here, which takes it instead of hydrating when it is
// exactly that revision (keptSessionTrees.ts); a remote one (OpenSandbox, a cluster) gets the bundle as one file
// unpacked by `tar` and gives the session back as one `tar.zst`, read strictly and re-packed here with our codec
// through the snapshot policy. The Run (and an OpenSandbox sandbox) is labelled with the session and activation ids;
// each numbered step is one method.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  type ActivationEvent,
  type ActivationOutcomeEvent,
  type ActivationResult,
  type ActivationRunRequest,
  ActivationRunRequestSchema,
} from '../../protocol/activation';
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleArtifact, type SessionBundleLimits } from '../../protocol/bundle';
import type { CommittedSessionRevision } from '../../protocol/repository';
import type { ProviderKind, SandboxRef } from '../../protocol/sandboxes';
import { writtenArchiveOf } from '../bundle';
import type { KnownDigest } from '../bundle/pack';
import type { Logger } from '../log';
import { newOwnerToken } from '../repository/activationStore';
import { publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { isSessionRepositoryError } from '../repository/errors';
import type { PendingActivationCommit } from '../repository/records';
import type { SandboxProvider } from '../sandboxes/provider';
import { labelValue, LABEL_ACTIVATION, LABEL_SESSION } from '../sandboxes/opensandbox/labels';
import type { PackedWorkspace } from '../bundle/packWorkspace';
import { type CaptureStep, captureFrom, checkoutInto, emptySession, hydrateInto, type SessionIdentity, type SessionTransfer } from '../sandboxes/workspaceMover';
import { tarName } from '../sandboxes/sandboxTarball';
import { ActivationRecords } from './activationRecords';
import { runAgentCommand } from './agentCommand';
import { commitCheckpoint } from './activationCommit';
import { ActivationError, isActivationError } from './errors';
import { type ActivationCredentials, type ConnectedSandbox, connectSandbox, destroySandbox, writeActivationInput, writeConfigRoot } from './freshSandbox';
import { classify, commitIdFor, notCommitted } from './outcomes';
import { type ActivationCommandConfig, activationArgv, DEFAULT_ACTIVATION_COMMAND, REMOTE } from './sandboxLayout';
import { DEFAULT_LEASE_POLICY, Heartbeat, type LeasePolicy } from './sessionLease';
import { identityAfterActivation } from './stateIdentity';
import { type ClaimedTree, type KeptTreeKey, KeptSessionTrees, type TreeToKeep } from './keptSessionTrees';

export type { ActivationCredentials } from './freshSandbox';

export interface ActivationRunnerOptions {
  repository: SessionRepository;
  providers: Partial<Record<ProviderKind, SandboxProvider>>;
  log: Logger;
  command?: ActivationCommandConfig;
  /** Per-activation credentials (called once per attempt). */
  credentials?: (request: ActivationRunRequest) => ActivationCredentials | Promise<ActivationCredentials>;
  lease?: Partial<LeasePolicy>;
  limits?: SessionBundleLimits;
  /** Parent of the private per-activation scratch directories (default: the OS temp dir). */
  scratchParent?: string;
  /** Agent of Sessions created by an activation that names none. */
  defaultAgentId?: string;
  /** How long to wait for a fresh sandbox to be Ready (default 60 s). */
  sandboxReadyTimeoutMs?: number;
}

export interface RunOptions {
  signal?: AbortSignal;
  /** Provisional events, as the agent writes them; only the returned result says what was committed. */
  onEvent?: (event: ActivationEvent) => void;
  onProgress?: (phase: string, message?: string) => void;
}

const MAX_COMMAND_TIMEOUT_MS = 5 * 60_000;
/** The total timeout of an activation's sandbox unless the request sets one: the turn's 5 minutes plus transfers. */
export const THROWAWAY_SANDBOX_TIMEOUT = '30m';

/** What the steps of one attempt share. */
interface AttemptContext {
  token: string;
  attempt: number;
  signal: AbortSignal;
  progress: (phase: string, message?: string) => void;
  onEvent: (event: ActivationEvent) => void;
  lost: () => string | undefined;
  /** The commit's write is about to give the lease back: the heartbeat stops renewing it. */
  givingLeaseBack: () => void;
}

/** What the hydrate step moves, and where: the session's revision (none yet: an empty session) into the sandbox. */
interface SessionInto {
  request: ActivationRunRequest;
  sandbox: ConnectedSandbox;
  base: CommittedSessionRevision | undefined;
  /** The tree the last activation here left, claimed while the sandbox was created (undefined: none to claim). */
  keptTree: Promise<ClaimedTree | undefined> | undefined;
  scratch: string;
}

/** The session in the sandbox: its state identity and the digests of the files written there (pack's knownDigests). */
interface MovedSession {
  identity: SessionIdentity | undefined;
  knownDigests: Map<string, KnownDigest>;
}

export const DEFAULT_AGENT_ID = 'default-agent';

export class ActivationRunner {
  private readonly records: ActivationRecords;
  private readonly policy: LeasePolicy;
  private readonly command: ActivationCommandConfig;
  private readonly limits: SessionBundleLimits;
  private readonly keptTrees = new Map<string, KeptSessionTrees>();

  constructor(private readonly options: ActivationRunnerOptions) {
    this.policy = { ...DEFAULT_LEASE_POLICY, ...options.lease };
    this.records = new ActivationRecords(options.repository, this.policy, options.log);
    this.command = options.command ?? DEFAULT_ACTIVATION_COMMAND;
    this.limits = options.limits ?? DEFAULT_PEOPLE_LIMITS;
  }

  private get repo(): SessionRepository {
    return this.options.repository;
  }

  async run(input: unknown, options: RunOptions = {}): Promise<ActivationResult> {
    const parsed = ActivationRunRequestSchema.safeParse(input);
    if (!parsed.success) throw new ActivationError('invalid_request', `invalid activation request: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    const request = parsed.data;
    const provider = this.options.providers[request.sandbox.provider];
    if (!provider) throw new ActivationError('invalid_request', `no ${request.sandbox.provider} sandbox provider is configured here`);
    const { sessionId, activationId } = request;
    const progress = options.onProgress ?? (() => undefined);

    // 1. Persist and claim the activation id.
    const token = newOwnerToken();
    const claim = await this.records.claim(request, token);
    if (claim.kind === 'committed') return claim.result;
    const { record, previous, leased } = claim;
    const attempt = record.attempt;
    let lostReason: string | undefined;
    const internal = new AbortController();
    const heartbeat = new Heartbeat(this.repo.activations, { sessionId, activationId, token, ttlMs: this.policy.ttlMs }, (why) => {
      lostReason ??= why;
      internal.abort();
    });
    heartbeat.start();
    const signal = options.signal ? AbortSignal.any([options.signal, internal.signal]) : internal.signal;

    // Taken with the claim when the Session was free; given back by the commit's write, or else in `finally`.
    let leaseHeld = leased;
    let leaseReleased = false;
    if (leased) heartbeat.leaseHeld();
    try {
      // A dead predecessor may have left its sandbox behind.
      if (previous?.sandbox) await this.destroySandbox(previous.sandbox, progress);

      // 2. One activation at a time per Session.
      await this.records.admit(request, token, leased, signal, progress);
      leaseHeld = true;
      heartbeat.leaseHeld();

      // A predecessor that died between publish and commit: finish its commit (same commitId) rather than run again.
      if (previous?.state === 'committing' && previous.pending && previous.outcome) {
        const finished = await this.records.finishPending(record, previous.pending, previous.outcome, token);
        if (finished) return finished;
      }
      const ctx = { token, attempt, signal, progress, onEvent: this.listener(activationId, options.onEvent), lost: () => lostReason, givingLeaseBack: () => heartbeat.leaseReleased() };
      const result = await this.runFresh(request, provider, ctx);
      leaseReleased = true; // by the commit's write
      return result;
    } catch (err) {
      if (isActivationError(err) && (err.code === 'session_busy' || err.code === 'activation_cancelled') && !leaseHeld) throw err;
      const e =
        lostReason !== undefined
          ? new ActivationError('ownership_lost', `${lostReason}; nothing of this attempt was committed`)
          : options.signal?.aborted && !isActivationError(err)
            ? new ActivationError('activation_cancelled', 'the activation was cancelled; nothing was committed')
            : classify(err);
      this.options.log.info('activation not committed', { sessionId, activationId, attempt, code: e.code, error: e.message });
      if (e.code !== 'ownership_lost') await this.records.recordAborted(request, token, e);
      return notCommitted(request, e.code, e.message, attempt);
    } finally {
      await heartbeat.stop();
      if (leaseHeld && !leaseReleased) {
        await this.repo.activations
          .releaseLease({ sessionId, token })
          .catch((err: unknown) => this.options.log.warn('could not release the session lease (it will expire)', { sessionId, error: (err as Error).message }));
      }
    }
  }

  /** The caller's event listener, made safe: a failing listener must not fail the activation. */
  private listener(activationId: string, onEvent: ((event: ActivationEvent) => void) | undefined): (event: ActivationEvent) => void {
    return (event) => {
      try {
        onEvent?.(event);
      } catch (err) {
        this.options.log.warn('an activation event listener threw', { activationId, error: (err as Error).message });
      }
    };
  }

  /**
   * Steps 3–10 in a private scratch directory and a fresh sandbox, both gone afterwards whatever happens. Overlapping:
   * recording the sandbox with connect + hydrate (the agent waits for the record); destroying it with the commit
   * (nothing reads it after the capture; the run returns once it is gone, `cleanup` reported after `done`).
   */
  private async runFresh(request: ActivationRunRequest, provider: SandboxProvider, ctx: AttemptContext): Promise<ActivationResult> {
    const scratch = await fsp.mkdtemp(path.join(this.options.scratchParent ?? os.tmpdir(), 'ss-activation-'));
    await fsp.chmod(scratch, 0o700);
    let ref: SandboxRef | undefined;
    let sandbox: ConnectedSandbox | undefined;
    let recorded: Promise<unknown> | undefined;
    let destroying: Promise<void> | undefined;
    let claimed: Promise<ClaimedTree | undefined> | undefined;
    try {
      const base = await this.checkout(request.sessionId, ctx);
      const kept = provider.keepsHere?.(request.sandbox) === true ? this.keptTreesOf(provider) : undefined;
      // The tree the last activation here left, checked while the sandbox is created (placed in it by the hydrate).
      claimed = base !== undefined && kept !== undefined ? kept.claim(this.keptTreeKey(request, base)).catch(() => undefined) : undefined;
      const created = await this.createSandbox(request, provider, ctx);
      ref = created;
      const recording = this.recordSandbox(request, created, ctx);
      recorded = recording.catch(() => undefined); // settled, for `finally`; never an unhandled rejection meanwhile
      const keptTree = claimed;
      const { connected, identity, credentials, knownDigests } = await (async () => {
        const connected = await connectSandbox(provider, created, ctx.signal);
        sandbox = connected;
        return { connected, ...(await this.hydrate({ request, sandbox: connected, base, keptTree, scratch }, ctx)) };
      })().catch(async (err: unknown) => {
        await recording; // a sandbox that is not ours to use: that is the reason to report
        throw err;
      });
      await recording;
      const outcome = await this.runAgent(request, connected, credentials, ctx);
      const next = identityAfterActivation(identity, outcome.makaSessionId, request.sessionId);
      const packed = await this.capture(request, connected, next, scratch, ctx, knownDigests);
      sandbox = undefined;
      // Out of the sandbox before it is destroyed; kept for the next activation once this one has committed.
      const keeping = await this.moveOutForNext(kept, connected, packed, request.sessionId, next);
      destroying = connected.client
        .close()
        .catch(() => undefined)
        .then(() => this.destroySandbox(created, () => undefined));
      let result: ActivationResult;
      try {
        result = await this.commit(request, base, packed.artifact, outcome, ctx);
      } catch (err) {
        await keeping?.discard();
        throw err;
      }
      await keeping?.keep();
      return result;
    } finally {
      await claimed?.then((tree) => tree?.release()); // not placed: kept for the next activation (never rejects)
      await sandbox?.client.close().catch(() => undefined);
      await recorded;
      if (destroying !== undefined && ref !== undefined) {
        ctx.progress('cleanup', `destroying sandbox ${ref.name}`);
        await destroying;
      } else if (ref) await this.destroySandbox(ref, ctx.progress);
      await fsp.rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** 3. Check out the Session's current revision (undefined: no revision yet, it starts from an empty bundle). */
  private async checkout(sessionId: string, ctx: AttemptContext): Promise<CommittedSessionRevision | undefined> {
    ctx.progress('checkout', `checking out ${sessionId}`);
    try {
      return await this.repo.checkoutCurrent(sessionId);
    } catch (err) {
      if (!isSessionRepositoryError(err, 'session_not_found')) throw err;
      return undefined;
    }
  }

  /** 4. A fresh sandbox for this attempt only (`recordSandbox` names it in the activation record). */
  private async createSandbox(request: ActivationRunRequest, provider: SandboxProvider, ctx: AttemptContext): Promise<SandboxRef> {
    const { sessionId, activationId } = request;
    ctx.progress('sandbox', `creating a fresh ${request.sandbox.runtime} sandbox`);
    // Label-safe session and activation ids on the Run (and, for OpenSandbox, on its sandbox): what it is for, to people
    // listing sandboxes and to a sweep of orphans.
    const labels = { ...request.sandbox.labels, [LABEL_SESSION]: labelValue(sessionId), [LABEL_ACTIVATION]: labelValue(activationId) };
    // A bounded life: a leftover of a server that died and whose activation is never retried is ended by its runtime
    // (for OpenSandbox the daemon then deletes the sandbox; the sandbox's TTL is the last resort without a daemon).
    const timeout = request.sandbox.timeout ?? THROWAWAY_SANDBOX_TIMEOUT;
    const created = await provider.create({ ...request.sandbox, labels, timeout }, { waitForReady: true, timeoutMs: this.options.sandboxReadyTimeoutMs ?? 60_000, signal: ctx.signal });
    return created.ref;
  }

  /** The sandbox named in the activation record (so a successor can destroy it); ownership_lost if another server owns it. */
  private async recordSandbox(request: ActivationRunRequest, ref: SandboxRef, ctx: AttemptContext): Promise<void> {
    const { sessionId, activationId } = request;
    const recorded = await this.repo.activations.update(sessionId, activationId, ctx.token, (r) => ({ ...r, sandbox: ref }));
    if (!recorded) throw new ActivationError('ownership_lost', `activation ${activationId} was taken over by another server`);
  }

  /** Which kept tree a checkout of `base` can use: exactly its bundle, read under this runner's limits. */
  private keptTreeKey(request: ActivationRunRequest, base: CommittedSessionRevision): KeptTreeKey {
    return { sessionId: request.sessionId, bundleDigest: base.checkpoint.value.compatibilityBundle.digest, limits: this.limits };
  }

  /** Where activations in this provider's sandboxes keep session trees for the next one; undefined where they cannot. */
  private keptTreesOf(provider: SandboxProvider): KeptSessionTrees | undefined {
    const dir = provider.keptSessionTreesDirectory?.();
    if (dir === undefined) return undefined;
    let kept = this.keptTrees.get(dir);
    if (kept === undefined) this.keptTrees.set(dir, (kept = new KeptSessionTrees(dir, this.options.log)));
    return kept;
  }

  /**
   * 5. Hydrate the checked-out bundle into the sandbox (straight into a local sandbox's directory — or, when the last
   * activation here left exactly this revision's tree, that tree moved in; else uploaded as one file and unpacked by
   * `tar` in the sandbox when its image can; else through `scratch` and file by file); 6. the request as a JSON file;
   * credentials under the config root (written while the session is hydrated: it lies beside it). Returns the
   * session's state identity and the credentials.
   */
  private async hydrate(into: SessionInto, ctx: AttemptContext): Promise<MovedSession & { credentials: ActivationCredentials }> {
    const { request, sandbox } = into;
    const credentials = (await this.options.credentials?.(request)) ?? {};
    // The config root is written while the session moves in, the request file once the session's identity is known.
    const config = writeConfigRoot(sandbox.client, credentials, ctx.signal);
    const configSettled = config.catch(() => undefined);
    let moved: MovedSession;
    try {
      moved = await this.moveSessionIn(into, ctx);
      await writeActivationInput(sandbox.client, { request, identity: moved.identity }, ctx.signal);
    } finally {
      await configSettled;
    }
    await config;
    return { ...moved, credentials };
  }

  /**
   * The session into the sandbox: the tree the last activation here left when it is exactly this revision, else the
   * checked-out bundle (or an empty session). Returns its state identity and, for the capture's pack, the digests of
   * the files written here.
   */
  private async moveSessionIn(into: SessionInto, ctx: AttemptContext): Promise<MovedSession> {
    const { request, sandbox, base, keptTree, scratch } = into;
    const placement = { kind: 'session', dir: REMOTE.session } as const;
    // A sandbox without a directory here (an OpenSandbox one behind the local provider) leaves the tree for `release`.
    const claimed = sandbox.hostRoot !== undefined ? await keptTree : undefined;
    const taken = sandbox.hostRoot !== undefined ? await claimed?.placeInto(path.join(sandbox.hostRoot, placement.dir)) : undefined;
    if (taken !== undefined) {
      ctx.progress('hydrate', 'using the session tree the last activation on this machine left (unchanged since)');
      return taken;
    }
    if (sandbox.hostRoot !== undefined) ctx.progress('hydrate', "hydrating the session in the sandbox's directory");
    // What a hydrate in the sandbox's directory wrote: the capture's pack does not hash those files again while unchanged.
    const knownDigests = new Map<string, KnownDigest>();
    if (base === undefined) {
      if (sandbox.hostRoot === undefined) ctx.progress('hydrate', 'creating an empty session in the sandbox');
      await hydrateInto(sandbox, await emptySession(scratch), placement, { signal: ctx.signal });
      return { identity: undefined, knownDigests };
    }
    const onTransfer = (t: SessionTransfer): void =>
      ctx.progress(
        'hydrate',
        t.how === 'files'
          ? `copying the session into the sandbox, file by file (${t.reason})`
          : t.compression === 'zstd'
            ? `uploading the session bundle as one file and unpacking it with ${tarName(t.tar)} in the sandbox`
            : `uploading the session as one uncompressed tar (the image has no zstd) and unpacking it with ${tarName(t.tar)} in the sandbox`,
      );
    const input = { objects: this.repo.objects, checkpoint: base.checkpoint, sessionId: request.sessionId, limits: this.limits, scratch };
    const identity = await checkoutInto(sandbox, placement, input, { signal: ctx.signal, onTransfer, knownDigests });
    return { identity, knownDigests };
  }

  /** 7. Run the activation command; its JSONL goes to the caller as provisional events. */
  private async runAgent(request: ActivationRunRequest, sandbox: ConnectedSandbox, credentials: ActivationCredentials, ctx: AttemptContext): Promise<ActivationOutcomeEvent> {
    ctx.progress('agent', 'running the activation');
    const { outcome } = await runAgentCommand({
      client: sandbox.client,
      argv: activationArgv(this.command, sandbox.root),
      env: { ...(this.command.env ?? {}), ...(credentials.env ?? {}) },
      activationId: request.activationId,
      timeoutMs: Math.min(this.command.timeoutMs ?? MAX_COMMAND_TIMEOUT_MS, MAX_COMMAND_TIMEOUT_MS),
      signal: ctx.signal,
      onEvent: ctx.onEvent,
    });
    return outcome;
  }

  /** 8. Bring state and workspace back, through the snapshot policy, packed with the next identity and envelope. */
  private async capture(
    request: ActivationRunRequest,
    sandbox: ConnectedSandbox,
    stateIdentity: SessionIdentity,
    scratch: string,
    ctx: AttemptContext,
    knownDigests: ReadonlyMap<string, KnownDigest>,
  ): Promise<PackedWorkspace> {
    const { sessionId, activationId } = request;
    // How the session crosses the gateway, told before the step that moves it: the image's tar, or why file by file.
    let transfer: SessionTransfer | undefined;
    const steps = (): Record<CaptureStep, [string, string]> => ({
      'read-in-place': ['download', "reading state and workspace in the sandbox's directory"],
      download: ['download', `copying state and workspace out of the sandbox, file by file${transfer?.how === 'files' ? ` (${transfer.reason})` : ''}`],
      repack: ['download', `packing state and workspace with ${transfer?.how === 'tarball' ? tarName(transfer.tar) : 'tar'} in the sandbox and downloading them as one file`],
      snapshot: ['snapshot', 'applying the workspace policy'],
      pack: ['pack', 'packing the session'],
    });
    return captureFrom(
      sandbox,
      { kind: 'session', dir: REMOTE.session },
      {
        sessionId,
        lastCommittedActivationId: activationId,
        stateIdentity,
        limits: this.limits,
        destination: path.join(scratch, 'next.tar.zst'),
      },
      // The agent has exited, and the runtime kills whatever a command leaves behind: nothing runs in the sandbox
      // any more (and pack refuses a change if that promise were broken), so its directory is packed in place.
      { scratch, signal: ctx.signal, onTransfer: (t) => (transfer = t), onStep: (step) => ctx.progress(...steps()[step]), quiet: true, knownDigests },
    );
  }

  /** The session just packed in the sandbox's own directory, moved out to be kept for the next activation here. */
  private async moveOutForNext(
    kept: KeptSessionTrees | undefined,
    sandbox: ConnectedSandbox,
    packed: PackedWorkspace,
    sessionId: string,
    identity: SessionIdentity,
  ): Promise<TreeToKeep | undefined> {
    if (kept === undefined || sandbox.hostRoot === undefined || packed.inPlace === undefined) return undefined;
    const next = { sessionId, bundleDigest: packed.artifact.archiveDigest, identity, limits: this.limits };
    return kept.moveOut(path.join(sandbox.hostRoot, REMOTE.session), packed.inPlace, next);
  }

  /** 9. Publish, record the pending commit, CAS-commit; 10. only then is the outcome committed. */
  private async commit(
    request: ActivationRunRequest,
    base: CommittedSessionRevision | undefined,
    artifact: SessionBundleArtifact,
    outcome: ActivationOutcomeEvent,
    ctx: AttemptContext,
  ): Promise<ActivationResult> {
    const { sessionId, activationId } = request;
    ctx.progress('commit', 'committing');
    // The packed bundle lives in this activation's private scratch and is not used again: hand it over, with the digest
    // our pack computed as it wrote it (a file store then moves it in without reading it while it is unchanged).
    const checkpoint = await publishSessionCheckpointV1({
      objectStore: this.repo.objects,
      compatibilityBundle: artifact,
      handOverBundle: true,
      writtenBundle: writtenArchiveOf(artifact),
    });
    const pending: PendingActivationCommit = {
      commitId: commitIdFor(sessionId, activationId, ctx.attempt),
      expectedRevision: base ? base.ref.revision : null,
      agentId: base ? base.agentId : (request.agentId ?? this.options.defaultAgentId ?? DEFAULT_AGENT_ID),
      checkpoint,
    };
    const lost = ctx.lost();
    if (lost !== undefined) throw new ActivationError('ownership_lost', lost);
    // One write: the revision, this record committed with the outcome, the lease given back. A crash before it leaves
    // the record running (a retry runs the turn again: nothing was committed); after it, a retry gets the outcome.
    let committed: CommittedSessionRevision;
    ctx.givingLeaseBack();
    try {
      committed = await commitCheckpoint(this.repo, sessionId, activationId, pending, { activationId, token: ctx.token, outcome });
    } catch (err) {
      if (isSessionRepositoryError(err) && (err.code === 'revision_conflict' || err.code === 'session_already_exists')) {
        throw new ActivationError('revision_conflict', `another writer committed session ${sessionId} first (${err.message}); this activation's output was discarded — retry the activation`);
      }
      if (isSessionRepositoryError(err, 'idempotency_conflict')) throw new ActivationError('ownership_lost', `${err.message}; its output was discarded`);
      throw err;
    }
    ctx.progress('done', `committed ${committed.ref.sessionId}@${committed.ref.revision}`);
    return { sessionId, activationId, commit: 'committed', revision: committed.ref.revision, outcome, deduplicated: false, attempt: ctx.attempt };
  }

  private destroySandbox(ref: SandboxRef, progress: (phase: string, message?: string) => void): Promise<void> {
    return destroySandbox(this.options.providers[ref.provider], ref, this.options.log, progress);
  }
}
