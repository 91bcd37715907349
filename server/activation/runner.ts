// One activation (one agent turn) of a Session in a fresh, throw-away sandbox — seed 000's sequence,
// in this order: claim the activation id (a committed id returns its stored outcome and runs
// nothing) → take the Session's lease → check out (no Session yet: an empty bundle) → create a fresh
// sandbox → hydrate the bundle into it → write the ActivationRequest as a JSON file → run the
// activation command, streaming its JSONL as provisional events → bring state and workspace back
// and pack them through the snapshot policy → publish + CAS-commit with lastCommittedActivationId
// and a commitId → only then mark the outcome committed and return it; the sandbox is destroyed in
// `finally`. A CAS loser returns `revision_conflict` and never its output. Credentials reach the
// sandbox per activation (config-root files, env) and never the bundle.
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  type ActivationEvent,
  type ActivationOutcomeEvent,
  ActivationOutcomeEventSchema,
  type ActivationRequest,
  type ActivationResult,
  type ActivationRunRequest,
  ActivationRunRequestSchema,
} from '../../protocol/activation';
import { DEFAULT_PEOPLE_LIMITS, type SessionBundleLimits } from '../../protocol/bundle';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { CommittedSessionRevision } from '../../protocol/repository';
import type { ProviderKind, SandboxRef } from '../../protocol/sandboxes';
import { hydrateSessionBundle, packSessionBundle, type PreparedSnapshot, prepareWorkspaceSnapshot, SessionBundleError, SessionSnapshotError } from '../bundle';
import { classifyWorkspacePath } from '../bundle/snapshotPolicy';
import type { Logger } from '../log';
import { newOwnerToken } from '../repository/activationStore';
import { openSessionCheckpointBundleV1, publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { isSessionRepositoryError, SessionRepositoryError } from '../repository/errors';
import { encodeJcs } from '../repository/jcs';
import type { ActivationRecord, PendingActivationCommit } from '../repository/records';
import type { SandboxProvider } from '../sandboxes/provider';
import { confirmedHostRoot, placeSession } from '../sandboxes/hostPlacement';
import { downloadTree, uploadTree } from '../sandboxes/transfer';
import { runAgentCommand } from './agentCommand';
import { ActivationError, isActivationError } from './errors';
import { type ActivationCommandConfig, activationArgv, DEFAULT_ACTIVATION_COMMAND, REMOTE } from './sandboxLayout';
import { DEFAULT_LEASE_POLICY, Heartbeat, type LeasePolicy, SessionAdmission } from './sessionLease';
import { identityAfterActivation, makaSessionIdOf, type StateIdentity } from './stateIdentity';

/** What one activation gets that must never be bundled: env (e.g. API keys) and files under --config-root. */
export interface ActivationCredentials {
  env?: Record<string, string>;
  /** Paths relative to the config root → contents. */
  configFiles?: Record<string, string | Uint8Array>;
}

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
export const DEFAULT_AGENT_ID = 'default-agent';

function sha256(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

/** The deterministic commitId of one attempt (a retry of a pending commit reuses it). */
function commitIdFor(sessionId: string, activationId: string, attempt: number): string {
  return `activation-${createHash('sha256').update(`${sessionId}\u0000${activationId}\u0000${attempt}`).digest('hex').slice(0, 40)}`;
}

function notCommitted(request: ActivationRunRequest, code: ActivationError['code'], message: string, attempt?: number): ActivationResult {
  return {
    sessionId: request.sessionId,
    activationId: request.activationId,
    commit: 'not_committed',
    error: { code, message },
    deduplicated: false,
    ...(attempt !== undefined ? { attempt } : {}),
  };
}

function committedResult(record: ActivationRecord, deduplicated: boolean): ActivationResult {
  const outcome = ActivationOutcomeEventSchema.parse(record.outcome);
  return {
    sessionId: record.sessionId,
    activationId: record.activationId,
    commit: 'committed',
    ...(record.revision !== undefined ? { revision: record.revision } : {}),
    outcome,
    deduplicated,
    attempt: record.attempt,
  };
}

/** Maps whatever failed during a run to a stable code (not committed). */
function classify(err: unknown): ActivationError {
  if (isActivationError(err)) return err;
  if (err instanceof SessionSnapshotError) {
    return new ActivationError(err.code === 'policy_rejected' ? 'policy_rejected' : 'bundle_failed', `the session could not be snapshotted: ${err.message}`, { cause: err });
  }
  if (err instanceof SessionBundleError) return new ActivationError('bundle_failed', `the session bundle failed: ${err.message}`, { cause: err });
  if (err instanceof SessionRepositoryError) return new ActivationError('repository_failed', `the session repository failed: ${err.message}`, { cause: err });
  return new ActivationError('sandbox_failed', `the activation failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

export class ActivationRunner {
  private readonly admission: SessionAdmission;
  private readonly policy: LeasePolicy;
  private readonly command: ActivationCommandConfig;
  private readonly limits: SessionBundleLimits;

  constructor(private readonly options: ActivationRunnerOptions) {
    this.policy = { ...DEFAULT_LEASE_POLICY, ...options.lease };
    this.admission = new SessionAdmission(options.repository.activations, this.policy);
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
    const requestDigest = sha256(encodeJcs(request.stimulus ?? null));
    const claim = await this.repo.activations.claim({ sessionId, activationId, requestDigest, token, ttlMs: this.policy.ttlMs });
    if (claim.kind === 'committed') return committedResult(claim.record, true);
    if (claim.kind === 'in_progress') {
      throw new ActivationError('activation_in_progress', `activation ${activationId} of session ${sessionId} is running right now (attempt ${claim.record.attempt}); wait for it and retry to get its outcome`);
    }
    if (claim.kind === 'conflict') {
      throw new ActivationError('idempotency_conflict', `activation id ${activationId} was already used for session ${sessionId} with a different stimulus; use a new activation id`);
    }
    const attempt = claim.record.attempt;
    let lostReason: string | undefined;
    const internal = new AbortController();
    const heartbeat = new Heartbeat(this.repo.activations, { sessionId, activationId, token, ttlMs: this.policy.ttlMs }, (why) => {
      lostReason ??= why;
      internal.abort();
    });
    heartbeat.start();
    const signal = options.signal ? AbortSignal.any([options.signal, internal.signal]) : internal.signal;
    const abort = async (code: ActivationError['code'], message: string) => {
      await this.repo.activations
        .update(sessionId, activationId, token, (r) => {
          const next: ActivationRecord = { ...r, state: 'aborted', error: { code, message } };
          delete next.owner;
          delete next.pending;
          delete next.outcome;
          return next;
        })
        .catch((err: unknown) => this.options.log.warn('could not record an aborted activation', { activationId, error: (err as Error).message }));
    };

    let leaseHeld = false;
    try {
      // A dead predecessor may have left its sandbox behind.
      if (claim.previous?.sandbox) await this.destroySandbox(claim.previous.sandbox, progress);

      // 2. One activation at a time per Session.
      progress('admission', `waiting for session ${sessionId}`);
      try {
        await this.admission.acquire(sessionId, activationId, token, signal, (holder) => progress('queued', `session ${sessionId} is busy with ${holder}; waiting`));
      } catch (err) {
        const e = classify(err);
        await abort(e.code, e.message);
        throw e;
      }
      leaseHeld = true;
      heartbeat.leaseHeld();

      // A predecessor that died between publish and commit: finish its commit (same commitId) rather than run again.
      if (claim.previous?.state === 'committing' && claim.previous.pending && claim.previous.outcome) {
        const finished = await this.finishPending(claim.record, claim.previous.pending, claim.previous.outcome, token);
        if (finished) return finished;
      }

      const onEvent = options.onEvent;
      const deliver = (event: ActivationEvent) => {
        try {
          onEvent?.(event);
        } catch (err) {
          // A failing listener must not fail the activation.
          this.options.log.warn('an activation event listener threw', { activationId, error: (err as Error).message });
        }
      };
      return await this.runFresh(request, provider, { token, attempt, signal, progress, onEvent: deliver, lost: () => lostReason });
    } catch (err) {
      if (isActivationError(err) && (err.code === 'session_busy' || err.code === 'activation_cancelled') && !leaseHeld) throw err;
      const e =
        lostReason !== undefined
          ? new ActivationError('ownership_lost', `${lostReason}; nothing of this attempt was committed`)
          : options.signal?.aborted && !isActivationError(err)
            ? new ActivationError('activation_cancelled', 'the activation was cancelled; nothing was committed')
            : classify(err);
      this.options.log.warn('activation not committed', { sessionId, activationId, attempt, code: e.code, error: e.message });
      if (e.code !== 'ownership_lost') await abort(e.code, e.message);
      return notCommitted(request, e.code, e.message, attempt);
    } finally {
      await heartbeat.stop();
      if (leaseHeld) {
        await this.repo.activations
          .releaseLease({ sessionId, token })
          .catch((err: unknown) => this.options.log.warn('could not release the session lease (it will expire)', { sessionId, error: (err as Error).message }));
      }
    }
  }

  /** Completes a predecessor's published-but-maybe-uncommitted checkpoint; undefined when it lost and must run again. */
  private async finishPending(record: ActivationRecord, pending: PendingActivationCommit, outcome: Record<string, unknown>, token: string): Promise<ActivationResult | undefined> {
    try {
      const committed = await this.commitCheckpoint(record.sessionId, record.activationId, pending);
      const done = await this.markCommitted(record, token, committed, outcome);
      return done ? committedResult(done, true) : undefined;
    } catch (err) {
      if (isSessionRepositoryError(err) && ['revision_conflict', 'session_already_exists', 'object_not_found', 'integrity_mismatch'].includes(err.code)) {
        this.options.log.info('a pending commit of an earlier attempt lost; running the activation again', { activationId: record.activationId, code: err.code });
        // Forget the lost attempt's checkpoint and outcome: this attempt starts over.
        const reset = await this.repo.activations.update(record.sessionId, record.activationId, token, (r) => {
          const next: ActivationRecord = { ...r, state: 'running' };
          delete next.pending;
          delete next.outcome;
          return next;
        });
        if (!reset) throw new ActivationError('ownership_lost', `activation ${record.activationId} was taken over by another server`);
        return undefined;
      }
      throw err;
    }
  }

  private async runFresh(
    request: ActivationRunRequest,
    provider: SandboxProvider,
    ctx: {
      token: string;
      attempt: number;
      signal: AbortSignal;
      progress: (phase: string, message?: string) => void;
      onEvent: (event: ActivationEvent) => void;
      lost: () => string | undefined;
    },
  ): Promise<ActivationResult> {
    const { sessionId, activationId } = request;
    const { progress, signal } = ctx;
    const scratch = await fsp.mkdtemp(path.join(this.options.scratchParent ?? os.tmpdir(), 'ss-activation-'));
    await fsp.chmod(scratch, 0o700);
    let sandbox: SandboxRef | undefined;
    let client: GatewayClient | undefined;
    try {
      // 3. Check out (a Session with no revision starts from an empty bundle).
      progress('checkout', `checking out ${sessionId}`);
      let base: CommittedSessionRevision | undefined;
      try {
        base = await this.repo.checkoutCurrent(sessionId);
      } catch (err) {
        if (!isSessionRepositoryError(err, 'session_not_found')) throw err;
      }
      const hydrated = path.join(scratch, 'hydrated');
      let identity: StateIdentity | undefined;
      if (base) {
        const bundle = await openSessionCheckpointBundleV1({
          objectStore: this.repo.objects,
          checkpoint: base.checkpoint,
          copyTo: path.join(scratch, 'base.tar.zst'),
          maxBytes: this.limits.maxCompressedBytes,
        });
        try {
          const h = await hydrateSessionBundle({
            source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest },
            expectedSessionId: sessionId,
            destinationRoot: hydrated,
            limits: this.limits,
          });
          identity = { mediaType: h.manifest.stateIdentity.mediaType, bytes: await fsp.readFile(path.join(hydrated, 'state-identity.json')) };
        } finally {
          await bundle.release();
        }
      } else {
        await fsp.mkdir(path.join(hydrated, 'state'), { recursive: true });
        await fsp.mkdir(path.join(hydrated, 'workspace'), { recursive: true });
      }

      // 4. A fresh sandbox for this attempt only.
      progress('sandbox', `creating a fresh ${request.sandbox.runtime} sandbox`);
      const created = await provider.create(
        { ...request.sandbox },
        { waitForReady: true, timeoutMs: this.options.sandboxReadyTimeoutMs ?? 60_000, signal },
      );
      sandbox = created.ref;
      const recorded = await this.repo.activations.update(sessionId, activationId, ctx.token, (r) => ({ ...r, sandbox: created.ref }));
      if (!recorded) throw new ActivationError('ownership_lost', `activation ${activationId} was taken over by another server`);
      const connection = await provider.open(created.ref);
      client = new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls });
      const pwd = await client.runCommand({ argv: ['pwd'] }, { signal });
      const root = pwd.stdout.toString('utf8').trim();
      if (pwd.exitCode !== 0 || !root.startsWith('/')) throw new ActivationError('sandbox_failed', `cannot find the sandbox root (pwd exited ${pwd.exitCode})`);

      // 5. Hydrate into it (moved straight into a local sandbox's directory, else file by file through the
      // gateway); 6. the request as a JSON file; credentials under the config root.
      const hostRoot = await confirmedHostRoot(await provider.hostDirectory?.(created.ref), root);
      progress('hydrate', hostRoot !== undefined ? "moving the session into the sandbox's directory" : 'copying the session into the sandbox, file by file');
      if (hostRoot !== undefined) {
        await placeSession(hydrated, path.join(hostRoot, REMOTE.session));
      } else {
        await client.createDirectory(REMOTE.session, { signal });
        await uploadTree(client, path.join(hydrated, 'state'), REMOTE.state, { signal });
        await uploadTree(client, path.join(hydrated, 'workspace'), REMOTE.workspace, { signal });
      }
      const makaSessionId = makaSessionIdOf(identity);
      const activationRequest: ActivationRequest = {
        schemaVersion: 1,
        activationId,
        cloudSessionId: sessionId,
        ...(makaSessionId !== undefined ? { makaSessionId } : {}),
        stimulus: request.stimulus,
      };
      await client.writeFile(REMOTE.input, Buffer.from(JSON.stringify(activationRequest), 'utf8'), { createParents: true }, { signal });
      const credentials = (await this.options.credentials?.(request)) ?? {};
      await client.createDirectory(REMOTE.config, { signal });
      for (const [rel, contents] of Object.entries(credentials.configFiles ?? {})) {
        await client.writeFile(`${REMOTE.config}/${rel}`, typeof contents === 'string' ? Buffer.from(contents, 'utf8') : contents, { createParents: true }, { signal });
      }

      // 7. Run the activation command; its JSONL goes to the caller as provisional events.
      progress('agent', 'running the activation');
      const timeoutMs = Math.min(this.command.timeoutMs ?? MAX_COMMAND_TIMEOUT_MS, MAX_COMMAND_TIMEOUT_MS);
      const { outcome } = await runAgentCommand({
        client,
        argv: activationArgv(this.command, root),
        env: { ...(this.command.env ?? {}), ...(credentials.env ?? {}) },
        activationId,
        timeoutMs,
        signal,
        onEvent: ctx.onEvent,
      });

      // 8. Bring state and workspace back; snapshot (policy) and pack. A local sandbox's directory is snapshotted
      // in place (one copy instead of two), unless it holds what only the gateway brings back faithfully (a symbolic
      // link, which the gateway follows inside the sandbox and the snapshot refuses): then the gateway path, as for
      // any other sandbox.
      const staging = path.join(scratch, 'staging');
      await fsp.mkdir(staging, { mode: 0o700 });
      let snapshot: PreparedSnapshot | undefined;
      if (hostRoot !== undefined) {
        progress('download', "reading state and workspace in the sandbox's directory");
        progress('snapshot', 'applying the workspace policy');
        const session = path.join(hostRoot, REMOTE.session);
        snapshot = await prepareWorkspaceSnapshot({ stateRoot: path.join(session, 'state'), workspaceRoot: path.join(session, 'workspace'), stagingParent: staging }).catch(
          (err: unknown) => {
            if (err instanceof SessionSnapshotError && err.code === 'unsafe_source') return undefined;
            throw err;
          },
        );
      }
      if (snapshot === undefined) {
        progress('download', 'copying state and workspace out of the sandbox, file by file');
        const back = path.join(scratch, 'back');
        await fsp.mkdir(back, { mode: 0o700 });
        await downloadTree(client, REMOTE.state, path.join(back, 'state'), { signal });
        await downloadTree(client, REMOTE.workspace, path.join(back, 'workspace'), {
          signal,
          // Excluded by the policy anyway (.git, node_modules, caches, logs): not worth the transfer.
          skip: (rel, isDirectory) => classifyWorkspacePath(rel.split('/'), isDirectory).verdict === 'exclude',
        });
        progress('snapshot', 'applying the workspace policy');
        snapshot = await prepareWorkspaceSnapshot({ stateRoot: path.join(back, 'state'), workspaceRoot: path.join(back, 'workspace'), stagingParent: staging });
      }
      let artifactPath: string;
      let artifact;
      progress('pack', 'packing the session');
      try {
        artifactPath = path.join(scratch, 'next.tar.zst');
        artifact = await packSessionBundle({
          stateRoot: snapshot.snapshot.stateRoot,
          workspaceRoot: snapshot.snapshot.workspaceRoot,
          stateIdentity: identityAfterActivation(identity, outcome.makaSessionId, sessionId),
          envelope: { sessionId, lastCommittedActivationId: activationId },
          destination: artifactPath,
          limits: this.limits,
        });
      } finally {
        await snapshot.release();
      }

      // 9. Publish, record the pending commit, CAS-commit.
      progress('commit', 'committing');
      // The packed bundle lives in this activation's private scratch and is not used again: hand it over.
      const checkpoint = await publishSessionCheckpointV1({ objectStore: this.repo.objects, compatibilityBundle: artifact, handOverBundle: true });
      const pending: PendingActivationCommit = {
        commitId: commitIdFor(sessionId, activationId, ctx.attempt),
        expectedRevision: base ? base.ref.revision : null,
        agentId: base ? base.agentId : (request.agentId ?? this.options.defaultAgentId ?? DEFAULT_AGENT_ID),
        checkpoint,
      };
      const lost = ctx.lost();
      if (lost !== undefined) throw new ActivationError('ownership_lost', lost);
      const committing = await this.repo.activations.update(sessionId, activationId, ctx.token, (r) => ({ ...r, state: 'committing', pending, outcome }));
      if (!committing) throw new ActivationError('ownership_lost', `activation ${activationId} was taken over by another server before its commit`);
      let committed: CommittedSessionRevision;
      try {
        committed = await this.commitCheckpoint(sessionId, activationId, pending);
      } catch (err) {
        if (isSessionRepositoryError(err) && (err.code === 'revision_conflict' || err.code === 'session_already_exists')) {
          throw new ActivationError('revision_conflict', `another writer committed session ${sessionId} first (${err.message}); this activation's output was discarded — retry the activation`);
        }
        throw err;
      }

      // 10. Only now is the outcome committed.
      const done = await this.markCommitted(committing, ctx.token, committed, outcome);
      if (!done) throw new ActivationError('ownership_lost', `activation ${activationId} was taken over after its commit; its retry returns the committed outcome`);
      progress('done', `committed ${committed.ref.sessionId}@${committed.ref.revision}`);
      return committedResult(done, false);
    } finally {
      await client?.close().catch(() => undefined);
      if (sandbox) await this.destroySandbox(sandbox, progress);
      await fsp.rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  private async commitCheckpoint(sessionId: string, activationId: string, pending: PendingActivationCommit): Promise<CommittedSessionRevision> {
    if (pending.expectedRevision === null) {
      try {
        return await this.repo.createSession({ sessionId, agentId: pending.agentId, checkpoint: pending.checkpoint, lastCommittedActivationId: activationId });
      } catch (err) {
        // A retry of our own create: the Session's r1 is exactly what we published.
        if (isSessionRepositoryError(err, 'session_already_exists')) {
          const r1 = await this.repo.checkoutExact({ sessionId, revision: 'r1' }).catch(() => undefined);
          if (r1 && r1.lastCommittedActivationId === activationId && encodeJcs(r1.checkpoint) === encodeJcs(pending.checkpoint)) return r1;
        }
        throw err;
      }
    }
    return this.repo.commit({
      sessionId,
      expectedRevision: pending.expectedRevision,
      checkpoint: pending.checkpoint,
      lastCommittedActivationId: activationId,
      commitId: pending.commitId,
    });
  }

  private markCommitted(record: ActivationRecord, token: string, committed: CommittedSessionRevision, outcome: Record<string, unknown>): Promise<ActivationRecord | undefined> {
    const parsed: ActivationOutcomeEvent = ActivationOutcomeEventSchema.parse(outcome);
    return this.repo.activations.update(record.sessionId, record.activationId, token, (r) => {
      const next: ActivationRecord = { ...r, state: 'committed', revision: committed.ref.revision, outcome: parsed };
      delete next.owner;
      delete next.pending;
      delete next.sandbox;
      delete next.error;
      return next;
    });
  }

  /** Best effort, bounded: cancel the sandbox and delete its record. */
  private async destroySandbox(ref: SandboxRef, progress: (phase: string, message?: string) => void): Promise<void> {
    const provider = this.options.providers[ref.provider];
    if (!provider) return;
    progress('cleanup', `destroying sandbox ${ref.name}`);
    try {
      await provider.terminate(ref, 'Immediate', { wait: true, timeoutMs: 30_000 });
    } catch (err) {
      this.options.log.debug('terminating the activation sandbox', { sandbox: ref.name, error: (err as Error).message });
    }
    try {
      await provider.delete(ref);
    } catch (err) {
      this.options.log.debug('deleting the activation sandbox', { sandbox: ref.name, error: (err as Error).message });
    }
  }
}
