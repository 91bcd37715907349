// When to compare a sandbox with its baseline again. A comparison reads the whole workspace (as a save would), so
// changes are debounced into one, at most one runs at a time, and the next starts no sooner than a few times the
// last one's duration after it: a workspace that takes 2 s to compare is compared at most every ~10 s while it keeps
// changing, a small one within about a second. A refresh asked for by the user skips the wait. No VS Code API here.

export interface PacerTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface PacerOptions {
  /** Quiet time after a change before comparing (ms). */
  debounceMs?: number;
  /** The gap after a comparison is at least this many times its duration... */
  gapFactor?: number;
  /** ...and at most this long (ms). */
  maxGapMs?: number;
  timers?: PacerTimers;
}

const realTimers: PacerTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export class RefreshPacer {
  private timer: unknown;
  private running: Promise<void> | undefined;
  /** A change (or a request) came after the running comparison started. */
  private pending = false;
  private urgent = false;
  private lastEnd = Number.NEGATIVE_INFINITY;
  private lastDuration = 0;
  private disposed = false;
  /** Resolved when a comparison that started after the request has finished. */
  private waiters: (() => void)[] = [];
  private readonly debounceMs: number;
  private readonly gapFactor: number;
  private readonly maxGapMs: number;
  private readonly timers: PacerTimers;

  constructor(
    private readonly compare: () => Promise<void>,
    options: PacerOptions = {},
  ) {
    this.debounceMs = options.debounceMs ?? 800;
    this.gapFactor = options.gapFactor ?? 4;
    this.maxGapMs = options.maxGapMs ?? 60_000;
    this.timers = options.timers ?? realTimers;
  }

  /** Something changed in the sandbox: compare once it has been quiet for a moment. */
  changed(): void {
    if (this.disposed) return;
    this.pending = true;
    this.schedule();
  }

  /** Compare now (after the running comparison, if any); resolves when a comparison that started after this call ends. */
  now(): Promise<void> {
    if (this.disposed) return Promise.resolve();
    this.pending = true;
    this.urgent = true;
    const done = new Promise<void>((resolve) => this.waiters.push(resolve));
    this.schedule();
    return done;
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private schedule(): void {
    if (this.running || !this.pending) return;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    const gap = Math.min(this.maxGapMs, this.gapFactor * this.lastDuration);
    const delay = this.urgent ? 0 : Math.max(this.debounceMs, this.lastEnd + gap - this.timers.now());
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      this.start();
    }, delay);
  }

  private start(): void {
    if (this.disposed) return;
    this.pending = false;
    this.urgent = false;
    const waiters = this.waiters.splice(0);
    const started = this.timers.now();
    this.running = this.compare()
      .catch(() => undefined) // the comparison reports its own errors
      .finally(() => {
        this.lastEnd = this.timers.now();
        this.lastDuration = this.lastEnd - started;
        this.running = undefined;
        for (const resolve of waiters) resolve();
        this.schedule();
      });
  }
}
