// The pack-side scan (spec §1, §6): walks the state and workspace roots with lstat, admits only real
// directories and single-link regular files with portable UTF-8 names, applies the path, file, payload and
// entry quotas as it goes, and records each entry's inode fingerprint so a later change is noticed.
import { lstatSync, readdirSync, type BigIntStats } from 'node:fs';
import { join } from 'node:path';
import type { SessionBundleLimits } from '../../protocol/bundle';
import { SessionBundleError } from './errors';
import { fingerprintOf, sameFingerprint, type Fingerprint } from './fsx';
import { checkQuota } from './limits';
import { pathDepth, utf8Length, validateArchivePath } from './pathLanguage';

export interface SourceEntry {
  kind: 'file' | 'directory';
  archivePath: string;
  sourcePath: string;
  mode: 0o644 | 0o755;
  size: number;
  fingerprint: Fingerprint;
  digest?: Buffer;
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

export interface ScanState {
  entries: SourceEntry[];
  payloadBytes: number;
  entryCount: number;
  /** Archive paths (directories with their `/`) a filter left out: still there, so the final check expects them. */
  skipped?: string[];
}

/**
 * Decides whether an entry the scan reached is packed, asked top-down before the entry is admitted (a left-out
 * directory is not entered, a left-out symlink is not refused); it may throw to refuse the whole pack. `segments`
 * are the entry's path below its root; `size` is a file's size (0 for anything else).
 */
export type ScanFilter = (segments: readonly string[], isDirectory: boolean, size: number) => boolean;

/** What the scan asks of an entry (an lstat with bigint fields). */
export type ScanStats = Pick<BigIntStats, 'isDirectory' | 'isFile' | 'isSymbolicLink' | 'dev' | 'ino' | 'nlink' | 'size' | 'mode' | 'mtimeNs' | 'ctimeNs'>;

/**
 * What a scan reads a tree through: this machine's file system (`hostTree`), or a tree listed elsewhere — a remote
 * sandbox's workspace, outlined from its gateway listing (sandboxes/remoteWorkspace.ts) — which is then admitted by
 * exactly the same rules.
 */
export interface TreeReader {
  lstat(path: string): ScanStats;
  readdir(path: string): Buffer[];
}

export const hostTree: TreeReader = {
  lstat: (p) => lstatSync(p, { bigint: true }),
  readdir: (p) => readdirSync(p, { encoding: 'buffer' }),
};

function admitPath(archivePath: string, limits: SessionBundleLimits): void {
  validateArchivePath(archivePath);
  checkQuota(limits, 'maxPathBytes', utf8Length(archivePath), 'pack');
  const depth = pathDepth(archivePath);
  checkQuota(limits, 'maxPathDepth', depth, 'pack', { pathDepth: depth });
}

function countEntry(state: ScanState, limits: SessionBundleLimits): void {
  state.entryCount += 1;
  checkQuota(limits, 'maxEntryCount', state.entryCount, 'pack');
}

/** Synchronous lstat calls between two yields to the event loop (~1 ms of work). */
const YIELD_EVERY = 256;

type Pending = { dir: string; archive: string };

/** Admit one directory child after lstat: a directory (queued for walking) or a single-link regular file. */
function admitChild(name: string, sourcePath: string, st: ScanStats, parent: Pending, limits: SessionBundleLimits, state: ScanState, pending: Pending[]): SourceEntry {
  if (st.isDirectory()) {
    const archivePath = `${parent.archive}${name}/`;
    admitPath(archivePath, limits);
    const entry: SourceEntry = { kind: 'directory', archivePath, sourcePath, mode: 0o755, size: 0, fingerprint: fingerprintOf(st) };
    state.entries.push(entry);
    countEntry(state, limits);
    pending.push({ dir: sourcePath, archive: archivePath });
    return entry;
  } else if (st.isFile()) {
    const archivePath = `${parent.archive}${name}`;
    admitPath(archivePath, limits);
    if (st.nlink !== 1n) throw new SessionBundleError('unsupported_entry', `unsupported entry: ${JSON.stringify(archivePath)} is hard-linked (nlink ${st.nlink})`);
    if (st.size > BigInt(Number.MAX_SAFE_INTEGER)) throw new SessionBundleError('unsupported_entry', `unsupported entry: ${JSON.stringify(archivePath)} is too large`);
    const size = Number(st.size);
    checkQuota(limits, 'maxFileBytes', size, 'pack');
    state.payloadBytes += size;
    checkQuota(limits, 'maxPayloadBytes', state.payloadBytes, 'pack');
    const mode = (Number(st.mode) & 0o111) !== 0 ? 0o755 : 0o644;
    const entry: SourceEntry = { kind: 'file', archivePath, sourcePath, mode, size, fingerprint: fingerprintOf(st) };
    state.entries.push(entry);
    countEntry(state, limits);
    return entry;
  } else {
    const what = st.isSymbolicLink() ? 'a symbolic link' : 'a special file';
    throw new SessionBundleError('unsupported_entry', `unsupported entry: ${JSON.stringify(`${parent.archive}${name}`)} is ${what}`);
  }
}

/**
 * Scan one root (`state/` or `workspace/`) into `state.entries`, depth first, calling `onEntry` for each entry as
 * it is admitted (pack starts hashing files while the scan goes on). The file-system calls are synchronous
 * (from the page cache an lstat takes microseconds, a promise round trip through the thread pool ~10× that),
 * with a yield to the event loop every YIELD_EVERY calls.
 */
export async function scanRoot(
  rootPath: string,
  archiveRoot: string,
  limits: SessionBundleLimits,
  state: ScanState,
  onEntry?: (entry: SourceEntry) => void,
  filter?: ScanFilter,
  tree: TreeReader = hostTree,
): Promise<void> {
  const rootStat = tree.lstat(rootPath);
  if (!rootStat.isDirectory()) {
    throw new SessionBundleError('unsupported_entry', `unsupported entry: the ${archiveRoot} source root is not a real directory`);
  }
  admitPath(archiveRoot, limits);
  const root: SourceEntry = { kind: 'directory', archivePath: archiveRoot, sourcePath: rootPath, mode: 0o755, size: 0, fingerprint: fingerprintOf(rootStat) };
  state.entries.push(root);
  countEntry(state, limits);
  onEntry?.(root);
  const pending: Pending[] = [{ dir: rootPath, archive: archiveRoot }];
  let calls = 0;
  while (pending.length > 0) {
    const parent = pending.pop() as Pending;
    for (const raw of tree.readdir(parent.dir)) {
      let name: string;
      try {
        name = fatalUtf8.decode(raw);
      } catch {
        throw new SessionBundleError('unsafe_path', `unsafe archive path: a file name under ${parent.archive} is not valid UTF-8`);
      }
      const sourcePath = join(parent.dir, name);
      const st = tree.lstat(sourcePath);
      if (++calls % YIELD_EVERY === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      if (filter !== undefined) {
        const segments = [...parent.archive.slice(archiveRoot.length).split('/').filter((s) => s !== ''), name];
        if (!filter(segments, st.isDirectory(), st.isFile() ? Number(st.size) : 0)) {
          (state.skipped ??= []).push(`${parent.archive}${name}${st.isDirectory() ? '/' : ''}`);
          continue;
        }
      }
      const entry = admitChild(name, sourcePath, st, parent, limits, state, pending);
      onEntry?.(entry);
    }
  }
}

export function sortEntries(entries: SourceEntry[]): void {
  const keyed = entries.map((e) => ({ e, key: Buffer.from(e.archivePath, 'utf8') }));
  keyed.sort((a, b) => Buffer.compare(a.key, b.key));
  keyed.forEach((k, i) => (entries[i] = k.e));
}

/**
 * After emitting: every scanned directory still has its inode fingerprint and exactly the children that were
 * packed (or `skipped` by a filter). Names are compared too, because a directory's mtime moves in coarse clock
 * ticks and can miss a change.
 */
export async function assertDirectoriesUnchanged(entries: readonly SourceEntry[], skipped: readonly string[] = []): Promise<void> {
  const paths = [...entries.map((e) => e.archivePath), ...skipped];
  const packed = new Set(paths);
  const counts = childCounts(paths);
  let calls = 0;
  for (const entry of entries) {
    if (entry.kind !== 'directory') continue;
    if (++calls % YIELD_EVERY === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    const st = lstatSync(entry.sourcePath, { bigint: true });
    const names = readdirSync(entry.sourcePath, { encoding: 'buffer' });
    const unchanged =
      sameFingerprint(fingerprintOf(st), entry.fingerprint) &&
      names.every((raw) => {
        const name = raw.toString('utf8');
        return packed.has(`${entry.archivePath}${name}`) || packed.has(`${entry.archivePath}${name}/`);
      }) &&
      names.length === (counts.get(entry.archivePath) ?? 0);
    if (!unchanged) throw new SessionBundleError('source_changed', `source changed while packing: directory ${JSON.stringify(entry.archivePath)}`, { operation: 'pack' });
  }
}

/** Number of packed children per packed directory, in one pass. */
function childCounts(paths: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const archivePath of paths) {
    const body = archivePath.endsWith('/') ? archivePath.slice(0, -1) : archivePath;
    const slash = body.lastIndexOf('/');
    if (slash === -1) continue;
    const parent = body.slice(0, slash + 1);
    counts.set(parent, (counts.get(parent) ?? 0) + 1);
  }
  return counts;
}
