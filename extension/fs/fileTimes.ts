// The mtimes and ctimes SandboxFiles reports: the gateway's listings carry sizes but no times, so a file's
// times start when this window first sees it and move forward — on a clock that never repeats or goes back —
// whenever its size changes, this window writes it or a command may have changed it. VS Code re-reads an open
// file only when its mtime moves, so this rule is what makes an editor show a change.
import { isUnder } from './sandboxPaths';

interface Times {
  mtime: number;
  ctime: number;
  size: number;
}

export class FileTimes {
  private readonly times = new Map<string, Times>();
  private clock = 0;

  get(p: string): Times | undefined {
    return this.times.get(p);
  }

  /** A listing showed `p` with `size` bytes: first seen now, or changed now if its size moved. */
  observe(p: string, size: number): void {
    const known = this.times.get(p);
    if (!known) {
      const now = this.now();
      this.times.set(p, { mtime: now, ctime: now, size });
    } else if (known.size !== size) {
      known.mtime = this.now(known.mtime);
      known.size = size;
    }
  }

  /** `p` may have changed (same size or not): a later mtime. */
  bump(p: string): void {
    const t = this.times.get(p);
    if (t) t.mtime = this.now(t.mtime);
  }

  /** This window wrote `size` bytes to `p`. */
  written(p: string, size: number): void {
    const t = this.times.get(p);
    if (t) {
      t.mtime = this.now(t.mtime);
      t.size = size;
    } else {
      const now = this.now();
      this.times.set(p, { mtime: now, ctime: now, size });
    }
  }

  /** Forgets `p` and everything under it. */
  dropUnder(p: string): void {
    for (const key of [...this.times.keys()]) if (isUnder(key, p)) this.times.delete(key);
  }

  /** A millisecond clock that never repeats or goes back, so every change gets a later mtime. */
  private now(after = 0): number {
    this.clock = Math.max(Date.now(), this.clock + 1, after + 1);
    return this.clock;
  }
}
