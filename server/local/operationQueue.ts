// The per-sandbox mutation queue: FIFO, one operation at a time, bounded (kruntimes
// `queueSize`, at most 32, counting the running one). A full queue is refused at once
// (429 `session operation queue is full`), never waited on. Reads do not use it.
import { GatewayMessages } from '../../protocol/kruntimes/gateway';
import { SessionError } from './sessionError';

interface Entry {
  start: () => void;
}

export class OperationQueue {
  private readonly waiting: Entry[] = [];
  private running = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(readonly capacity: number) {}

  /** Operations admitted and not finished (running + waiting). */
  get size(): number {
    return this.running + this.waiting.length;
  }

  /**
   * Admits `task` or throws ResourceExhausted when full. `onAdmitted` runs synchronously once
   * the operation holds a place. Aborting `signal` while waiting removes it from the queue.
   */
  run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.size >= this.capacity) throw new SessionError('ResourceExhausted', GatewayMessages.queueFull);
    return new Promise<T>((resolve, reject) => {
      const entry: Entry = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          this.running++;
          task()
            .then(resolve, reject)
            .finally(() => {
              this.running--;
              this.next();
            });
        },
      };
      const onAbort = (): void => {
        const i = this.waiting.indexOf(entry);
        if (i >= 0) {
          this.waiting.splice(i, 1);
          reject(signal?.reason);
          this.next();
        }
      };
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
      this.next();
    });
  }

  private next(): void {
    if (this.running === 0) {
      const entry = this.waiting.shift();
      if (entry) {
        entry.start();
        return;
      }
    }
    if (this.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves once every admitted operation has finished. */
  whenIdle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
