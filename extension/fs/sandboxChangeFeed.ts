// Changes other clients make in a sandbox (an agent over MCP, the CLI, another window), heard from
// the sandbox's log: runtimed writes an audit line after every mutation (command, write_file,
// create_directory, delete_file, rename_file), from whichever client it came. Lines of this
// window's own operations are skipped (it announces those itself: SandboxFiles after its writes,
// the terminals after their commands); for the others the window re-checks the folders it has
// listed, as after one of its own commands — an audit line carries no path. Bursts are debounced
// into one re-check (at most one running; lines meanwhile cause one more after it). A follow that
// fails is started again with backoff, from the last line seen (lines read twice are skipped), and
// warned about once per outage. Nothing of the lines is kept. No VS Code API here, so it is
// unit-testable.
import type { AuditOperation } from '../../protocol/kruntimes/runtimedLog';
import { auditRows } from '../views/operationText';

export interface FeedFollow {
  /** Resolves when the Run has ended (its log is complete), or rejects with why following failed. */
  readonly done: Promise<void>;
  stop(): void;
}

export interface FeedTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ChangeFeedOptions {
  /** For messages: the sandbox's name. */
  label: string;
  /** Follows the sandbox's log, timestamped, from `sinceTime` (at most the `tailLines` last lines before now). */
  follow(query: { sinceTime: string; tailLines: number; timestamps: true }, onLines: (lines: string[]) => void): FeedFollow;
  /** Whether an audit line of `kind` logged at `loggedAt` (ms) is this window's own operation (and uses it up). */
  isOwn(kind: AuditOperation, loggedAt: number): boolean;
  /** Re-checks what this window shows of the sandbox; resolves once the changes are announced. */
  recheck(): Promise<void>;
  /** Whether the sandbox has ended: a follow that finishes is then not started again. */
  ended(): boolean;
  log: { info(message: string): void; warn(message: string): void };
  timers?: FeedTimers;
  /** Quiet time after a line before the re-check (ms). */
  debounceMs?: number;
  /** A steady stream of lines still re-checks at least this often (ms). */
  maxDelayMs?: number;
  retryMinMs?: number;
  retryMaxMs?: number;
}

export interface FeedCounters {
  /** Audit lines of other clients' operations. */
  foreign: number;
  /** Audit lines of this window's own operations (skipped). */
  own: number;
  rechecks: number;
  /** Follows started (1 + retries). */
  follows: number;
  failures: number;
}

/** Lines before the feed started that a (re)started follow may read again, at most. */
export const MAX_REPLAY_LINES = 1000;
/** How far the log's clock and this window's may disagree: the first follow starts this much before now. */
const START_SLACK_MS = 2000;

const realTimers: FeedTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export class SandboxChangeFeed {
  readonly counters: FeedCounters = { foreign: 0, own: 0, rechecks: 0, follows: 0, failures: 0 };
  private readonly timers: FeedTimers;
  private readonly debounceMs: number;
  private readonly maxDelayMs: number;
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private readonly startedAt: number;
  private following: FeedFollow | undefined;
  private openedAt = 0;
  /** Counts follows: lines of one that was replaced are dropped. */
  private generation = 0;
  private stopped = false;
  /** The log time of the newest audit line handled (ns since the epoch). */
  private lastNs: bigint | undefined;
  private retryDelay: number;
  private retryTimer: unknown;
  private flushTimer: unknown;
  private firstPendingAt: number | undefined;
  private rechecking = false;
  private again = false;
  private failing = false;

  constructor(private readonly o: ChangeFeedOptions) {
    this.timers = o.timers ?? realTimers;
    this.debounceMs = o.debounceMs ?? 150;
    this.maxDelayMs = o.maxDelayMs ?? 1000;
    this.retryMinMs = o.retryMinMs ?? 1000;
    this.retryMaxMs = o.retryMaxMs ?? 60_000;
    this.retryDelay = this.retryMinMs;
    this.startedAt = this.timers.now();
    this.open();
  }

  /** Whether the feed still follows the log (or will, after a failure). */
  get active(): boolean {
    return !this.stopped;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.following?.stop();
    this.following = undefined;
    if (this.retryTimer !== undefined) this.timers.clearTimeout(this.retryTimer);
    if (this.flushTimer !== undefined) this.timers.clearTimeout(this.flushTimer);
    this.retryTimer = this.flushTimer = undefined;
  }

  private open(): void {
    if (this.stopped) return;
    this.counters.follows += 1;
    this.openedAt = this.timers.now();
    // From the last line handled (whole seconds, as kubectl sends sinceTime; what comes again is
    // skipped), or from shortly before the feed started: no change is missed while the request
    // travels, and what the window did itself meanwhile is claimed as its own.
    const sinceMs = this.lastNs !== undefined ? Number(this.lastNs / 1_000_000n) : this.startedAt - START_SLACK_MS;
    const generation = ++this.generation;
    const follow = this.o.follow({ sinceTime: wholeSeconds(sinceMs), tailLines: MAX_REPLAY_LINES, timestamps: true }, (lines) => {
      if (this.generation === generation) this.onLines(lines);
    });
    this.following = follow;
    follow.done.then(
      () => this.closed(follow, undefined),
      (err: unknown) => this.closed(follow, err),
    );
  }

  private closed(follow: FeedFollow, err: unknown): void {
    if (this.following !== follow || this.stopped) return;
    this.following = undefined;
    if (err === undefined && this.o.ended()) {
      this.stopped = true; // the Run ended: its log is complete
      return;
    }
    if (this.timers.now() - this.openedAt >= this.retryMaxMs) {
      // It followed for a good while: this is a new outage, not the same one.
      this.retryDelay = this.retryMinMs;
      this.failing = false;
    }
    if (err !== undefined) {
      this.counters.failures += 1;
      if (!this.failing) {
        this.failing = true;
        this.o.log.warn(`live changes of ${this.o.label}: following its log failed (${err instanceof Error ? err.message : String(err)}); retrying in the background`);
      }
    }
    const delay = this.retryDelay;
    this.retryDelay = Math.min(this.retryDelay * 2, this.retryMaxMs);
    this.retryTimer = this.timers.setTimeout(() => {
      this.retryTimer = undefined;
      this.open();
    }, delay);
  }

  private onLines(lines: string[]): void {
    if (this.stopped) return;
    if (this.failing) {
      this.failing = false;
      this.o.log.info(`live changes of ${this.o.label}: following its log again`);
    }
    this.retryDelay = this.retryMinMs;
    for (const row of auditRows(lines)) {
      const ns = timeNs(row.time);
      if (ns !== undefined) {
        if (this.lastNs !== undefined && ns <= this.lastNs) continue; // read again after a restart
        this.lastNs = ns;
      }
      const loggedAt = ns !== undefined ? Number(ns / 1_000_000n) : this.timers.now();
      if (this.o.isOwn(row.audit.operation, loggedAt)) this.counters.own += 1;
      else {
        this.counters.foreign += 1;
        this.schedule();
      }
    }
  }

  private schedule(): void {
    const now = this.timers.now();
    this.firstPendingAt ??= now;
    if (this.flushTimer !== undefined) this.timers.clearTimeout(this.flushTimer);
    const delay = Math.max(0, Math.min(this.debounceMs, this.firstPendingAt + this.maxDelayMs - now));
    this.flushTimer = this.timers.setTimeout(() => this.flush(), delay);
  }

  private flush(): void {
    this.flushTimer = undefined;
    this.firstPendingAt = undefined;
    if (this.stopped) return;
    if (this.rechecking) {
      this.again = true;
      return;
    }
    this.rechecking = true;
    this.counters.rechecks += 1;
    void this.o
      .recheck()
      .catch((err: unknown) => this.o.log.warn(`live changes of ${this.o.label}: re-checking its folders failed: ${err instanceof Error ? err.message : String(err)}`))
      .finally(() => {
        this.rechecking = false;
        if (this.again) {
          this.again = false;
          this.flush();
        }
      });
  }
}

/** An RFC 3339 time (any number of fractional digits, as Go and the kubelet write them) in ns since the epoch. */
export function timeNs(text: string): bigint | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(text);
  if (!m) return undefined;
  const seconds = Date.parse(`${m[1]}${m[3]}`);
  if (!Number.isFinite(seconds)) return undefined;
  return BigInt(seconds) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

function wholeSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, 'Z');
}
