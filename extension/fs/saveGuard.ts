// Refuses a save over a change this window has not seen. VS Code's own check before a save compares only the size
// the editor read with the size the file system reports (vscode#119002), and our mtimes move only when a change is
// announced (fileTimes.ts): a process in the sandbox that rewrites a file at the same size, or one whose change has
// not been announced yet, would otherwise lose its bytes to the save — or to the auto save a second later. So each
// file's base (the size and SHA-256 of what this window last read or wrote) is kept, and a save whose file no
// longer holds its base is refused, and stays refused until the user overwrites it or the window reads it again.
// A read while the editor holds unsaved edits of the file is not the editor's and does not move the base
// (SandboxFiles.editorShows).
import { createHash } from 'node:crypto';
import { isUnder } from './sandboxPaths';

/** At most this many files' bases are kept; the least recently used is forgotten first (its saves go unchecked). */
const MAX_BASES = 10_000;

interface FileBase {
  size: number;
  sha256: string;
}

function baseOf(data: Uint8Array): FileBase {
  return { size: data.byteLength, sha256: createHash('sha256').update(data).digest('hex') };
}

/** What a save found: nothing to check, the base, or a change (`theirs`: the file now, undefined when too large to read). */
export type SaveCheck = { kind: 'unchecked' } | { kind: 'unchanged' } | { kind: 'changed'; theirs: Uint8Array | undefined; first: boolean };

export class SaveGuard {
  /** Insertion order = least recently used first. */
  private readonly bases = new Map<string, FileBase>();
  /** Refused files: the sandbox's version then, until overwritten or read again. */
  private readonly conflicts = new Map<string, { theirs: Uint8Array | undefined }>();

  /** This window read or wrote `data` as the contents of `p`: its new base, and no conflict. */
  seen(p: string, data: Uint8Array): void {
    this.conflicts.delete(p);
    this.bases.delete(p);
    this.bases.set(p, baseOf(data));
    if (this.bases.size > MAX_BASES) {
      const oldest = this.bases.keys().next();
      if (!oldest.done) this.bases.delete(oldest.value);
    }
  }

  /**
   * Before a save over `p`, whose file system listing says `listedSize` bytes. When that is not the size of its base,
   * VS Code has compared sizes and asked the user already: unchecked. Otherwise `readNow` (at most `maxBytes`) decides.
   */
  async check(p: string, listedSize: number, maxBytes: number, readNow: () => Promise<{ contents: Uint8Array; truncated: boolean }>): Promise<SaveCheck> {
    const base = this.bases.get(p);
    if (base === undefined || base.size > maxBytes || listedSize !== base.size) return { kind: 'unchecked' };
    const now = await readNow();
    if (!now.truncated) {
      const seen = baseOf(now.contents);
      if (seen.size === base.size && seen.sha256 === base.sha256) return { kind: 'unchanged' };
    }
    const theirs = now.truncated ? undefined : now.contents;
    const first = !this.conflicts.has(p);
    this.conflicts.set(p, { theirs });
    return { kind: 'changed', theirs, first };
  }

  /** The sandbox's version of a file whose save was refused (undefined: no refusal, or too large to keep). */
  theirs(p: string): Uint8Array | undefined {
    return this.conflicts.get(p)?.theirs;
  }

  /** The user chose to save over the refused version of `p`: the next save goes through while the sandbox still holds it. */
  overwrite(p: string): void {
    const conflict = this.conflicts.get(p);
    if (!conflict) return;
    if (conflict.theirs === undefined) this.forget(p);
    else this.seen(p, conflict.theirs);
  }

  /** Forgets `p` and everything under it. */
  forget(p: string): void {
    for (const key of [...this.bases.keys()]) if (isUnder(key, p)) this.bases.delete(key);
    for (const key of [...this.conflicts.keys()]) if (isUnder(key, p)) this.conflicts.delete(key);
  }

  /** `from` (a file or a folder) was renamed to `to`, replacing whatever was there: the bases went with it. */
  move(from: string, to: string): void {
    const moved = [...this.bases].filter(([key]) => isUnder(key, from));
    this.forget(from);
    this.forget(to);
    for (const [key, base] of moved) this.bases.set(to + key.slice(from.length), base);
  }
}
