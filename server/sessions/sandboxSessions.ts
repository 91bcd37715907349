// Sessions made from sandboxes and sandboxes made from sessions: save a sandbox's workspace as a
// revision (snapshotted in place for a local sandbox, else copied out through the gateway; snapshot
// policy applied, packed, published, then create/commit with compare-and-set), and open any
// retained revision in a fresh sandbox. Either way the sandbox's Run records the revision (protocol/sandboxRevision.ts),
// so every client compares it with that revision. The moving itself is the workspace mover's (sandboxes/workspaceMover.ts).
// Also a bundle file brought from elsewhere (Export Revision on another machine, Maka) imported as a revision of
// its own session, checked byte for byte first.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS, type WorkspaceSnapshotReport } from '../../protocol/bundle';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { CommittedSessionRevision, RevisionSummary, SessionSummary } from '../../protocol/repository';
import { type ProviderKind, type SandboxCreateSpec, type SandboxRef, type SandboxSummary, sandboxKey } from '../../protocol/sandboxes';
import { sessionRevisionAnnotation } from '../../protocol/sandboxRevision';
import { neutralIdentity } from '../activation/stateIdentity';
import type { PackedWorkspace } from '../bundle/packWorkspace';
import type { BundleProgress } from '../bundle/reader';
import type { Logger } from '../log';
import { materializeSessionCheckpointV1, publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { SandboxError, type SandboxProvider, type WorkOptions } from '../sandboxes/provider';
import type { KnownWorkspace } from '../sandboxes/remoteWorkspace';
import { type CaptureStep, captureFrom, checkoutSession, checkoutWorkspaceInto, type HydratedSession, hostRootOf, type SandboxAccess, type SessionTransfer } from '../sandboxes/workspaceMover';
import { SandboxSessionsError } from '../../protocol/errors';
import { knownWorkspaceOf, type RevisionIndexCache } from './revisionIndex';

export const DEFAULT_AGENT_ID = 'sandbox-sessions';

export class SessionExportError extends SandboxSessionsError<'destination_exists'> {
  override readonly name = 'SessionExportError';
  readonly service = 'sessions';
  constructor(message: string) {
    super('destination_exists', message);
  }
}

export interface SaveSandboxInput {
  sandbox: SandboxRef;
  sessionId: string;
  /** Absent: create the session (r1). Present: commit on top of exactly this revision. */
  expectedRevision?: string | undefined;
  agentId?: string | undefined;
  commitId?: string | undefined;
}

export interface ImportBundleInput {
  /** An absolute path to the `.tar.zst`. */
  path: string;
  /** Absent: the bundle's session is created (r1). Present: committed on top of exactly this revision. */
  expectedRevision?: string | undefined;
  agentId?: string | undefined;
}

export interface SavedSandbox {
  revision: CommittedSessionRevision;
  bundle: { digest: string; bytes: number; entryCount: number };
  workspace: WorkspaceSnapshotReport;
}

export class SandboxSessionService {
  constructor(
    private readonly repository: () => Promise<SessionRepository>,
    private readonly providers: ReadonlyMap<ProviderKind, SandboxProvider>,
    /** Where the repository is, as people may see it (no password). */
    readonly location: { kind: 'file' | 'postgres'; description: string },
    private readonly log: Logger,
    /** Revisions held here: a save of a remote sandbox takes from one the files that are unchanged in it. */
    private readonly revisionIndexes?: RevisionIndexCache,
  ) {}

  private provider(kind: ProviderKind): SandboxProvider {
    const p = this.providers.get(kind);
    if (!p) throw new SandboxError('provider_unavailable', `the ${kind} provider is not available in this server`);
    return p;
  }

  async list(): Promise<SessionSummary[]> {
    return (await this.repository()).listSessions();
  }

  /** Writes a retained revision's bundle to a new file (verified while copying). */
  async export(input: { sessionId: string; revision?: string | undefined; destination: string }): Promise<{
    revision: CommittedSessionRevision;
    path: string;
    digest: string;
    bytes: number;
  }> {
    if (await fsp.lstat(input.destination).then(() => true, () => false)) {
      throw new SessionExportError(`${input.destination} already exists; choose a new file name (an export never overwrites)`);
    }
    const repository = await this.repository();
    const revision =
      input.revision === undefined
        ? await repository.checkoutCurrent(input.sessionId)
        : await repository.checkoutExact({ sessionId: input.sessionId, revision: input.revision });
    const out = await materializeSessionCheckpointV1({
      objectStore: repository.objects,
      checkpoint: revision.checkpoint,
      destination: input.destination,
      maxBytes: DEFAULT_PEOPLE_LIMITS.maxCompressedBytes,
    });
    return { revision, path: out.path, digest: out.expectedArchiveDigest, bytes: out.bytes };
  }

  /**
   * A bundle file as a revision of the session it was packed for (its manifest names it: a bundle is bound to its
   * session, and every later checkout checks that). Every byte is checked first, as `bundles/inspect` does, so a
   * corrupt or tampered file is refused before the repository holds it; then published and created or committed
   * with compare-and-set, like a save.
   */
  async importBundle(input: ImportBundleInput, work: WorkOptions & { onBundleProgress?: (p: BundleProgress) => void } = {}): Promise<{
    revision: CommittedSessionRevision;
    bundle: { digest: string; bytes: number; entryCount: number };
  }> {
    work.progress?.('checking', `checking ${path.basename(input.path)}`);
    const { inspectSessionBundle } = await import('../bundle/inspect.js');
    const inspected = await inspectSessionBundle({ source: { path: input.path }, limits: DEFAULT_PEOPLE_LIMITS, ...(work.onBundleProgress ? { onProgress: work.onBundleProgress } : {}) });
    work.signal?.throwIfAborted();
    const sessionId = inspected.manifest.envelope.sessionId;
    const repository = await this.repository();
    work.progress?.('committing', `committing ${sessionId}`);
    const checkpoint = await publishSessionCheckpointV1({
      objectStore: repository.objects,
      compatibilityBundle: { path: input.path, archiveDigest: inspected.archiveDigest, compressedBytes: inspected.compressedBytes },
      sessionId,
    });
    const revision =
      input.expectedRevision === undefined
        ? await repository.createSession({ sessionId, agentId: input.agentId ?? DEFAULT_AGENT_ID, checkpoint })
        : await repository.commit({ sessionId, expectedRevision: input.expectedRevision, checkpoint });
    return { revision, bundle: { digest: inspected.archiveDigest, bytes: inspected.compressedBytes, entryCount: inspected.entryCount } };
  }

  async revisions(sessionId: string): Promise<RevisionSummary[]> {
    return (await this.repository()).listRevisions(sessionId);
  }

  private async client(ref: SandboxRef): Promise<GatewayClient> {
    const connection = await this.provider(ref.provider).open(ref);
    return new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls, readRetryWindowMs: 2000 });
  }

  /** The sandbox's gateway, and its root on this machine when it is a local sandbox's directory. */
  private async access(ref: SandboxRef, client: GatewayClient, signal?: AbortSignal): Promise<SandboxAccess> {
    return { client, hostRoot: await hostRootOf(this.provider(ref.provider), ref, client, { signal }) };
  }

  /** The sandbox's gateway and, for a local sandbox, its directory here (confirmed by its `pwd`); close it when done. */
  async reach(ref: SandboxRef, signal?: AbortSignal): Promise<SandboxAccess & { close(): Promise<void> }> {
    const client = await this.client(ref);
    try {
      return { ...(await this.access(ref, client, signal)), close: () => client.close() };
    } catch (err) {
      await client.close();
      throw err;
    }
  }

  async saveSandbox(input: SaveSandboxInput, work: WorkOptions = {}): Promise<SavedSandbox> {
    const repository = await this.repository();
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-save-'));
    const client = await this.client(input.sandbox);
    try {
      // Snapshotted straight from a local sandbox's directory, else copied out first; the workspace policy either way.
      const access = await this.access(input.sandbox, client, work.signal);
      const known = access.hostRoot === undefined ? await this.knownFor(input) : undefined;
      work.progress?.(
        'copying',
        known === undefined ? `copying the workspace of ${input.sandbox.name}` : `copying what changed in ${input.sandbox.name} since ${known.revision}`,
      );
      let copied = false;
      const onStep = (step: CaptureStep): void => {
        if (step === 'download') copied = true;
        if (step === 'read-in-place' || (step === 'snapshot' && copied)) work.progress?.('packing', 'packing the session bundle');
      };
      const packed = await captureFrom(
        access,
        { kind: 'workspace' },
        {
          sessionId: input.sessionId,
          // A sandbox has no Maka state: the neutral descriptor, so an activation starts a new Maka session.
          stateIdentity: neutralIdentity(input.sessionId),
          limits: DEFAULT_PEOPLE_LIMITS,
          destination: path.join(tmp, 'bundle.tar.zst'),
        },
        { scratch: tmp, signal: work.signal, onStep, known: known?.files },
      );
      work.signal?.throwIfAborted();
      work.progress?.('committing', `committing ${input.sessionId}`);
      // The bundle is this call's own temp file: the repository may move it in rather than copy it.
      const checkpoint = await publishSessionCheckpointV1({ objectStore: repository.objects, compatibilityBundle: packed.artifact, handOverBundle: true });
      const revision =
        input.expectedRevision === undefined
          ? await repository.createSession({ sessionId: input.sessionId, agentId: input.agentId ?? DEFAULT_AGENT_ID, checkpoint })
          : await repository.commit({
              sessionId: input.sessionId,
              expectedRevision: input.expectedRevision,
              checkpoint,
              ...(input.commitId !== undefined ? { commitId: input.commitId } : {}),
            });
      await this.markSaved(input.sandbox, revision);
      return {
        revision,
        bundle: { digest: packed.artifact.archiveDigest, bytes: packed.artifact.compressedBytes, entryCount: packed.artifact.entryCount },
        workspace: packed.workspace,
      };
    } finally {
      await client.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    }
  }

  /**
   * A sandbox's workspace packed as a save packs it (the policy, the limits; a secret file refuses), to a bundle file
   * `destination` (must not exist) of `sessionId`, with nothing committed: a sandbox's opening snapshot.
   */
  async captureWorkspace(ref: SandboxRef, bundle: { sessionId: string; destination: string }, work: WorkOptions = {}): Promise<PackedWorkspace> {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-capture-'));
    const client = await this.client(ref);
    try {
      const access = await this.access(ref, client, work.signal);
      const packed = await captureFrom(
        access,
        { kind: 'workspace' },
        { sessionId: bundle.sessionId, stateIdentity: neutralIdentity(bundle.sessionId), limits: DEFAULT_PEOPLE_LIMITS, destination: bundle.destination },
        { scratch: tmp, signal: work.signal },
      );
      return packed;
    } finally {
      await client.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    }
  }

  /**
   * The files of the revision a remote sandbox most likely shares most of its workspace with — the one it was opened
   * from or last saved as, else the one this save commits on — for its save to take unchanged files from instead of
   * the gateway, if that revision is indexed here already (VS Code's Source Control view compares a sandbox with it,
   * which indexes it). Indexing it just for the save would cost about what it saves through a local gateway
   * (bench/sandboxChanges.ts). Only a shortcut: without one everything is copied as before.
   */
  private async knownFor(input: SaveSandboxInput): Promise<{ files: KnownWorkspace; revision: string } | undefined> {
    if (this.revisionIndexes === undefined) return undefined;
    const mark = await this.provider(input.sandbox.provider)
      .get(input.sandbox)
      .then((s) => s.sandbox.sessionRevision, () => undefined);
    const candidates = [mark, input.expectedRevision === undefined ? undefined : { sessionId: input.sessionId, revision: input.expectedRevision }];
    for (const base of candidates) {
      if (base === undefined) continue;
      try {
        const index = await this.revisionIndexes.held(base.sessionId, base.revision);
        if (index !== undefined) return { files: knownWorkspaceOf(index), revision: `${base.sessionId}@${base.revision}` };
      } catch (err) {
        this.log.debug('the save copies everything: the revision to take unchanged files from is unreadable', { revision: `${base.sessionId}@${base.revision}`, error: (err as Error).message });
      }
    }
    return undefined;
  }

  /**
   * Records on the sandbox's Run that its workspace is now this revision. The revision is committed whatever happens
   * here: a Run that cannot be annotated (deleted meanwhile, a cluster role without `patch`) only keeps its older mark.
   */
  private async markSaved(ref: SandboxRef, revision: CommittedSessionRevision): Promise<void> {
    const annotations = sessionRevisionAnnotation({ ...revision.ref, at: new Date().toISOString(), how: 'saved' });
    await this.provider(ref.provider)
      .patchMetadata(ref, { annotations })
      .catch((err: unknown) => this.log.warn('the sandbox was saved, but its Run could not be marked with the revision', { sandbox: sandboxKey(ref), revision: `${revision.ref.sessionId}@${revision.ref.revision}`, error: (err as Error).message }));
  }

  async openInSandbox(
    input: { sessionId: string; revision?: string | undefined; sandbox: SandboxCreateSpec },
    work: WorkOptions = {},
  ): Promise<{ sandbox: SandboxSummary; revision: CommittedSessionRevision }> {
    const repository = await this.repository();
    const revision =
      input.revision === undefined
        ? await repository.checkoutCurrent(input.sessionId)
        : await repository.checkoutExact({ sessionId: input.sessionId, revision: input.revision });
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-open-'));
    try {
      const checkout = { objects: repository.objects, checkpoint: revision.checkpoint, sessionId: input.sessionId, limits: DEFAULT_PEOPLE_LIMITS, scratch: tmp };
      const provider = this.provider(input.sandbox.provider);
      // A sandbox that will live here gets the tree checked out first (a bad revision then costs no sandbox), to be
      // moved in; one that lives elsewhere gets the bundle itself as one file, if it can (checked as it is uploaded).
      let checkedOut: HydratedSession | undefined;
      if (provider.keepsHere?.(input.sandbox) === true) {
        work.progress?.('checkout', `checking out ${input.sessionId}@${revision.ref.revision}`);
        checkedOut = await checkoutSession(checkout);
        work.signal?.throwIfAborted();
      }
      const opened = sessionRevisionAnnotation({ ...revision.ref, at: new Date().toISOString(), how: 'opened' });
      const sandbox = await provider.create(input.sandbox, { ...work, waitForReady: true, annotations: opened });
      const client = await this.client(sandbox.ref);
      try {
        const into = `${input.sessionId}@${revision.ref.revision} into ${sandbox.ref.name}`;
        work.progress?.('uploading', `copying the workspace of ${into}`);
        const access = await this.access(sandbox.ref, client, work.signal);
        const onTransfer = (t: SessionTransfer) =>
          work.progress?.(
            'uploading',
            t.how === 'files'
              ? `copying the workspace of ${into} file by file (${t.reason})`
              : `copying the workspace of ${into} as one file${t.compression === 'zstd' ? '' : ' (uncompressed: the image has no zstd)'}`,
          );
        await checkoutWorkspaceInto(access, checkout, { signal: work.signal, onTransfer, checkedOut });
      } catch (err) {
        // A half-filled sandbox is worse than none: cancel it, keep the error.
        await provider.terminate(sandbox.ref, 'Immediate', { wait: false }).catch(() => undefined);
        throw err;
      } finally {
        await client.close();
      }
      return { sandbox, revision };
    } finally {
      await fsp.rm(tmp, { recursive: true, force: true });
    }
  }
}
