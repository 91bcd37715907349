// The canonical tree digest (spec §3): SHA-256 over a fixed record stream of every payload entry in raw byte
// order. The incremental builder also enforces the payload layout (three roots, explicit parents, order,
// no duplicates, normalized modes) and is fail-closed: after one failed add, everything fails.
import { createHash, type Hash } from 'node:crypto';
import { SessionBundleError } from './errors';
import { compareArchivePaths, validateArchivePath } from './pathLanguage';

export const TREE_MAGIC = Buffer.from('MAKA_SESSION_BUNDLE_TREE\0', 'latin1');
const ZERO_DIGEST = Buffer.alloc(32);
export const STATE_IDENTITY_PATH = 'state-identity.json';
export const STATE_ROOT = 'state/';
export const WORKSPACE_ROOT = 'workspace/';

export type TreeEntryHeader =
  | { kind: 'file'; path: string; mode: number; size: number }
  | { kind: 'directory'; path: string; mode: number; size: number };
export type TreeEntry = TreeEntryHeader & { digest?: Uint8Array };

export interface TreeSummary {
  treeDigest: string;
  payloadBytes: number;
  entryCount: number;
}

export function encodeTreeHeader(entryCount: number): Buffer {
  const out = Buffer.alloc(TREE_MAGIC.length + 12);
  TREE_MAGIC.copy(out, 0);
  out.writeUInt32BE(1, TREE_MAGIC.length);
  out.writeBigUInt64BE(BigInt(entryCount), TREE_MAGIC.length + 4);
  return out;
}

/** Write one record into `target` (which must have room: 47 bytes plus the path) and return its length. */
function writeTreeRecord(entry: TreeEntryHeader, digest: Uint8Array | undefined, path: Buffer, target: Buffer): number {
  let o = target.writeUInt8(entry.kind === 'directory' ? 0x01 : 0x02, 0);
  o = target.writeUInt32BE(path.length, o);
  o += path.copy(target, o);
  o = target.writeUInt16BE(entry.mode, o);
  o = target.writeBigUInt64BE(BigInt(entry.size), o);
  if (entry.kind === 'directory' || digest === undefined) ZERO_DIGEST.copy(target, o);
  else target.set(digest.subarray(0, 32), o);
  return o + 32;
}

export function encodeTreeRecord(entry: TreeEntry): Buffer {
  const path = Buffer.from(entry.path, 'utf8');
  const out = Buffer.alloc(1 + 4 + path.length + 2 + 8 + 32);
  writeTreeRecord(entry, entry.digest, path, out);
  return out;
}

interface OpenDirectory {
  path: string;
  fileNames: Set<string>;
}

/**
 * Streaming builder. `begin(header)` checks layout before any content is read (so hydrate can refuse an entry
 * before writing it); `complete(digest)` appends the record. `add` does both for callers that know the digest.
 */
export class CanonicalTreeBuilder {
  private readonly hash: Hash = createHash('sha256');
  private readonly stack: OpenDirectory[] = [];
  private previous: Buffer | undefined;
  private pending: { header: TreeEntryHeader; path: Buffer } | undefined;
  private scratch = Buffer.allocUnsafe(1024);
  private failed = false;
  private count = 0;
  private bytes = 0;
  private seenIdentity = false;
  private seenState = false;
  private seenWorkspace = false;

  constructor(private readonly declaredEntryCount: number) {
    if (!Number.isSafeInteger(declaredEntryCount) || declaredEntryCount < 0) throw new RangeError('declaredEntryCount must be a non-negative safe integer');
    this.hash.update(encodeTreeHeader(declaredEntryCount));
  }

  add(entry: TreeEntry): void {
    this.begin(entry);
    this.complete(entry.digest);
  }

  begin(header: TreeEntryHeader): void {
    this.guard(() => {
      if (this.pending !== undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: previous entry not completed');
      const path = Buffer.from(header.path, 'utf8');
      this.checkLayout(header, path);
      this.pending = { header, path };
    });
  }

  complete(digest?: Uint8Array): void {
    this.guard(() => {
      const pending = this.pending;
      if (pending === undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: no entry to complete');
      const entry = pending.header;
      if (entry.kind === 'file' && (digest === undefined || digest.length !== 32)) {
        throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: file digest must be 32 bytes');
      }
      this.pending = undefined;
      const needed = 47 + pending.path.length;
      if (this.scratch.length < needed) this.scratch = Buffer.allocUnsafe(needed);
      this.hash.update(this.scratch.subarray(0, writeTreeRecord(entry, digest, pending.path, this.scratch)));
    });
  }

  finish(): TreeSummary {
    let summary: TreeSummary | undefined;
    this.guard(() => {
      if (this.pending !== undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: last entry not completed');
      if (!this.seenIdentity) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: state-identity.json is missing');
      if (!this.seenState || !this.seenWorkspace) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: state/ or workspace/ root is missing');
      if (this.count !== this.declaredEntryCount) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: entry count differs from the declared count');
      this.failed = true;
      summary = { treeDigest: `sha256:${this.hash.digest('hex')}`, payloadBytes: this.bytes, entryCount: this.count };
    });
    if (summary === undefined) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: tree already finished');
    return summary;
  }

  private guard(step: () => void): void {
    if (this.failed) throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: canonical tree builder already failed');
    try {
      step();
    } catch (err) {
      this.failed = true;
      throw err;
    }
  }

  private checkLayout(entry: TreeEntryHeader, path: Buffer): void {
    const segments = validateArchivePath(entry.path);
    if (entry.kind === 'directory' ? !entry.path.endsWith('/') : entry.path.endsWith('/')) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: directory paths end with / and file paths do not');
    }
    if (entry.kind === 'directory' ? entry.mode !== 0o755 || entry.size !== 0 : entry.mode !== 0o644 && entry.mode !== 0o755) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: mode is not normalized (dirs 0755, files 0644/0755)');
    }
    if (!Number.isSafeInteger(entry.size) || entry.size < 0 || !Number.isSafeInteger(this.bytes + entry.size)) {
      throw new SessionBundleError('unsupported_entry', 'unsupported entry: size outside the safe integer range');
    }
    if (this.count + 1 > this.declaredEntryCount) {
      throw new SessionBundleError('integrity_mismatch', 'integrity mismatch: more entries than declared', { entryIndex: this.count });
    }
    if (this.previous !== undefined && Buffer.compare(this.previous, path) >= 0) {
      throw new SessionBundleError('unsafe_path', 'unsafe archive path: duplicate or out-of-order entry');
    }
    this.checkParent(entry, segments);
    this.previous = path;
    this.count += 1;
    if (entry.kind === 'file') this.bytes += entry.size;
  }

  private checkParent(entry: TreeEntryHeader, segments: string[]): void {
    if (segments.length === 1) {
      this.checkRoot(entry);
      this.stack.length = 0;
      if (entry.kind === 'directory') this.stack.push({ path: entry.path, fileNames: new Set() });
      return;
    }
    while (this.stack.length > 0 && !entry.path.startsWith(this.stack[this.stack.length - 1]?.path ?? '\0')) this.stack.pop();
    const parent = this.stack[this.stack.length - 1];
    const parentPath = `${segments.slice(0, -1).join('/')}/`;
    if (parent === undefined || parent.path !== parentPath) {
      throw new SessionBundleError('unsafe_path', 'unsafe archive path: parent directory is not an earlier explicit entry');
    }
    const leaf = segments[segments.length - 1] ?? '';
    if (entry.kind === 'file') {
      parent.fileNames.add(leaf);
    } else {
      if (parent.fileNames.has(leaf)) throw new SessionBundleError('unsafe_path', 'unsafe archive path: a file and a directory share one path');
      this.stack.push({ path: entry.path, fileNames: new Set() });
    }
  }

  private checkRoot(entry: TreeEntryHeader): void {
    if (entry.path === STATE_IDENTITY_PATH || entry.path === 'state-identity.json/') {
      if (entry.kind !== 'file' || entry.mode !== 0o644) {
        throw new SessionBundleError('unsupported_entry', 'unsupported entry: state-identity.json must be a 0644 file');
      }
      this.seenIdentity = true;
    } else if (entry.path === STATE_ROOT || entry.path === 'state') {
      if (entry.kind !== 'directory') throw new SessionBundleError('unsupported_entry', 'unsupported entry: state/ must be a directory');
      this.seenState = true;
    } else if (entry.path === WORKSPACE_ROOT || entry.path === 'workspace') {
      if (entry.kind !== 'directory') throw new SessionBundleError('unsupported_entry', 'unsupported entry: workspace/ must be a directory');
      this.seenWorkspace = true;
    } else {
      throw new SessionBundleError('unsafe_path', 'unsafe archive path: outside state-identity.json, state/ and workspace/');
    }
  }
}

/** The whole record stream at once (golden vectors, tests); entries are sorted first. */
export function encodeCanonicalTree(entries: readonly TreeEntry[]): Buffer {
  const sorted = [...entries].sort((a, b) => compareArchivePaths(a.path, b.path));
  return Buffer.concat([encodeTreeHeader(sorted.length), ...sorted.map(encodeTreeRecord)]);
}
