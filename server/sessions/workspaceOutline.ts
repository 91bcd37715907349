// A remote sandbox's workspace outlined here for comparing it with a revision, moving only what the comparison
// needs. The tree is listed through the gateway exactly as a save copies it (what the snapshot policy excludes left
// there and listed) and kept in memory as a `TreeReader`, each file with its listed size and mode, so that the one
// scan of a workspace (bundle/sourceTree.ts: the path language, the quotas, the policy, a secret refusing) admits
// it by the same rules as a copy. A file whose size and mode match the revision's is then hashed in the sandbox and
// judged by its digest; only what cannot be judged that way is copied here as before: a symbolic link (listed with
// the link's own size, read by the gateway as the file it names, refused if it leads out of the workspace) and, in
// an image without GNU `sha256sum`, those same-size files. Comparing an unchanged workspace of any size thus moves
// a listing and a digest per file, and writes nothing here but the copies.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { WorkspaceSnapshotReport } from '../../protocol/bundle';
import type { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import type { ScanStats, TreeReader } from '../bundle/sourceTree';
import { sha256InSandbox } from '../sandboxes/sandboxDigests';
import { downloadListed, fileFlagsIn, listTree } from '../sandboxes/transfer';
import { skipExcluded } from '../sandboxes/workspaceMover';
import type { IndexedFile } from './revisionIndex';

const WORKSPACE = 'workspace/';

/** The revision's files (archive path → size and mode) and their digests, read on demand. */
export interface OutlineBase {
  files: ReadonlyMap<string, IndexedFile>;
  digest(archivePath: string): Promise<string>;
}

export interface WorkspaceOutline {
  /** The workspace's root as `tree` knows it; the copies are real files below it, nothing else is. */
  workspaceRoot: string;
  tree: TreeReader;
  /** What the policy excluded, left in the sandbox. */
  skipped: WorkspaceSnapshotReport['excludedEntries'];
  /** Archive path → whether its bytes are the revision's, for the files judged by digest (not copied here). */
  judged: Map<string, boolean>;
  /** How many files were copied, and how many hashed in the sandbox (for the tests). */
  copied: number;
  hashed: number;
}

/** Outlines the sandbox's workspace (its root); copies go under `into`, which must not exist. */
export async function outlineWorkspaceOut(client: GatewayClient, into: string, base: OutlineBase, signal?: AbortSignal): Promise<WorkspaceOutline> {
  const workspaceRoot = path.join(into, 'workspace');
  const skipped: WorkspaceOutline['skipped'] = [];
  // The listing and the one `find` for modes and links are independent: both at once.
  const [listed, { executables, links }] = await Promise.all([listTree(client, '', { signal, skip: skipExcluded(skipped) }), fileFlagsIn(client, '', signal)]);
  const tree = new ListedTree(workspaceRoot);
  for (const dir of listed.directories) tree.add(dir, { directory: true, size: 0, executable: true });

  const copies: { rel: string; size: number }[] = [];
  const sameShape: { rel: string; size: number }[] = [];
  for (const file of listed.files) {
    const was = base.files.get(WORKSPACE + file.rel);
    const executable = executables.has(file.rel);
    if (throughLink(file.rel, links)) copies.push(file);
    else if (was !== undefined && was.size === file.size && was.executable === executable) sameShape.push(file);
    else tree.add(file.rel, { directory: false, size: file.size, executable });
  }
  const digests = sameShape.length === 0 ? new Map<string, string>() : await sha256InSandbox(client, sameShape.map((f) => f.rel), signal);
  const judged = new Map<string, boolean>();
  for (const file of sameShape) {
    const digest = digests?.get(file.rel);
    // Not hashed (no sha256sum there, or gone meanwhile): copied, and compared byte for byte as before.
    if (digest === undefined) copies.push(file);
    else {
      tree.add(file.rel, { directory: false, size: file.size, executable: executables.has(file.rel) });
      judged.set(WORKSPACE + file.rel, digest === (await base.digest(WORKSPACE + file.rel)));
    }
  }
  if (copies.length > 0) {
    await fsp.mkdir(into, { mode: 0o700 });
    for (const dir of new Set(copies.map((f) => path.posix.dirname(f.rel)))) await fsp.mkdir(path.join(workspaceRoot, dir), { recursive: true, mode: 0o700 });
    await downloadListed(client, '', workspaceRoot, copies, signal ? { signal } : {});
    for (const file of copies) {
      if (executables.has(file.rel)) await fsp.chmod(path.join(workspaceRoot, file.rel), 0o755);
      tree.addCopy(file.rel);
    }
  }
  return { workspaceRoot, tree, skipped, judged, copied: copies.length, hashed: judged.size };
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
    const parent = path.dirname(at);
    const siblings = this.children.get(parent);
    if (siblings === undefined) throw new Error(`the listing has ${rel} before its directory`);
    siblings.push(Buffer.from(path.basename(at)));
    return at;
  }

  private stats(shape: { directory: boolean; size: number; executable: boolean }): ScanStats {
    const size = BigInt(shape.size);
    const mode = BigInt((shape.directory ? fs.constants.S_IFDIR : fs.constants.S_IFREG) | (shape.executable ? 0o755 : 0o644));
    const ino = this.nextIno++;
    return {
      isDirectory: () => shape.directory,
      isFile: () => !shape.directory,
      isSymbolicLink: () => false,
      dev: 0n,
      ino,
      nlink: 1n,
      size,
      mode,
      mtimeNs: 0n,
      ctimeNs: 0n,
    };
  }
}
