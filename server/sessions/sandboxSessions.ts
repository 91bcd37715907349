// Sessions made from sandboxes and sandboxes made from sessions: save a sandbox's workspace as a
// revision (snapshotted in place for a local sandbox, else copied out through the gateway; snapshot
// policy applied, packed, published, then create/commit with compare-and-set), and open any
// retained revision in a fresh sandbox.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS, type WorkspaceSnapshotReport } from '../../protocol/bundle';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { CommittedSessionRevision, RevisionSummary, SessionSummary } from '../../protocol/repository';
import type { ProviderKind, SandboxCreateSpec, SandboxRef, SandboxSummary } from '../../protocol/sandboxes';
import { hydrateSessionBundle, SessionSnapshotError } from '../bundle';
import { packWorkspace, type PackedWorkspace } from '../bundle/packWorkspace';
import { neutralIdentity } from '../activation/stateIdentity';
import { classifyWorkspacePath } from '../bundle/snapshotPolicy';
import { materializeSessionCheckpointV1, openSessionCheckpointBundleV1, publishSessionCheckpointV1 } from '../repository/checkpoint';
import type { SessionRepository } from '../repository/contract';
import { SandboxError, type SandboxProvider, type WorkOptions } from '../sandboxes/provider';
import { confirmedHostRoot, placeEntries } from '../sandboxes/hostPlacement';
import { downloadTree, uploadTree } from '../sandboxes/transfer';

export const DEFAULT_AGENT_ID = 'sandbox-sessions';

export class SessionExportError extends Error {
  override readonly name = 'SessionExportError';
  readonly code = 'destination_exists';
}

export interface SaveSandboxInput {
  sandbox: SandboxRef;
  sessionId: string;
  /** Absent: create the session (r1). Present: commit on top of exactly this revision. */
  expectedRevision?: string | undefined;
  agentId?: string | undefined;
  commitId?: string | undefined;
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

  async revisions(sessionId: string): Promise<RevisionSummary[]> {
    return (await this.repository()).listRevisions(sessionId);
  }

  private async client(ref: SandboxRef): Promise<GatewayClient> {
    const connection = await this.provider(ref.provider).open(ref);
    return new GatewayClient({ endpoint: connection.endpoint, token: connection.token, tls: connection.tls, readRetryWindowMs: 2000 });
  }

  /** A local sandbox's root on this machine, confirmed against what its commands see; else undefined. */
  private async hostRoot(ref: SandboxRef, client: GatewayClient, signal?: AbortSignal): Promise<string | undefined> {
    const offered = await this.provider(ref.provider).hostDirectory?.(ref);
    if (offered === undefined) return undefined;
    const pwd = await client.runCommand({ argv: ['pwd'] }, { ...(signal ? { signal } : {}) });
    return pwd.exitCode === 0 ? confirmedHostRoot(offered, pwd.stdout.toString('utf8').trim()) : undefined;
  }

  async saveSandbox(input: SaveSandboxInput, work: WorkOptions = {}): Promise<SavedSandbox> {
    const repository = await this.repository();
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-save-'));
    const client = await this.client(input.sandbox);
    try {
      work.progress?.('copying', `copying the workspace of ${input.sandbox.name}`);
      const stateDir = path.join(tmp, 'state');
      await fsp.mkdir(stateDir, { mode: 0o700 });
      const pack = (workspaceRoot: string): Promise<PackedWorkspace> =>
        packWorkspace({
          stateRoot: stateDir,
          workspaceRoot,
          destination: path.join(tmp, 'bundle.tar.zst'),
          sessionId: input.sessionId,
          // A sandbox has no Maka state: the neutral descriptor, so an activation starts a new Maka session.
          stateIdentity: neutralIdentity(input.sessionId),
          limits: DEFAULT_PEOPLE_LIMITS,
          signal: work.signal,
        });
      // A local sandbox is snapshotted straight from its directory, unless it holds a symbolic link (the gateway
      // follows links that stay inside the sandbox; the snapshot refuses them): then as for any sandbox.
      const hostRoot = await this.hostRoot(input.sandbox, client, work.signal);
      let packed: PackedWorkspace | undefined;
      let workspace: WorkspaceSnapshotReport | undefined;
      if (hostRoot !== undefined) {
        work.progress?.('packing', 'packing the session bundle');
        packed = await pack(hostRoot).catch((err: unknown) => {
          if (err instanceof SessionSnapshotError && err.code === 'unsafe_source') return undefined;
          throw err;
        });
        workspace = packed?.workspace;
      }
      if (packed === undefined) {
        const workspaceDir = path.join(tmp, 'workspace');
        // Policy-excluded trees (.git, node_modules, caches, logs) are not even copied, but they are
        // reported as the snapshot would; secrets are copied so that the snapshot refuses them by name.
        const skipped: WorkspaceSnapshotReport['excludedEntries'] = [];
        await downloadTree(client, '', workspaceDir, {
          ...(work.signal ? { signal: work.signal } : {}),
          skip: (rel, isDirectory) => {
            const verdict = classifyWorkspacePath(rel.split('/'), isDirectory);
            if (verdict.verdict !== 'exclude') return false;
            skipped.push({ path: isDirectory ? `${rel}/` : rel, category: verdict.category });
            return true;
          },
        });
        work.progress?.('packing', 'packing the session bundle');
        packed = await pack(workspaceDir);
        workspace = withSkipped(packed.workspace, skipped);
      }
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
      return {
        revision,
        bundle: { digest: packed.artifact.archiveDigest, bytes: packed.artifact.compressedBytes, entryCount: packed.artifact.entryCount },
        workspace: workspace ?? packed.workspace,
      };
    } finally {
      await client.close();
      await fsp.rm(tmp, { recursive: true, force: true });
    }
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
      work.progress?.('checkout', `checking out ${input.sessionId}@${revision.ref.revision}`);
      const bundle = await openSessionCheckpointBundleV1({
        objectStore: repository.objects,
        checkpoint: revision.checkpoint,
        copyTo: path.join(tmp, 'bundle.tar.zst'),
        maxBytes: DEFAULT_PEOPLE_LIMITS.maxCompressedBytes,
      });
      let hydrated;
      try {
        hydrated = await hydrateSessionBundle({
          source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest },
          expectedSessionId: input.sessionId,
          destinationRoot: path.join(tmp, 'hydrated'),
          limits: DEFAULT_PEOPLE_LIMITS,
        });
      } finally {
        await bundle.release();
      }
      work.signal?.throwIfAborted();
      const provider = this.provider(input.sandbox.provider);
      const sandbox = await provider.create(input.sandbox, { ...work, waitForReady: true });
      const client = await this.client(sandbox.ref);
      try {
        work.progress?.('uploading', `copying the workspace into ${sandbox.ref.name}`);
        // A fresh local sandbox gets the files moved into its directory; any other, file by file.
        const hostRoot = await this.hostRoot(sandbox.ref, client, work.signal);
        if (hostRoot !== undefined) await placeEntries(hydrated.workspaceRoot, hostRoot);
        else await uploadTree(client, hydrated.workspaceRoot, '', work.signal ? { signal: work.signal } : {});
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

/** The snapshot report plus what was left in the sandbox because the policy excludes it. */
function withSkipped(report: WorkspaceSnapshotReport, skipped: WorkspaceSnapshotReport['excludedEntries']): WorkspaceSnapshotReport {
  const byCategory = { ...report.excludedEntriesByCategory };
  for (const e of skipped) byCategory[e.category] = (byCategory[e.category] ?? 0) + 1;
  const excludedEntries = [...skipped, ...report.excludedEntries].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  return { ...report, excludedEntries, excludedEntriesByCategory: byCategory };
}
