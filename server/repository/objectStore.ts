// The immutable, content-addressed object store the repository publishes bundles and checkpoint
// manifests into (spec §9.1), and the object-id rule shared by every store: the id is derived from
// (digest, media type), so equal content is stored once and a ref cannot name other bytes.
import {
  ImmutableObjectRefSchema,
  Sha256DigestSchema,
  type ImmutableObjectRef,
} from '../../protocol/repository';
import { SessionRepositoryError } from './errors';
import { sha256Hex } from './digestMeter';

/**
 * What to publish. `handOver`: the caller gives the file up (a freshly packed bundle in private scratch, written and
 * closed): a store on the same file system may rename it into place instead of copying it — verified all the same —
 * and the caller must not use the path afterwards, whether or not it still exists.
 */
export type ObjectSource = { kind: 'file'; path: string; handOver?: boolean; written?: WrittenFile } | { kind: 'bytes'; value: Uint8Array };

/**
 * A trusted digest for a handed-over file: what its writer — our own code, in this process (the codec's pack, see
 * bundle/publish.ts `writtenArchiveOf`) — computed over exactly the bytes it wrote, never one read back from a file
 * or received from anywhere, with the file's identity as the writer left it. A store that moves the file in may use
 * that digest instead of hashing the file again, but only while the file is still that inode, unchanged: the same
 * device, inode, size, mtime and ctime (every write, chmod, utimes and link moves the ctime, which nobody can set
 * back). Anything else is hashed as usual, so a file changed after it was written is refused by publish
 * (integrity_mismatch) and nothing is published.
 */
export interface WrittenFile {
  digest: string;
  identity: { dev: bigint; ino: bigint; size: bigint; mtimeNs: bigint; ctimeNs: bigint };
}

export interface PublishObjectInput {
  digest: string;
  bytes: number;
  mediaType: string;
  source: ObjectSource;
}

export interface MaterializeObjectInput {
  ref: ImmutableObjectRef;
  /** A file path that must not exist yet; it is never overwritten. */
  destination: string;
  /** `quota_exceeded` when the object is larger. */
  maxBytes: number;
}

export interface MaterializedObject {
  path: string;
  bytes: number;
  digest: string;
}

export interface ImmutableObjectStore {
  /** Stores the bytes (verifying size and digest while streaming) and returns once they are durable. Never overwrites other bytes. */
  publish(input: PublishObjectInput): Promise<ImmutableObjectRef>;
  /** Re-verifies the ref, the stored size and the digest; `object_not_found` / `integrity_mismatch` otherwise. */
  assertReadable(ref: ImmutableObjectRef): Promise<void>;
  /** Copies the object to a new file, verifying while copying; the destination appears only if it verified. */
  materialize(input: MaterializeObjectInput): Promise<MaterializedObject>;
  /**
   * The file that holds the object, for a reader that verifies size and digest itself while it reads (the bundle
   * codec does) — no copy. Absent when objects are not files (PostgreSQL); undefined when the object is missing.
   * `quota_exceeded` when the object is larger than `maxBytes`.
   */
  storedFile?(ref: ImmutableObjectRef, maxBytes: number): Promise<string | undefined>;
  /** The store's object id for a ref (`integrity_mismatch` for a foreign or non-canonical ref). */
  objectIdOf(ref: ImmutableObjectRef): string;
}

/** `sha256hex(digest + "\0" + mediaType)` — the same id rule as Maka's file adapter (spec §9.3). */
export function objectIdFor(digest: string, mediaType: string): string {
  return sha256Hex(`${digest}\u0000${mediaType}`);
}

/** Checks a publish request's shape; bad shapes are programmer errors (TypeError). */
export function checkPublishInput(input: PublishObjectInput): void {
  if (!Sha256DigestSchema.safeParse(input.digest).success) {
    throw new TypeError('digest must be sha256: followed by 64 lowercase hex digits');
  }
  if (!Number.isSafeInteger(input.bytes) || input.bytes < 0) throw new RangeError('bytes must be a non-negative safe integer');
  if (typeof input.mediaType !== 'string' || input.mediaType.length === 0) throw new TypeError('mediaType must be a non-empty string');
  if (input.source.kind === 'file' && (typeof input.source.path !== 'string' || input.source.path === '')) {
    throw new TypeError('source.path must be a file path');
  }
}

export function checkMaxBytes(maxBytes: number): void {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError('maxBytes must be a non-negative safe integer');
}

/**
 * Parses a ref of `scheme` + id and checks the id is the canonical one for its digest and media
 * type; anything else is `integrity_mismatch` (a ref that could point at other bytes).
 */
export function canonicalObjectId(ref: ImmutableObjectRef, scheme: string): string {
  const parsed = ImmutableObjectRefSchema.safeParse(ref);
  if (!parsed.success) throw new SessionRepositoryError('integrity_mismatch', `object ref is malformed: ${parsed.error.message}`);
  const id = objectIdFor(ref.digest, ref.mediaType);
  if (ref.objectRef !== `${scheme}${id}`) {
    throw new SessionRepositoryError(
      'integrity_mismatch',
      `object ref ${JSON.stringify(ref.objectRef)} is not the canonical ref ${scheme}${id} for digest ${ref.digest} and media type ${ref.mediaType}`,
    );
  }
  return id;
}
