// A few worker threads running one small plain-JavaScript program (pack hashes sources on them, hydrate fsyncs
// files on them). The program is `eval`ed, so it works the same from sources (tsx) and from the esbuild bundle, runs
// as a job on a warm codec thread (codecThreads.ts: `parentPort` and `workerData` are in its scope), and
// gets a `stopped()` function that turns true when the pool closes; it must check it between steps and must not
// keep file descriptors open across messages. Protocol: every message posted to a worker gets exactly one reply
// carrying `results`; any number of other replies (progress) may come before it.
// Closing is graceful: raise the stop flag, wait for the replies still owed (workers stop at their next check, so
// this is quick and no descriptor is left open), then terminate — or, after a finishing close in which no worker
// failed (every program is between messages with its files closed), give the threads back to the warm codec threads.
// A worker that dies is reported through `onError`.
import { type CodecThread, startCodecWorker } from './codecThreads';

export { startCodecWorker } from './codecThreads';

export interface ThreadPoolHandlers {
  /** A reply from worker `slot`; `final` when it is the one reply to a posted message. */
  onReply(slot: number, reply: unknown, final: boolean): void;
  onError(error: unknown): void;
}

const PRELUDE = `
'use strict';
const stopFlag = new Int32Array(workerData.stop);
const stopped = () => Atomics.load(stopFlag, 0) !== 0;
`;

export class ThreadPool {
  private readonly workers: CodecThread[] = [];
  private readonly owed: number[] = [];
  private readonly alive: boolean[] = [];
  private readonly stop = new Int32Array(new SharedArrayBuffer(4));
  private closing: Promise<void> | undefined;
  /** Replies are no longer delivered (a stopping close); a finishing close still delivers them. */
  private muted = false;
  private settled: (() => void) | undefined;
  /** A worker failed or died: its thread is not reused. */
  private failed = false;

  constructor(source: string, size: number, private readonly handlers: ThreadPoolHandlers, data: Record<string, unknown> = {}) {
    for (let slot = 0; slot < size; slot++) {
      const worker = startCodecWorker(PRELUDE + source, { ...data, stop: this.stop.buffer }, { youngMb: 2, oldMb: 16 });
      this.workers.push(worker);
      this.owed.push(0);
      this.alive.push(true);
      worker.on('message', (reply: unknown) => {
        const final = typeof reply === 'object' && reply !== null && 'results' in reply;
        if (final) this.owed[slot] = (this.owed[slot] ?? 1) - 1;
        if (!this.muted) this.handlers.onReply(slot, reply, final);
        this.check();
      });
      worker.on('error', (err) => {
        this.failed = true;
        if (!this.muted) this.handlers.onError(err);
      });
      worker.on('exit', () => {
        this.failed = true;
        this.alive[slot] = false;
        if (!this.muted) this.handlers.onError(new Error('a worker thread exited unexpectedly'));
        this.check();
      });
    }
  }

  get size(): number {
    return this.workers.length;
  }

  /** Messages posted to `slot` not answered yet. */
  owedBy(slot: number): number {
    return this.owed[slot] ?? 0;
  }

  post(slot: number, message: unknown): void {
    if (this.closing !== undefined || this.alive[slot] !== true) return;
    this.owed[slot] = (this.owed[slot] ?? 0) + 1;
    this.workers[slot]?.postMessage(message);
  }

  /**
   * Close the pool (idempotent); resolves once all threads are gone. By default the workers are told to stop and no
   * more replies are delivered; with `finish`, every message already posted is completed and answered first.
   */
  close(options: { finish?: boolean } = {}): Promise<void> {
    if (options.finish !== true) {
      this.muted = true;
      Atomics.store(this.stop, 0, 1);
    }
    this.closing ??= (async () => {
      await new Promise<void>((resolve) => {
        this.settled = resolve;
        this.check();
      });
      this.muted = true;
      if (options.finish === true && !this.failed) this.workers.forEach((w) => w.release());
      else await Promise.all(this.workers.map((w) => w.terminate().catch(() => undefined)));
    })();
    return this.closing;
  }

  private check(): void {
    if (this.settled === undefined) return;
    if (this.workers.every((_, slot) => this.alive[slot] !== true || (this.owed[slot] ?? 0) <= 0)) {
      const settled = this.settled;
      this.settled = undefined;
      settled();
    }
  }
}
