// Keeping the session tree an activation packed, for the session's next activation on this machine. Seed 000 runs
// one activation per message: hydrate the committed bundle into a fresh local sandbox, the agent's turn, pack the
// tree in place, destroy the sandbox — and the next turn hydrates the very bundle that pack has just written,
// decompressing, verifying and writing every byte again (for 100 MB a quarter of a second, a third of the overhead).
// Instead, once the pack has read the tree (nothing runs in the sandbox any more), the session directory is moved out
// of the sandbox before it is destroyed, trimmed to exactly what the bundle holds (what the snapshot policy left out
// and anything beside `state/` and `workspace/` removed, modes made the bundle's) and, once the commit has succeeded,
// kept in the provider's directory under the session. The next activation takes it only when the session's current
// revision is that very bundle (its SHA-256), on the same boot (nothing here was fsynced), under the same limits, and
// every entry is still the inode the pack read — device, inode, links, size, mtime and ctime, which any write, chmod,
// link or rename changes — with nothing added or missing. Anything else: it is removed, and the bundle is hydrated
// as always. A few trees at most (`KEPT_TREE_BOUNDS`); the directory may be deleted at any time.
import { randomBytes, createHash } from 'node:crypto';
import { lstatSync, readdirSync, type BigIntStats } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { SessionBundleLimits } from '../../protocol/bundle';
import { Sha256DigestSchema } from '../../protocol/digest';
import type { KnownDigest, PackedSourceTree } from '../bundle/pack';
import type { Logger } from '../log';
import { byCodeUnits } from '../platform/codeUnitOrder';
import { bootId } from '../platform/processIdentity';
import type { SessionIdentity } from '../sandboxes/workspaceMover';

export const KEPT_TREE_BOUNDS = {
  /** Sessions whose tree is kept; the least recently kept goes first. */
  maxTrees: 4,
  /** Payload bytes of all kept trees together; a tree bigger than this is not kept. */
  maxBytes: 2 * 1024 ** 3,
  /** A claimed or half-kept directory this old belongs to a process that died: it is removed. */
  abandonedAfterMs: 60 * 60_000,
};

/** Which tree a checkout wants: exactly the bundle a session's current revision holds, read under these limits. */
export interface KeptTreeKey {
  sessionId: string;
  /** The bundle's SHA-256 (`sha256:…`), as the revision's checkpoint names it. */
  bundleDigest: string;
  limits: SessionBundleLimits;
}

/** A kept tree, now the sandbox's session: its state identity and every file's digest (pack.ts `knownDigests`). */
export interface TakenTree {
  identity: SessionIdentity;
  knownDigests: Map<string, KnownDigest>;
}

/** A kept tree claimed for a checkout and verified: moved into the sandbox, or else put back (`release`); either once. */
export interface ClaimedTree {
  /** Moves it to `destination` (which must not exist; its parent is made); undefined if that fails. */
  placeInto(destination: string): Promise<TakenTree | undefined>;
  /** Puts it back for a later activation when it was not placed (a no-op after `placeInto`); never rejects. */
  release(): Promise<void>;
}

/** A tree moved out of its sandbox and being trimmed: `keep` once its bundle is committed, else `discard`. */
export interface TreeToKeep {
  keep(): Promise<void>;
  discard(): Promise<void>;
}

const Decimal = z.string().regex(/^[0-9]+$/);
const EntrySchema = z.strictObject({
  path: z.string().min(1),
  mode: z.union([z.literal(0o644), z.literal(0o755)]),
  dev: Decimal,
  ino: Decimal,
  nlink: Decimal,
  size: Decimal,
  mtimeNs: Decimal,
  ctimeNs: Decimal,
  /** Hex SHA-256 of a file's bytes (absent for a directory, whose path ends with `/`). */
  digest: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});
type Entry = z.infer<typeof EntrySchema>;

const SummarySchema = z.strictObject({
  version: z.literal(1),
  sessionId: z.string().min(1),
  bundleDigest: Sha256DigestSchema,
  bootId: z.string().min(1),
  limits: z.string(),
  payloadBytes: z.number().int().min(0),
  identity: z.strictObject({ mediaType: z.string().min(1), bytes: z.base64() }),
});
type Summary = z.infer<typeof SummarySchema>;
const RecordSchema = z.strictObject({ summary: SummarySchema, entries: z.array(EntrySchema) });

const SUMMARY = 'summary.json';
const RECORD = 'record.json';
const TREE = 'session';
const TOP = ['state', 'workspace'];

const limitsText = (limits: SessionBundleLimits): string => JSON.stringify(Object.entries(limits).sort(([a], [b]) => byCodeUnits(a, b)));
/** The name of a session's kept tree in the directory (a digest: session ids may hold any character). */
export const keptTreeName = (sessionId: string): string => `s-${createHash('sha256').update(sessionId).digest('hex').slice(0, 40)}`;
const privateName = (kind: 'incoming' | 'taken' | 'trash'): string => `${kind}-${randomBytes(8).toString('hex')}`;
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

function isMissing(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && err.code === 'ENOENT';
}

/** Every entry below `root` (whose top entries must be `state/` and `workspace/` directories), by archive path. */
function walk(root: string): Map<string, BigIntStats> {
  const found = new Map<string, BigIntStats>();
  const pending: string[] = [];
  for (const name of readdirSync(root)) {
    if (!TOP.includes(name)) throw new Error(`${name} beside state/ and workspace/`);
    pending.push(`${name}/`);
  }
  while (pending.length > 0) {
    const dir = pending.pop() as string;
    const st = lstatSync(path.join(root, dir), { bigint: true });
    if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
    found.set(dir, st);
    for (const name of readdirSync(path.join(root, dir))) {
      const child = lstatSync(path.join(root, dir, name), { bigint: true });
      if (child.isDirectory()) pending.push(`${dir}${name}/`);
      else if (child.isFile()) found.set(`${dir}${name}`, child);
      else throw new Error(`${dir}${name} is neither a file nor a directory`);
    }
  }
  return found;
}

function fingerprintFields(st: BigIntStats): Pick<Entry, 'dev' | 'ino' | 'nlink' | 'size' | 'mtimeNs' | 'ctimeNs'> {
  return { dev: `${st.dev}`, ino: `${st.ino}`, nlink: `${st.nlink}`, size: `${st.size}`, mtimeNs: `${st.mtimeNs}`, ctimeNs: `${st.ctimeNs}` };
}

/** The tree's entries as recorded, or the first way it differs from them. */
function differenceFrom(root: string, entries: readonly Entry[]): string | undefined {
  const found = walk(root);
  if (found.size !== entries.length) return `${found.size} entries where ${entries.length} were kept`;
  for (const e of entries) {
    const st = found.get(e.path);
    if (st === undefined) return `${e.path} is missing`;
    const now = fingerprintFields(st);
    if (Number(st.mode & 0o7777n) !== e.mode) return `${e.path} changed mode`;
    for (const k of Object.keys(now) as (keyof typeof now)[]) if (now[k] !== e[k]) return `${e.path} changed (${k})`;
  }
  return undefined;
}

/** The state identity and file digests a placed tree's record holds. */
function takenTreeOf(record: z.infer<typeof RecordSchema>): TakenTree {
  const knownDigests = new Map<string, KnownDigest>();
  for (const e of record.entries) {
    if (e.digest === undefined) continue;
    const identity = { dev: BigInt(e.dev), ino: BigInt(e.ino), size: BigInt(e.size), mtimeNs: BigInt(e.mtimeNs), ctimeNs: BigInt(e.ctimeNs) };
    knownDigests.set(e.path, { identity, digest: Buffer.from(e.digest, 'hex') });
  }
  const { identity } = record.summary;
  return { identity: { mediaType: identity.mediaType, bytes: Buffer.from(identity.bytes, 'base64') }, knownDigests };
}

export class KeptSessionTrees {
  constructor(
    /** A private directory (made 0700) on the same file system as the sandboxes' directories. */
    readonly dir: string,
    private readonly log: Logger,
    private readonly bounds = KEPT_TREE_BOUNDS,
  ) {}

  /**
   * Moves the kept tree of `key.sessionId` to `destination` (which must not exist; its parent is made) when it is
   * exactly `key`'s bundle, as a hydrate would have written it; else removes it and returns undefined.
   */
  async take(key: KeptTreeKey, destination: string): Promise<TakenTree | undefined> {
    const claimed = await this.claim(key);
    return claimed?.placeInto(destination);
  }

  /**
   * Takes the kept tree of `key.sessionId` out of the directory when it is exactly `key`'s bundle, as a hydrate would
   * have written it (else removes it: undefined) — before the sandbox it goes into exists, so the check costs no time
   * of the activation's; `placeInto` then moves it into the sandbox, or `release` puts it back.
   */
  async claim(key: KeptTreeKey): Promise<ClaimedTree | undefined> {
    const taken = path.join(this.dir, privateName('taken'));
    try {
      await fsp.rename(path.join(this.dir, keptTreeName(key.sessionId)), taken);
    } catch (err) {
      if (!isMissing(err)) this.log.debug('could not take a kept session tree', { sessionId: key.sessionId, error: errorText(err) });
      return undefined;
    }
    let record: z.infer<typeof RecordSchema>;
    try {
      record = RecordSchema.parse(JSON.parse(await fsp.readFile(path.join(taken, RECORD), 'utf8')));
      const { summary } = record;
      const stale =
        summary.sessionId !== key.sessionId ? 'another session'
        : summary.bundleDigest !== key.bundleDigest ? 'an older revision'
        : summary.bootId !== bootId() ? 'an earlier boot'
        : summary.limits !== limitsText(key.limits) ? 'other limits'
        : differenceFrom(path.join(taken, TREE), record.entries);
      if (stale !== undefined) throw new Error(stale);
    } catch (err) {
      this.log.debug('not using the kept session tree', { sessionId: key.sessionId, why: errorText(err) });
      await fsp.rm(taken, { recursive: true, force: true });
      return undefined;
    }
    // Verified in this private directory (0700), which only this process writes: it stays what was verified.
    let settled = false;
    return {
      placeInto: async (destination) => {
        if (settled) return undefined;
        settled = true;
        try {
          await fsp.mkdir(path.dirname(destination), { recursive: true, mode: 0o755 });
          await fsp.rename(path.join(taken, TREE), destination);
          await fsp.chmod(destination, 0o755);
          return takenTreeOf(record);
        } catch (err) {
          this.log.debug('not using the kept session tree', { sessionId: key.sessionId, error: errorText(err) });
          return undefined;
        } finally {
          await fsp.rm(taken, { recursive: true, force: true });
        }
      },
      release: async () => {
        if (settled) return;
        settled = true;
        // Back under its name, unless another tree was kept there meanwhile.
        await fsp
          .rename(taken, path.join(this.dir, keptTreeName(key.sessionId)))
          .catch(() => fsp.rm(taken, { recursive: true, force: true }))
          .catch((err: unknown) => this.log.debug('could not put a kept session tree back', { sessionId: key.sessionId, error: errorText(err) }));
      },
    };
  }

  /**
   * Moves `sessionDir` — a session this process has just packed in place, in a sandbox where nothing runs any more —
   * out of the sandbox (call it before the sandbox is destroyed) and starts trimming it to what the pack wrote.
   * Undefined when it cannot be kept (too big, no boot id, another file system); the sandbox keeps it then.
   */
  async moveOut(sessionDir: string, packed: PackedSourceTree, next: { sessionId: string; bundleDigest: string; identity: SessionIdentity; limits: SessionBundleLimits }): Promise<TreeToKeep | undefined> {
    const payloadBytes = packed.entries.reduce((n, e) => n + (e.kind === 'file' ? e.size : 0), 0);
    if (payloadBytes > this.bounds.maxBytes || bootId() === 'unknown') return undefined;
    let incoming: string;
    try {
      await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
      await fsp.chmod(this.dir, 0o700);
      incoming = path.join(this.dir, privateName('incoming'));
      await fsp.mkdir(incoming, { mode: 0o700 });
    } catch (err) {
      this.log.debug('cannot keep session trees', { dir: this.dir, error: errorText(err) });
      return undefined;
    }
    try {
      await fsp.rename(sessionDir, path.join(incoming, TREE));
    } catch (err) {
      this.log.debug('not keeping the session tree', { sessionId: next.sessionId, error: errorText(err) });
      await fsp.rm(incoming, { recursive: true, force: true });
      return undefined;
    }
    const summary: Summary = {
      version: 1,
      sessionId: next.sessionId,
      bundleDigest: next.bundleDigest,
      bootId: bootId(),
      limits: limitsText(next.limits),
      payloadBytes,
      identity: { mediaType: next.identity.mediaType, bytes: Buffer.from(next.identity.bytes).toString('base64') },
    };
    // Trimmed while the commit goes on; kept only if both succeed.
    const trimmed = trim(path.join(incoming, TREE), packed).then(
      (entries) => fsp.writeFile(path.join(incoming, RECORD), JSON.stringify({ summary, entries }), { mode: 0o600 }).then(() => true),
      (err: unknown) => {
        this.log.debug('not keeping the session tree', { sessionId: next.sessionId, error: errorText(err) });
        return false;
      },
    );
    const discard = async (): Promise<void> => {
      await trimmed;
      await fsp.rm(incoming, { recursive: true, force: true }).catch(() => undefined);
    };
    return {
      // Never throws: a tree that cannot be kept only means the next activation hydrates.
      keep: async () => {
        try {
          if (!(await trimmed)) return await discard();
          await fsp.writeFile(path.join(incoming, SUMMARY), JSON.stringify(summary), { mode: 0o600 });
          await this.install(incoming, keptTreeName(next.sessionId));
        } catch (err) {
          this.log.debug('not keeping the session tree', { sessionId: next.sessionId, error: errorText(err) });
          await discard();
        }
      },
      discard,
    };
  }

  /** Puts `incoming` in place as `name` (replacing the session's older tree), then keeps within the bounds. */
  private async install(incoming: string, name: string): Promise<void> {
    await this.remove(name);
    await fsp.rename(incoming, path.join(this.dir, name));
    await this.evict(name);
  }

  /** Removes an entry of the directory, first renaming it so that no one can take it half removed. */
  private async remove(name: string): Promise<void> {
    const trash = path.join(this.dir, privateName('trash'));
    try {
      await fsp.rename(path.join(this.dir, name), trash);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    await fsp.rm(trash, { recursive: true, force: true });
  }

  /** The most recently kept trees within `maxTrees` and `maxBytes` stay (`newest` always); leftovers of dead processes go. */
  private async evict(newest: string): Promise<void> {
    const now = Date.now();
    const kept: { name: string; at: number; bytes: number }[] = [];
    for (const name of await fsp.readdir(this.dir)) {
      const at = await fsp.lstat(path.join(this.dir, name)).then((st) => st.ctimeMs, () => undefined);
      if (at === undefined) continue;
      if (!name.startsWith('s-')) {
        if (now - at > this.bounds.abandonedAfterMs) await this.remove(name);
        continue;
      }
      const summary = await fsp
        .readFile(path.join(this.dir, name, SUMMARY), 'utf8')
        .then((text) => SummarySchema.parse(JSON.parse(text)))
        .catch(() => undefined);
      if (summary === undefined || summary.bootId !== bootId()) {
        if (name !== newest) await this.remove(name);
        continue;
      }
      kept.push({ name, at: name === newest ? Infinity : at, bytes: summary.payloadBytes });
    }
    kept.sort((a, b) => b.at - a.at);
    let bytes = 0;
    for (const [i, k] of kept.entries()) {
      bytes += k.bytes;
      if (i > 0 && (i >= this.bounds.maxTrees || bytes > this.bounds.maxBytes)) await this.remove(k.name);
    }
  }
}

/**
 * Makes the moved-out session exactly what the pack wrote: removes what it left out and anything beside `state/` and
 * `workspace/`, proves every packed entry is still the inode the pack read (a file with the very fingerprint), sets
 * the bundle's modes, and returns the record of the result. Throws when the tree is not what the pack read.
 */
async function trim(root: string, packed: PackedSourceTree): Promise<Entry[]> {
  for (const name of await fsp.readdir(root)) if (!TOP.includes(name)) await fsp.rm(path.join(root, name), { recursive: true, force: true });
  for (const skipped of packed.skipped) await fsp.rm(path.join(root, skipped), { recursive: true, force: true });
  const found = walk(root);
  if (found.size !== packed.entries.length) throw new Error(`${found.size} entries where the pack read ${packed.entries.length}`);
  const entries: Entry[] = [];
  for (const e of packed.entries) {
    let st = found.get(e.archivePath);
    if (st === undefined) throw new Error(`${e.archivePath} is gone`);
    const f = e.fingerprint;
    const same = st.dev === f.dev && st.ino === f.ino && (e.kind === 'directory' || (st.nlink === f.nlink && st.size === f.size && st.mtimeNs === f.mtimeNs && st.ctimeNs === f.ctimeNs));
    if (!same) throw new Error(`${e.archivePath} changed after the pack`);
    if (e.kind === 'file' && e.digest === undefined) throw new Error(`${e.archivePath} has no digest`);
    const file = path.join(root, e.archivePath);
    if (Number(st.mode & 0o7777n) !== e.mode) {
      await fsp.chmod(file, e.mode);
      st = await fsp.lstat(file, { bigint: true });
    }
    // As it is now: a chmod changed its ctime; a directory's times are after the removals above.
    entries.push({ path: e.archivePath, mode: e.mode, ...fingerprintFields(st), ...(e.digest !== undefined ? { digest: e.digest.toString('hex') } : {}) });
  }
  return entries;
}
