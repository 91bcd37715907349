// The contents this window last read or wrote of each file of a sandbox, bounded and least recently used
// first out: once the sandbox has closed it serves no reads, yet VS Code's Revert re-reads open files (and a
// failure there ends in its own "Illegal state" dialog), so SandboxFiles answers those reads from here.
import { isUnder } from './sandboxPaths';

/** Kept contents (for reads after the sandbox closed): files up to this size … */
const KEPT_FILE_MAX_BYTES = 4 * 1024 * 1024;
/** … and this much in all per sandbox, the least recently used dropped first. */
const KEPT_TOTAL_MAX_BYTES = 32 * 1024 * 1024;

export class KeptContents {
  /** Insertion order = least recently used first. */
  private readonly kept = new Map<string, Uint8Array>();
  private keptBytes = 0;

  get(p: string): Uint8Array | undefined {
    return this.kept.get(p);
  }

  /** Remembers `data` as the contents of `p` (within the bounds), and returns it. */
  keep(p: string, data: Uint8Array): Uint8Array {
    this.drop(p);
    if (data.byteLength > KEPT_FILE_MAX_BYTES) return data;
    this.kept.set(p, data);
    this.keptBytes += data.byteLength;
    for (const [oldest, bytes] of this.kept) {
      if (this.keptBytes <= KEPT_TOTAL_MAX_BYTES) break;
      this.kept.delete(oldest);
      this.keptBytes -= bytes.byteLength;
    }
    return data;
  }

  drop(p: string): void {
    const old = this.kept.get(p);
    if (!old) return;
    this.kept.delete(p);
    this.keptBytes -= old.byteLength;
  }

  /** Drops `p` if what is kept of it is not `size` bytes long (the file changed elsewhere). */
  dropIfNotSize(p: string, size: number): void {
    const old = this.kept.get(p);
    if (old && old.byteLength !== size) this.drop(p);
  }

  /** Drops `p` and everything under it. */
  dropUnder(p: string): void {
    for (const key of [...this.kept.keys()]) if (isUnder(key, p)) this.drop(key);
  }
}
