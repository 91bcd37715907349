// One running search: its bounds (results, bytes read, time), its counters, and where its results
// go — batched to the caller as they are found (the first batch as soon as the code that found it
// yields, then one batch per turn of the event loop, so a busy walk does not send one message per
// line), or kept for the response when nobody streams. A bound ends the search normally with
// `stopped`; the caller's cancel ends it with an abort.
import type { SearchLine, SearchPartial, SearchQuery, SearchResult, SearchStrategy } from '../../protocol/search';

export type PartialSink = (partial: SearchPartial) => void;

export class SearchRun {
  readonly started = Date.now();
  /** Aborted when the caller cancels, or a bound is reached; walkers and commands stop on it. */
  readonly signal: AbortSignal;
  stopped: SearchResult['stopped'];
  readonly stats = { filesMatched: 0, matches: 0, filesSearched: 0, bytesSearched: 0, skippedBinary: 0, skippedLarge: 0 };
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private pendingFiles: string[] = [];
  private pendingLines: SearchLine[] = [];
  private keptFiles: string[] = [];
  private keptLines: SearchLine[] = [];
  private flushScheduled = false;
  /** Whether a batch has been handed on (or kept); until then a result leaves without waiting for the event loop's turn. */
  private flushedOnce = false;
  private results = 0;
  private readonly onCallerAbort = (): void => this.controller.abort(this.callerSignal?.reason);

  constructor(
    readonly query: SearchQuery,
    private readonly sink: PartialSink | undefined,
    private readonly callerSignal: AbortSignal | undefined,
  ) {
    this.signal = this.controller.signal;
    this.timer = setTimeout(() => this.stop('time'), query.timeoutMs);
    this.timer.unref();
    if (callerSignal?.aborted) this.controller.abort(callerSignal.reason);
    callerSignal?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  /** Whether the caller cancelled (as opposed to a bound ending the search). */
  get cancelled(): boolean {
    return this.callerSignal?.aborted === true;
  }

  get remaining(): number {
    return Math.max(0, this.query.maxResults - this.results);
  }

  stop(reason: NonNullable<SearchResult['stopped']>): void {
    if (this.signal.aborted) return;
    this.stopped = reason;
    this.controller.abort(new Error(`search stopped: ${reason}`));
  }

  /** Counts bytes about to be read; false (and stopped) when that would pass the byte budget. */
  takeBytes(n: number): boolean {
    const max = this.query.kind === 'text' ? this.query.maxTotalBytes : Number.MAX_SAFE_INTEGER;
    if (this.stats.bytesSearched + n > max) {
      this.stop('bytes');
      return false;
    }
    this.stats.bytesSearched += n;
    return true;
  }

  /** A file name found; one past `maxResults` stops the search with `stopped: "results"` (and is not reported). */
  addFile(relPath: string): void {
    if (this.signal.aborted) return;
    if (this.results >= this.query.maxResults) {
      this.stop('results');
      return;
    }
    this.results++;
    this.stats.filesMatched++;
    this.pendingFiles.push(relPath);
    this.schedule();
  }

  /**
   * One file's lines (`matchLines` of them are matches), already cut to `remaining`; `more`: the file
   * had a further match line, so the result limit is passed and the search stops. Reaching exactly
   * `maxResults` does not stop it (as in VS Code, `limitHit` means results were left out): the next
   * result found does.
   */
  addLines(lines: SearchLine[], matchLines: number, more = false): void {
    if (this.signal.aborted) return;
    if (lines.length > 0) {
      this.results += matchLines;
      this.stats.matches += matchLines;
      this.stats.filesMatched++;
      for (const line of lines) this.pendingLines.push(line);
      this.schedule();
    }
    if (more) this.stop('results');
  }

  private schedule(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // The first result does not wait behind pending I/O callbacks (a listing's chunks, other reads).
    if (this.flushedOnce) setImmediate(() => this.flush());
    else queueMicrotask(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.pendingFiles.length === 0 && this.pendingLines.length === 0) return;
    this.flushedOnce = true;
    const files = this.pendingFiles;
    const lines = this.pendingLines;
    this.pendingFiles = [];
    this.pendingLines = [];
    if (this.sink === undefined || this.cancelled) {
      this.keptFiles.push(...files);
      for (const l of lines) this.keptLines.push(l);
      return;
    }
    this.sink(files.length > 0 && lines.length > 0 ? { files, lines } : files.length > 0 ? { files } : { lines });
  }

  finish(strategy: SearchStrategy): SearchResult {
    clearTimeout(this.timer);
    this.callerSignal?.removeEventListener('abort', this.onCallerAbort);
    this.flush();
    return {
      strategy,
      files: this.keptFiles,
      lines: this.keptLines,
      ...(this.stopped !== undefined ? { stopped: this.stopped } : {}),
      limitHit: this.stopped !== undefined,
      stats: { ...this.stats, durationMs: Date.now() - this.started },
    };
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.callerSignal?.removeEventListener('abort', this.onCallerAbort);
  }
}
