// Reading a remote sandbox's workspace (kruntimes, OpenSandbox: no directory on this machine) against a revision
// whose files this machine holds, moving through the gateway only what differs. The tree is listed exactly as a save
// copies it (what the snapshot policy excludes left there and listed); a file whose size and mode match the known
// file's is hashed in the sandbox (sandboxDigests.ts) and judged by its digest. What digests cannot judge is read
// through the gateway as before: a symbolic link (listed with the link's own size, read as the file it names,
// refused if it leads out of the workspace) and, in an image without GNU `sha256sum`, those same-size files.
//
// Two uses. Comparing (sessions/sandboxChanges.ts) needs no bytes at all: `outlineWorkspace` keeps the listing in
// memory as a `TreeReader`, so the one scan of a workspace (bundle/sourceTree.ts: the path language, the quotas,
// the policy, a secret refusing) admits it by the same rules as a copy. Saving (workspaceMover.ts `captureFrom`)
// needs a real tree: `copyWorkspaceOutKnown` writes each file judged the same from the known bytes here and
// downloads the rest, so the bundle is byte for byte the one a full copy would give.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { WorkspaceSnapshotReport } from '../../protocol/bundle';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { skipExcluded } from '../bundle/snapshotPolicy';
import type { ScanStats, TreeReader } from '../bundle/sourceTree';
import { sha256InSandbox } from './sandboxDigests';
import { downloadListed, fileFlagsIn, listTree } from './transfer';

const WORKSPACE = 'workspace/';

/** Files whose bytes this machine holds (a revision's `workspace/`), by archive path. */
export interface KnownWorkspace {
  files: ReadonlyMap<string, { size: number; executable: boolean }>;
  /** SHA-256 of a known file, lowercase hex. */
  digest(archivePath: string): Promise<string>;
  /** Writes known files' bytes to new files; answers the archive paths it could not (their copy here is gone). */
  copyFilesOut(files: readonly KnownFileCopy[], signal?: AbortSignal): Promise<Set<string>>;
}

export interface KnownFileCopy {
  archivePath: string;
  /** A new file (it must not exist). */
  target: string;
  executable: boolean;
}

/**
 * How each listed file is known: `read` through the gateway (a link, or not hashed), `same` or `differs` by its
 * digest against the known file, `unknown` when no known file has its path, size and mode (added, or changed shape).
 */
export type FileVerdict = 'read' | 'same' | 'differs' | 'unknown';

export interface WorkspaceSurvey {
  directories: string[];
  files: { rel: string; size: number; executable: boolean; verdict: FileVerdict }[];
  /** What the policy excluded, left in the sandbox. */
  skipped: WorkspaceSnapshotReport['excludedEntries'];
}

/** Lists the sandbox's workspace (its root) and judges each file against `known`. */
export async function surveyWorkspace(client: GatewayClient, known: Pick<KnownWorkspace, 'files' | 'digest'>, signal?: AbortSignal): Promise<WorkspaceSurvey> {
  const skipped: WorkspaceSurvey['skipped'] = [];
  // The listing and the one `find` for modes and links are independent: both at once.
  const [listed, { executables, links }] = await Promise.all([listTree(client, '', { signal, skip: skipExcluded(skipped) }), fileFlagsIn(client, '', signal)]);
  // A file with the known file's size and mode is a candidate for its digest; any other is unknown, or read.
  const sameShape: WorkspaceSurvey['files'] = [];
  const files: WorkspaceSurvey['files'] = listed.files.map((f) => {
    const executable = executables.has(f.rel);
    const was = known.files.get(WORKSPACE + f.rel);
    const file = { ...f, executable, verdict: (throughLink(f.rel, links) ? 'read' : 'unknown') as FileVerdict };
    if (file.verdict === 'unknown' && was !== undefined && was.size === f.size && was.executable === executable) sameShape.push(file);
    return file;
  });
  const digests = sameShape.length === 0 ? undefined : await sha256InSandbox(client, sameShape.map((f) => f.rel), signal);
  for (const file of sameShape) {
    const digest = digests?.get(file.rel);
    // Not hashed (no sha256sum there, or gone meanwhile): read, and compared byte for byte as before.
    file.verdict = digest === undefined ? 'read' : digest === (await known.digest(WORKSPACE + file.rel)) ? 'same' : 'differs';
  }
  return { directories: listed.directories, files, skipped };
}

export interface WorkspaceOutline {
  /** The workspace's root as `tree` knows it; the files read are real files below it, nothing else is. */
  workspaceRoot: string;
  tree: TreeReader;
  /** Archive path → whether its bytes are the known file's, for the files judged by digest. */
  judged: Map<string, boolean>;
}

/** The surveyed workspace as a tree to scan, with only the `read` files copied (under `into`, which must not exist). */
export async function outlineWorkspace(client: GatewayClient, survey: WorkspaceSurvey, into: string, signal?: AbortSignal): Promise<WorkspaceOutline> {
  const workspaceRoot = path.join(into, 'workspace');
  const tree = new ListedTree(workspaceRoot);
  for (const dir of survey.directories) tree.add(dir, { directory: true, size: 0, executable: true });
  const judged = new Map<string, boolean>();
  const reads = survey.files.filter((f) => f.verdict === 'read');
  for (const file of survey.files) {
    if (file.verdict === 'read') continue;
    tree.add(file.rel, { directory: false, size: file.size, executable: file.executable });
    if (file.verdict !== 'unknown') judged.set(WORKSPACE + file.rel, file.verdict === 'same');
  }
  if (reads.length > 0) {
    await fsp.mkdir(into, { mode: 0o700 });
    for (const dir of new Set(reads.map((f) => path.posix.dirname(f.rel)))) await fsp.mkdir(path.join(workspaceRoot, dir), { recursive: true, mode: 0o700 });
    await download(client, workspaceRoot, reads, signal);
    for (const file of reads) tree.addCopy(file.rel);
  }
  return { workspaceRoot, tree, judged };
}

/**
 * The surveyed workspace as a real tree under `into` (which must not exist): the files judged the same written from
 * the known bytes, every other file downloaded. Returns how many files each way.
 */
export async function copyWorkspaceOutKnown(
  client: GatewayClient,
  survey: WorkspaceSurvey,
  known: KnownWorkspace,
  into: string,
  signal?: AbortSignal,
): Promise<{ workspaceRoot: string; reused: number; downloaded: number }> {
  const workspaceRoot = path.join(into, 'workspace');
  await fsp.mkdir(into, { mode: 0o700 });
  await fsp.mkdir(workspaceRoot, { mode: 0o700 });
  for (const dir of survey.directories) await fsp.mkdir(path.join(workspaceRoot, dir), { mode: 0o755 });
  const same = survey.files.filter((f) => f.verdict === 'same');
  const failed = await known.copyFilesOut(
    same.map((f) => ({ archivePath: WORKSPACE + f.rel, target: path.join(workspaceRoot, f.rel), executable: f.executable })),
    signal,
  );
  // A known copy gone meanwhile (its cache trimmed): the sandbox still has the file.
  const downloads = survey.files.filter((f) => f.verdict !== 'same' || failed.has(WORKSPACE + f.rel));
  const reused = same.length - failed.size;
  await download(client, workspaceRoot, downloads, signal);
  return { workspaceRoot, reused, downloaded: downloads.length };
}

async function download(client: GatewayClient, root: string, files: WorkspaceSurvey['files'], signal?: AbortSignal): Promise<void> {
  await downloadListed(client, '', root, files, signal ? { signal } : {});
  for (const file of files) if (file.executable) await fsp.chmod(path.join(root, file.rel), 0o755);
}

/** Whether the path is a symbolic link in the sandbox, or below one (a listing that follows links enters them). */
function throughLink(rel: string, links: ReadonlySet<string>): boolean {
  if (links.size === 0) return false;
  for (let end = rel.indexOf('/'); end !== -1; end = rel.indexOf('/', end + 1)) if (links.has(rel.slice(0, end))) return true;
  return links.has(rel);
}

/** The listed tree: directories and files with their listed size and mode; a copied file is the real one here. */
class ListedTree implements TreeReader {
  private readonly entries = new Map<string, ScanStats>();
  private readonly children = new Map<string, Buffer[]>();
  private nextIno = 1n;

  constructor(private readonly root: string) {
    this.entries.set(root, this.stats({ directory: true, size: 0, executable: true }));
    this.children.set(root, []);
  }

  add(rel: string, shape: { directory: boolean; size: number; executable: boolean }): void {
    const at = this.place(rel);
    this.entries.set(at, this.stats(shape));
    if (shape.directory) this.children.set(at, this.children.get(at) ?? []);
  }

  /** A file copied to its place under the root: the scan sees it as it is on disk (its size is what was read). */
  addCopy(rel: string): void {
    this.entries.set(this.place(rel), fs.lstatSync(path.join(this.root, rel), { bigint: true }));
  }

  lstat(p: string): ScanStats {
    const st = this.entries.get(p);
    if (st === undefined) throw Object.assign(new Error(`ENOENT: not in the listing: ${p}`), { code: 'ENOENT' });
    return st;
  }

  readdir(p: string): Buffer[] {
    return this.children.get(p) ?? [];
  }

  private place(rel: string): string {
    const at = path.join(this.root, rel);
    const siblings = this.children.get(path.dirname(at));
    if (siblings === undefined) throw new Error(`the listing has ${rel} before its directory`);
    siblings.push(Buffer.from(path.basename(at)));
    return at;
  }

  private stats(shape: { directory: boolean; size: number; executable: boolean }): ScanStats {
    const mode = (shape.directory ? fs.constants.S_IFDIR : fs.constants.S_IFREG) | (shape.executable ? 0o755 : 0o644);
    return {
      isDirectory: () => shape.directory,
      isFile: () => !shape.directory,
      isSymbolicLink: () => false,
      dev: 0n,
      ino: this.nextIno++,
      nlink: 1n,
      size: BigInt(shape.size),
      mode: BigInt(mode),
      mtimeNs: 0n,
      ctimeNs: 0n,
    };
  }
}
