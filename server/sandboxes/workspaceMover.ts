// Moving a session into and out of a sandbox, written once for every feature that does it (an activation, Save
// Sandbox as Revision, Open Revision in New Sandbox, fork): check a committed revision out into a private tree
// (`checkoutSession`), put that tree into a sandbox (`hydrateInto`) and bring a sandbox's session back as a packed
// bundle (`captureFrom`). Both directions take the host-directory fast path when the sandbox's root is a directory of
// this machine (the local runtime, confirmed against the sandbox's own `pwd`), else go file by file through the
// gateway — or, in a sandbox whose image has GNU or BusyBox tar, as ONE file (zstd-compressed when the image has zstd): an
// activation's session each way (sandboxTarball.ts: the verified bundle unpacked by `tar` in the sandbox; the session
// packed by `tar` there and read back here by a strict reader), and a revision's workspace into a new sandbox
// (`checkoutWorkspaceInto`). Whatever comes back from a sandbox goes through `packWorkspace`, the one place the
// snapshot policy is applied, and our codec; only a tree hydrated from a verified bundle is repacked as it is
// (`repackSession`, fork).
import fsp from 'node:fs/promises';
import path from 'node:path';
import posix from 'node:path/posix';
import type { SessionBundleArtifact, SessionBundleLimits, WorkspaceSnapshotReport } from '../../protocol/bundle';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { StoredSessionCheckpoint } from '../../protocol/repository';
import type { SandboxRef } from '../../protocol/sandboxes';
import { hydrateSessionBundle, packSessionBundle, SessionSnapshotError } from '../bundle';
import type { KnownDigest } from '../bundle/pack';
import { packWorkspace, type PackedWorkspace } from '../bundle/packWorkspace';
import { skipExcluded } from '../bundle/snapshotPolicy';
import { openSessionCheckpointBundleV1 } from '../repository/checkpoint';
import type { ImmutableObjectStore } from '../repository/objectStore';
import { confirmedHostRoot, placeEntries, placeSession } from './hostPlacement';
import { copyWorkspaceOutKnown, surveyWorkspace, type KnownWorkspace } from './remoteWorkspace';
import type { SandboxProvider } from './provider';
import { packSessionOut, planSessionOut, type TarballSupport, type TarballTools, tarballSupport, unpackBundleIn, unpackWorkspaceIn } from './sandboxTarball';
import { downloadTree, uploadTree } from './transfer';

/** The state identity descriptor of a bundle (spec §1.1): opaque bytes of a media type. */
export interface SessionIdentity {
  mediaType: string;
  bytes: Uint8Array;
}

/** A session as a private tree of this machine: `state/` and `workspace/` under `root`. */
export interface HydratedSession {
  root: string;
  stateRoot: string;
  workspaceRoot: string;
  /** The bundle's state identity; undefined for a session that has no revision yet. */
  identity: SessionIdentity | undefined;
}

/** How to reach a sandbox's files: its gateway always, its root on this machine when the provider keeps it here. */
export interface SandboxAccess {
  client: GatewayClient;
  hostRoot: string | undefined;
}

/** Where a session lives inside a sandbox, relative to the sandbox's root. */
export type SessionPlacement =
  /** `state/` and `workspace/` under one directory (an activation's layout, activation/sandboxLayout.ts). */
  | { kind: 'session'; dir: string }
  /** The workspace is the sandbox's root and there is no state (a sandbox a person works in). */
  | { kind: 'workspace' };

/** The steps of `captureFrom`, as they start (`repack`: packed by tar in the sandbox, downloaded as one file). */
export type CaptureStep = 'read-in-place' | 'download' | 'repack' | 'snapshot' | 'pack';

/**
 * How a session crosses the gateway: one tarball each way (`tar.zst`, or plain tar in an image without zstd; by the
 * image's GNU or BusyBox tar), or file by file (with the reason tar could not be used).
 */
export type SessionTransfer = ({ how: 'tarball' } & TarballTools) | { how: 'files'; reason: string };

function transferOf(support: TarballSupport): SessionTransfer {
  return support.ok ? { how: 'tarball', tar: support.tar, compression: support.compression } : { how: 'files', reason: support.reason };
}

export interface CaptureBundle {
  sessionId: string;
  lastCommittedActivationId?: string | undefined;
  stateIdentity: SessionIdentity;
  limits: SessionBundleLimits;
  /** Where the bundle is written (must not exist). */
  destination: string;
}

export interface MoveOptions {
  signal?: AbortSignal | undefined;
  /** Told how a `session` placement without a directory here crosses the gateway, before it does. */
  onTransfer?: ((transfer: SessionTransfer) => void) | undefined;
}

export interface CaptureOptions extends MoveOptions {
  /** A private directory (0700) for the copies and the snapshot; what the capture puts there is removed. */
  scratch: string;
  onStep?: ((step: CaptureStep) => void) | undefined;
  /**
   * The sandbox runs nothing any more and nothing will run in it before the capture ends (an activation's agent
   * has exited and the local runtime kills whatever a command leaves behind): its directory is packed in place,
   * without a snapshot copy. Unset for a sandbox people may still be working in.
   */
  quiet?: boolean | undefined;
  /** From `checkoutInto`'s `knownDigests`: files hydrated in place by this process, not read again if unchanged. */
  knownDigests?: ReadonlyMap<string, KnownDigest> | undefined;
  /**
   * A revision's files held here (the one the sandbox was opened from or last saved as): a `workspace` placement
   * copied through the gateway takes from it every file the sandbox's own digest says is the same.
   */
  known?: KnownWorkspace | undefined;
}

const signalOf = (options: MoveOptions): { signal?: AbortSignal } => (options.signal ? { signal: options.signal } : {});

/** The root a sandbox's commands see (`pwd`); undefined when it cannot be read. */
async function sandboxRootOf(client: GatewayClient, options: MoveOptions): Promise<string | undefined> {
  const pwd = await client.runCommand({ argv: ['pwd'] }, signalOf(options));
  return pwd.exitCode === 0 ? pwd.stdout.toString('utf8').trim() : undefined;
}

/**
 * The sandbox's root on this machine, if the provider offers a directory and it is the very root the sandbox's
 * commands see (`sandboxRoot` when the caller already ran `pwd`, else one `pwd` here, unless the provider runs
 * commands there by construction); otherwise undefined.
 */
export async function hostRootOf(
  provider: SandboxProvider,
  ref: SandboxRef,
  client: GatewayClient,
  options: MoveOptions & { sandboxRoot?: string | undefined } = {},
): Promise<string | undefined> {
  const offered = await provider.hostDirectory?.(ref);
  if (offered === undefined) return undefined;
  const root = options.sandboxRoot ?? (provider.hostDirectoryIsCommandRoot === true ? offered : await sandboxRootOf(client, options));
  return root === undefined ? undefined : confirmedHostRoot(offered, root);
}

/** What a checkout reads: the revision's checkpoint in the object store, and where it may stage a copy. */
interface CheckoutInput {
  objects: ImmutableObjectStore;
  checkpoint: StoredSessionCheckpoint;
  sessionId: string;
  limits: SessionBundleLimits;
  scratch: string;
}

type CheckpointBundle = Awaited<ReturnType<typeof openSessionCheckpointBundleV1>>;

/** Opens the revision's bundle (a copy in `scratch` when the store has no file to read), uses it, and releases it. */
async function withCheckpointBundle<T>(input: CheckoutInput, use: (bundle: CheckpointBundle) => Promise<T>): Promise<T> {
  const bundle = await openSessionCheckpointBundleV1({
    objectStore: input.objects,
    checkpoint: input.checkpoint,
    copyTo: path.join(input.scratch, 'checkout.tar.zst'),
    maxBytes: input.limits.maxCompressedBytes,
  });
  try {
    return await use(bundle);
  } finally {
    await bundle.release();
  }
}

/** Hydrates the bundle (verified while it is) into `destinationRoot`; the layout and the state identity it carries. */
async function hydrateWithIdentity(bundle: CheckpointBundle, input: CheckoutInput, destinationRoot: string, durable: boolean, known?: Map<string, KnownDigest>) {
  const h = await hydrateSessionBundle({
    source: { path: bundle.path, expectedArchiveDigest: bundle.expectedArchiveDigest },
    expectedSessionId: input.sessionId,
    destinationRoot,
    limits: input.limits,
    ...(durable ? {} : { durable: false }),
    ...(known !== undefined ? { onFileWritten: (archivePath: string, identity: KnownDigest['identity'], digest: Buffer) => known.set(archivePath, { identity, digest }) } : {}),
  });
  const identityFile = path.join(h.destinationRoot, 'state-identity.json');
  const identity: SessionIdentity = { mediaType: h.manifest.stateIdentity.mediaType, bytes: await fsp.readFile(identityFile) };
  return { h, identity, identityFile };
}

/** Checks a committed revision out into `scratch/hydrated` (the bundle verified while it is hydrated). */
export async function checkoutSession(input: CheckoutInput): Promise<HydratedSession & { identity: SessionIdentity }> {
  return withCheckpointBundle(input, async (bundle) => {
    const { h, identity } = await hydrateWithIdentity(bundle, input, path.join(input.scratch, 'hydrated'), true);
    return { root: h.destinationRoot, stateRoot: h.stateRoot, workspaceRoot: h.workspaceRoot, identity };
  });
}

/**
 * Checks a committed revision out straight into a sandbox nothing has run in yet. With a directory here and a
 * `session` placement the bundle is hydrated right there (verified as always; no staging copy, and no fsyncs: the
 * sandbox does not outlive a crash, a retry makes a new one), and `state-identity.json`, which is not part of the
 * layout a sandbox sees, is read and removed. Otherwise it goes through `scratch` (checkoutSession, hydrateInto).
 */
export async function checkoutInto(
  sandbox: SandboxAccess,
  placement: SessionPlacement,
  input: CheckoutInput,
  options: MoveOptions & {
    /**
     * Filled, when the session is hydrated in the sandbox's directory here, with what was written there (archive
     * path → identity and digest), for `captureFrom`'s `knownDigests`; left empty otherwise.
     */
    knownDigests?: Map<string, KnownDigest> | undefined;
  } = {},
): Promise<SessionIdentity> {
  if (sandbox.hostRoot === undefined && placement.kind === 'session') {
    const support = await tarballSupport(sandbox.client, signalOf(options));
    options.onTransfer?.(transferOf(support));
    if (support.ok) {
      const upload = { dir: placement.dir, sessionId: input.sessionId, limits: input.limits, tar: support.tar, compression: support.compression, scratch: input.scratch, signal: options.signal };
      return withCheckpointBundle(input, (bundle) => unpackBundleIn(sandbox.client, bundle, upload));
    }
  }
  if (sandbox.hostRoot === undefined || placement.kind !== 'session') {
    const session = await checkoutSession(input);
    await hydrateInto(sandbox, session, placement, options);
    return session.identity;
  }
  const destination = path.join(sandbox.hostRoot, placement.dir);
  await fsp.mkdir(path.dirname(destination), { recursive: true, mode: 0o755 });
  return withCheckpointBundle(input, async (bundle) => {
    const written = new Map<string, KnownDigest>();
    const { h, identity, identityFile } = await hydrateWithIdentity(bundle, input, destination, false, written);
    // Only a hydrate that succeeded (every byte verified) hands its digests on.
    for (const [archivePath, known] of written) options.knownDigests?.set(archivePath, known);
    await fsp.unlink(identityFile);
    await fsp.chmod(h.destinationRoot, 0o755);
    return identity;
  });
}

/**
 * Open Revision in New Sandbox: a revision's workspace into a sandbox nothing has run in yet, as its root. A sandbox
 * without a directory here whose image has GNU or BusyBox tar gets the verified bundle as ONE upload (decompressed here when the
 * image has no zstd), unpacked by its own tar (sandboxTarball.ts); any other gets the checked-out tree (moved into a
 * local sandbox's directory, else copied file by file).
 */
export async function checkoutWorkspaceInto(
  sandbox: SandboxAccess,
  input: CheckoutInput,
  options: MoveOptions & {
    /** The revision, checked out already (`checkoutSession` of the same input): used unless the bundle goes as one file. */
    checkedOut?: HydratedSession | undefined;
  } = {},
): Promise<void> {
  if (sandbox.hostRoot === undefined) {
    const support = await tarballSupport(sandbox.client, signalOf(options));
    options.onTransfer?.(transferOf(support));
    if (support.ok) {
      const upload = { sessionId: input.sessionId, limits: input.limits, tar: support.tar, compression: support.compression, scratch: input.scratch, signal: options.signal };
      await withCheckpointBundle(input, (bundle) => unpackWorkspaceIn(sandbox.client, bundle, upload));
      return;
    }
  }
  await hydrateInto(sandbox, options.checkedOut ?? (await checkoutSession(input)), { kind: 'workspace' }, options);
}

/** A session with no revision yet, as an empty tree under `scratch/hydrated`. */
export async function emptySession(scratch: string): Promise<HydratedSession> {
  const root = path.join(scratch, 'hydrated');
  const session = { root, stateRoot: path.join(root, 'state'), workspaceRoot: path.join(root, 'workspace'), identity: undefined };
  await fsp.mkdir(session.stateRoot, { recursive: true });
  await fsp.mkdir(session.workspaceRoot, { recursive: true });
  return session;
}

/**
 * Puts a hydrated session into a sandbox nothing has run in yet: moved into its directory when it has one here (the
 * tree is used up), else copied file by file through the gateway.
 */
export async function hydrateInto(sandbox: SandboxAccess, session: HydratedSession, placement: SessionPlacement, options: MoveOptions = {}): Promise<void> {
  const { client, hostRoot } = sandbox;
  if (placement.kind === 'workspace') {
    if (hostRoot !== undefined) await placeEntries(session.workspaceRoot, hostRoot);
    else await uploadTree(client, session.workspaceRoot, '', signalOf(options));
    return;
  }
  if (hostRoot !== undefined) {
    await placeSession(session.root, path.join(hostRoot, placement.dir));
    return;
  }
  await client.createDirectory(placement.dir, signalOf(options));
  await uploadTree(client, session.stateRoot, posix.join(placement.dir, 'state'), signalOf(options));
  await uploadTree(client, session.workspaceRoot, posix.join(placement.dir, 'workspace'), signalOf(options));
}

/**
 * Brings a sandbox's session back as a packed bundle, through the snapshot policy. A sandbox with a directory here
 * is snapshotted in place (one copy instead of two), unless it holds what only the gateway brings back faithfully (a
 * symbolic link, which the gateway follows inside the sandbox and the snapshot refuses): then, as for any other
 * sandbox, it is copied out file by file first — without what the policy excludes (.git, node_modules, caches, logs),
 * which is not worth the transfer but is reported as the snapshot would. `inPlace` (what the pack read) is set only
 * when the sandbox's own directory was packed where it is.
 */
export async function captureFrom(sandbox: SandboxAccess, placement: SessionPlacement, bundle: CaptureBundle, options: CaptureOptions): Promise<PackedWorkspace> {
  const work = await fsp.mkdtemp(path.join(options.scratch, 'capture-'));
  try {
    const emptyState = path.join(work, 'state');
    if (placement.kind === 'workspace') await fsp.mkdir(emptyState, { mode: 0o700 });
    // Copies are new inodes: digests known for the sandbox's own files are for the in-place pack only, and what the
    // pack of a copy read is gone with the copy (`inPlace` is about the sandbox's own directory).
    const pack = async (roots: { stateRoot: string; workspaceRoot: string }, quiet: boolean): Promise<PackedWorkspace> => {
      const packed = await packRoots(roots, bundle, work, { ...options, quiet, knownDigests: undefined });
      return { artifact: packed.artifact, workspace: packed.workspace };
    };
    if (sandbox.hostRoot !== undefined) {
      options.onStep?.('read-in-place');
      const inPlace = await packRoots(rootsIn(sandbox.hostRoot, placement, emptyState), bundle, work, { ...options, quiet: options.quiet === true }).catch((err: unknown) => {
        if (err instanceof SessionSnapshotError && err.code === 'unsafe_source') return undefined;
        throw err;
      });
      if (inPlace !== undefined) return inPlace;
    }
    if (sandbox.hostRoot === undefined && placement.kind === 'session') {
      const support = await tarballSupport(sandbox.client, signalOf(options));
      const plan = support.ok ? await planSessionOut(sandbox.client, { dir: placement.dir, tar: support.tar, signal: options.signal }) : undefined;
      options.onTransfer?.(plan?.ok === false ? { how: 'files', reason: plan.reason } : transferOf(support));
      if (support.ok && plan?.ok) {
        options.onStep?.('repack');
        const into = path.join(work, 'copy');
        const tools = { tar: support.tar, compression: support.compression };
        const unpacked = await packSessionOut(sandbox.client, { ...tools, dir: placement.dir, into, limits: bundle.limits, excluded: plan.excluded, signal: options.signal });
        // Read here from the sandbox's tarball into a private tree nothing else writes: no snapshot copy of it.
        const packed = await pack(unpacked, true);
        return { ...packed, workspace: withSkipped(packed.workspace, unpacked.skipped) };
      }
    }
    options.onStep?.('download');
    const copied =
      placement.kind === 'workspace' && options.known !== undefined
        ? await copyWorkspaceOutReusing(sandbox.client, options.known, path.join(work, 'copy'), emptyState, options.signal)
        : await copyOut(sandbox.client, placement, path.join(work, 'copy'), emptyState, options);
    // The copy is private to this capture and nothing writes it: no snapshot copy of the copy.
    const packed = await pack(copied, true);
    return { ...packed, workspace: withSkipped(packed.workspace, copied.skipped) };
  } finally {
    await fsp.rm(work, { recursive: true, force: true });
  }
}

/**
 * Repacks a tree hydrated from a verified bundle (fork) as it is, for another envelope: it is not a live workspace,
 * so the snapshot policy, which is for what comes out of a sandbox, does not apply to it.
 */
export function repackSession(session: HydratedSession, bundle: CaptureBundle): Promise<SessionBundleArtifact> {
  return packSessionBundle({
    stateRoot: session.stateRoot,
    workspaceRoot: session.workspaceRoot,
    stateIdentity: bundle.stateIdentity,
    envelope: envelopeOf(bundle),
    destination: bundle.destination,
    limits: bundle.limits,
  });
}

function envelopeOf(bundle: CaptureBundle): { sessionId: string; lastCommittedActivationId?: string } {
  return bundle.lastCommittedActivationId === undefined
    ? { sessionId: bundle.sessionId }
    : { sessionId: bundle.sessionId, lastCommittedActivationId: bundle.lastCommittedActivationId };
}

function rootsIn(root: string, placement: SessionPlacement, emptyState: string): { stateRoot: string; workspaceRoot: string } {
  if (placement.kind === 'workspace') return { stateRoot: emptyState, workspaceRoot: root };
  return { stateRoot: path.join(root, placement.dir, 'state'), workspaceRoot: path.join(root, placement.dir, 'workspace') };
}

function packRoots(
  roots: { stateRoot: string; workspaceRoot: string },
  bundle: CaptureBundle,
  stagingParent: string,
  options: CaptureOptions & { quiet: boolean },
): Promise<PackedWorkspace> {
  return packWorkspace({
    quiet: options.quiet,
    ...roots,
    destination: bundle.destination,
    sessionId: bundle.sessionId,
    lastCommittedActivationId: bundle.lastCommittedActivationId,
    stateIdentity: bundle.stateIdentity,
    limits: bundle.limits,
    signal: options.signal,
    stagingParent,
    onStep: options.onStep,
    knownDigests: options.quiet ? options.knownDigests : undefined,
  });
}

/** Copies a workspace out through the gateway, what is the same as a known file taken from it instead. */
async function copyWorkspaceOutReusing(
  client: GatewayClient,
  known: KnownWorkspace,
  into: string,
  emptyState: string,
  signal?: AbortSignal,
): Promise<{ stateRoot: string; workspaceRoot: string; skipped: WorkspaceSnapshotReport['excludedEntries'] }> {
  const survey = await surveyWorkspace(client, known, signal);
  const { workspaceRoot } = await copyWorkspaceOutKnown(client, survey, known, into, signal);
  return { stateRoot: emptyState, workspaceRoot, skipped: survey.skipped };
}

/** Copies the session out through the gateway into `into` (which must not exist). */
async function copyOut(
  client: GatewayClient,
  placement: SessionPlacement,
  into: string,
  emptyState: string,
  options: MoveOptions,
): Promise<{ stateRoot: string; workspaceRoot: string; skipped: WorkspaceSnapshotReport['excludedEntries'] }> {
  await fsp.mkdir(into, { mode: 0o700 });
  const skipped: WorkspaceSnapshotReport['excludedEntries'] = [];
  const skip = skipExcluded(skipped);
  const workspaceRoot = path.join(into, 'workspace');
  if (placement.kind === 'workspace') {
    await downloadTree(client, '', workspaceRoot, { ...signalOf(options), skip });
    return { stateRoot: emptyState, workspaceRoot, skipped };
  }
  const stateRoot = path.join(into, 'state');
  await downloadTree(client, posix.join(placement.dir, 'state'), stateRoot, signalOf(options));
  await downloadTree(client, posix.join(placement.dir, 'workspace'), workspaceRoot, { ...signalOf(options), skip });
  return { stateRoot, workspaceRoot, skipped };
}

/** The snapshot report plus what was left in the sandbox because the policy excludes it. */
function withSkipped(report: WorkspaceSnapshotReport, skipped: WorkspaceSnapshotReport['excludedEntries']): WorkspaceSnapshotReport {
  const byCategory = { ...report.excludedEntriesByCategory };
  for (const e of skipped) byCategory[e.category] = (byCategory[e.category] ?? 0) + 1;
  const excludedEntries = [...skipped, ...report.excludedEntries].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  return { ...report, excludedEntries, excludedEntriesByCategory: byCategory };
}
