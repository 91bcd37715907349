// What a sandbox changed since a revision: the sandbox's workspace is read as Save Sandbox as Revision reads it —
// a local sandbox's directory in place, any other listed through the gateway, the V1 snapshot policy deciding
// what counts (.git, node_modules, caches and logs left out and listed; a secret file refuses, as it refuses a
// save) — and each file is compared with the revision's `workspace/`: by size and executable bit, then byte for
// byte against the revision's indexed tar (a remote file by its SHA-256, computed in the sandbox: see
// sandboxes/remoteWorkspace.ts). Nothing is packed or committed. So the list is exactly what a save on that revision
// would change, at the cost of reading the workspace once.
import fsp, { type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_PEOPLE_LIMITS, type SnapshotExclusionCategory, type WorkspaceSnapshotReport } from '../../protocol/bundle';
import type { WorkspaceChange, WorkspaceChanges } from '../../protocol/companion/sessions';
import type { SandboxRef } from '../../protocol/sandboxes';
import { SessionBundleError } from '../bundle/errors';
import { secretRefused } from '../bundle/snapshot';
import { classifyWorkspacePath } from '../bundle/snapshotPolicy';
import { scanRoot, type ScanState, type SourceEntry, type TreeReader } from '../bundle/sourceTree';
import type { WorkOptions } from '../sandboxes/provider';
import { outlineWorkspace, surveyWorkspace } from '../sandboxes/remoteWorkspace';
import { knownWorkspaceOf, type IndexedFile, type RevisionIndex, type RevisionIndexCache } from './revisionIndex';
import type { SandboxSessionService } from './sandboxSessions';

/** At most this many changes are listed (the count of all of them is still exact). */
export const MAX_LISTED_CHANGES = 5000;

const WORKSPACE = 'workspace/';
const CHUNK = 256 * 1024;

type Excluded = WorkspaceSnapshotReport['excludedEntries'];

/** The files of a workspace as the snapshot policy admits them, and what it left out. */
interface ScannedWorkspace {
  files: SourceEntry[];
  /** Files and directories admitted (a save's `includedEntries`). */
  included: number;
  excluded: Excluded;
}

export async function compareSandboxWithRevision(
  services: { sessions: SandboxSessionService; revisions: RevisionIndexCache },
  input: { sandbox: SandboxRef; sessionId: string; revision: string },
  work: WorkOptions = {},
): Promise<WorkspaceChanges> {
  // The revision first: a session or revision that does not exist fails before the sandbox is read.
  const base = await services.revisions.index(input.sessionId, input.revision);
  const compared = await compareSandboxWithIndex(services.sessions, input.sandbox, base, `${input.sessionId}@${input.revision}`, work);
  return { against: { sessionId: input.sessionId, revision: input.revision }, ...compared };
}

/** What a sandbox's workspace changed since an indexed bundle's `workspace/` (`what` names the bundle in progress). */
export async function compareSandboxWithIndex(
  sessions: SandboxSessionService,
  ref: SandboxRef,
  base: RevisionIndex,
  what: string,
  work: WorkOptions = {},
): Promise<Omit<WorkspaceChanges, 'against'>> {
  const sandbox = await sessions.reach(ref, work.signal);
  let tmp: string | undefined;
  try {
    work.progress?.('reading', `reading the workspace of ${ref.name}`);
    let scanned: ScannedWorkspace | undefined;
    // In place, unless the directory holds what only the gateway reads faithfully (a symbolic link, which it
    // follows inside the sandbox): then, as for any other sandbox, from a copy.
    if (sandbox.hostRoot !== undefined) scanned = await scanWorkspace(sandbox.hostRoot).catch(unlessUnsupported);
    let judged: ReadonlyMap<string, boolean> | undefined;
    if (scanned === undefined) {
      // Only a copy needs a folder: made here (a comparison read in place makes none, so a server killed during it
      // leaves nothing behind), removed in finally.
      tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sandbox-sessions-changes-'));
      const survey = await surveyWorkspace(sandbox.client, knownWorkspaceOf(base), work.signal);
      const outline = await outlineWorkspace(sandbox.client, survey, path.join(tmp, 'copy'), work.signal);
      const inOutline = await scanWorkspace(outline.workspaceRoot, outline.tree);
      scanned = { ...inOutline, excluded: [...survey.skipped, ...inOutline.excluded] };
      judged = outline.judged;
    }
    work.signal?.throwIfAborted();
    work.progress?.('comparing', `comparing ${ref.name} with ${what}`);
    const { changes, unchanged } = await compareWithIndex(scanned.files, base, work.signal, judged);
    return { changes: changes.slice(0, MAX_LISTED_CHANGES), total: changes.length, unchanged, workspace: reportOf(scanned) };
  } finally {
    await sandbox.close();
    if (tmp !== undefined) await fsp.rm(tmp, { recursive: true, force: true });
  }
}

function unlessUnsupported(err: unknown): undefined {
  if (err instanceof SessionBundleError && (err.code === 'unsupported_entry' || err.code === 'unsafe_path')) return undefined;
  throw err;
}

/** Walks a workspace as a save's scan does (the policy, the quotas); a secret file refuses, named. */
async function scanWorkspace(root: string, tree?: TreeReader): Promise<ScannedWorkspace> {
  const excluded: Excluded = [];
  const state: ScanState = { entries: [], payloadBytes: 0, entryCount: 0 };
  await scanRoot(root, WORKSPACE, DEFAULT_PEOPLE_LIMITS, state, undefined, (segments, isDirectory) => {
    const verdict = classifyWorkspacePath(segments, isDirectory);
    if (verdict.verdict === 'reject') throw secretRefused([WORKSPACE.slice(0, -1), ...segments].join('/'));
    if (verdict.verdict === 'include') return true;
    excluded.push({ path: segments.join('/') + (isDirectory ? '/' : ''), category: verdict.category });
    return false;
  }, tree);
  // The first entry is the root itself, which a save does not count.
  return { files: state.entries.filter((e) => e.kind === 'file'), included: state.entries.length - 1, excluded };
}

/** The workspace's files that differ from the revision's, sorted by path, and how many are the same. */
export async function compareWithIndex(
  files: readonly SourceEntry[],
  base: { tarPath: string; files: ReadonlyMap<string, IndexedFile> },
  signal?: AbortSignal,
  /** Files already judged (same bytes or not) by their digests: not read here. */
  judged?: ReadonlyMap<string, boolean>,
): Promise<{ changes: WorkspaceChange[]; unchanged: number }> {
  const changes: WorkspaceChange[] = [];
  const seen = new Set<string>();
  let unchanged = 0;
  const tar = await fsp.open(base.tarPath, 'r');
  try {
    const buffers = [Buffer.alloc(CHUNK), Buffer.alloc(CHUNK)] as const;
    for (const file of files) {
      signal?.throwIfAborted();
      seen.add(file.archivePath);
      const rel = file.archivePath.slice(WORKSPACE.length);
      const was = base.files.get(file.archivePath);
      if (!was) changes.push({ path: rel, status: 'added' });
      else if (was.size !== file.size || was.executable !== (file.mode === 0o755) || !(judged?.get(file.archivePath) ?? (await sameBytes(file.sourcePath, tar, was, buffers)))) {
        changes.push({ path: rel, status: 'modified' });
      } else unchanged += 1;
    }
  } finally {
    await tar.close();
  }
  for (const name of base.files.keys()) {
    if (name.startsWith(WORKSPACE) && !seen.has(name)) changes.push({ path: name.slice(WORKSPACE.length), status: 'deleted' });
  }
  changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { changes, unchanged };
}

/** Whether the file holds exactly the bytes of the revision's entry (a file that changed size meanwhile does not). */
async function sameBytes(sourcePath: string, tar: FileHandle, entry: IndexedFile, buffers: readonly [Buffer, Buffer]): Promise<boolean> {
  let source: FileHandle;
  try {
    source = await fsp.open(sourcePath, 'r');
  } catch {
    return false; // gone since the scan: a change, which the next comparison sees as it is
  }
  try {
    for (let done = 0; done < entry.size; done += CHUNK) {
      const length = Math.min(CHUNK, entry.size - done);
      const [mine] = await Promise.all([source.read(buffers[0], 0, length, done), tar.read(buffers[1], 0, length, entry.offset + done)]);
      if (mine.bytesRead !== length || !buffers[0].subarray(0, length).equals(buffers[1].subarray(0, length))) return false;
    }
    return (await source.read(buffers[0], 0, 1, entry.size)).bytesRead === 0;
  } finally {
    await source.close();
  }
}

function reportOf(scanned: ScannedWorkspace): WorkspaceSnapshotReport {
  const byCategory: Record<SnapshotExclusionCategory, number> = { source_control: 0, dependency_tree: 0, cache: 0, log: 0, runtime_scratch: 0 };
  for (const e of scanned.excluded) byCategory[e.category] += 1;
  return {
    policyVersion: 1,
    includedEntries: scanned.included,
    excludedEntries: [...scanned.excluded].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path))),
    excludedEntriesByCategory: byCategory,
    payloadBytes: scanned.files.reduce((n, f) => n + f.size, 0),
  };
}
