// Warm worker threads for the codec. Starting a thread costs ~40 ms of CPU and, on a busy two-core machine, 50–400 ms
// before it runs; an activation's hydrate and pack start five (reader, three file writers, compressor) every turn. A
// thread whose job came to its end goes back here, idle and unref'd (it never keeps the process alive), for the
// next codec job of this process, and ends after `bundleTuning.idleThreadMs` unused.
// A job is one plain-JavaScript program (see threadPool.ts) run in a fresh function scope with its own `parentPort`
// (a MessagePort of this job only) and `workerData`; the programs are strict and set no globals, so nothing of one
// job is visible to the next. A thread is reused only when its host saw the job end by its protocol (its last reply
// is its last step: nothing of it runs any more and it holds no descriptor). A job abandoned midway (a failure, a
// cancellation, a quota) ends its thread, as before: terminating is the only way to stop a program inside a
// synchronous loop before its host closes the descriptors the program uses.
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { bundleTuning } from './tuning';

const BOOT = `
'use strict';
const { parentPort: control } = require('node:worker_threads');
control.on('message', ({ port, source, data }) => {
  port.once('close', () => port.removeAllListeners());
  new Function('parentPort', 'workerData', 'require', source)(port, data, require);
});
`;

/** Idle threads kept per heap size (the most any one codec operation runs at once of a kind). */
const MAX_IDLE_PER_HEAP = 4;

export interface CodecHeap {
  youngMb: number;
  oldMb: number;
}

interface Idle {
  worker: Worker;
  timer: NodeJS.Timeout;
}

const idle = new Map<string, Idle[]>();
const exited = new WeakSet<Worker>();
const stats = { started: 0, leased: 0 };

/** A job on a codec thread: the Worker calls its hosts use, plus `release` for a job that has ended. */
export interface CodecThread {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (message: never) => void): void;
  on(event: 'error', listener: (error: Error) => void): void;
  on(event: 'exit', listener: (code: number) => void): void;
  /** The job ended by its protocol (its last reply came): the thread goes back to the pool. Idempotent. */
  release(): void;
  /** Abandon the job: the thread ends (a no-op once released). Resolves once it has stopped running. */
  terminate(): Promise<void>;
}

/** Threads started so far, leased now and idle now (tests and benchmarks). */
export function codecThreadStats(): { started: number; leased: number; idle: number } {
  let parked = 0;
  for (const list of idle.values()) parked += list.length;
  return { started: stats.started, leased: stats.leased, idle: parked };
}

/** Ends every idle thread now; resolves once they have stopped. */
export async function endIdleCodecThreads(): Promise<void> {
  const ending: Promise<number>[] = [];
  for (const list of idle.values()) {
    for (const entry of list.splice(0)) {
      clearTimeout(entry.timer);
      ending.push(entry.worker.terminate());
    }
  }
  await Promise.all(ending);
}

function unpark(worker: Worker): void {
  for (const list of idle.values()) {
    const at = list.findIndex((e) => e.worker === worker);
    if (at !== -1) {
      clearTimeout(list[at]?.timer);
      list.splice(at, 1);
    }
  }
}

function startThread(heap: CodecHeap): Worker {
  const worker = new Worker(BOOT, {
    eval: true,
    execArgv: [],
    stdout: false,
    stderr: false,
    trackUnmanagedFds: false,
    resourceLimits: { maxYoungGenerationSizeMb: heap.youngMb, maxOldGenerationSizeMb: heap.oldMb },
  });
  stats.started += 1;
  // Errors of a job reach its host through the lease; an idle thread that dies just leaves the pool.
  worker.on('error', () => undefined);
  worker.on('exit', () => {
    exited.add(worker);
    unpark(worker);
  });
  return worker;
}

function park(key: string, worker: Worker): void {
  const list = idle.get(key) ?? [];
  idle.set(key, list);
  if (exited.has(worker)) return;
  if (list.length >= MAX_IDLE_PER_HEAP || bundleTuning.idleThreadMs <= 0) {
    void worker.terminate();
    return;
  }
  worker.unref();
  const entry: Idle = { worker, timer: setTimeout(() => void (unpark(worker), worker.terminate()), bundleTuning.idleThreadMs) };
  entry.timer.unref();
  list.push(entry);
}

class Lease implements CodecThread {
  private ended = false;
  private terminating = false;
  private readonly onError = (error: Error): void => this.errorListeners.forEach((l) => l(error));
  private readonly onExit = (code: number): void => this.exitListeners.forEach((l) => l(code));
  private readonly errorListeners: ((error: Error) => void)[] = [];
  private readonly exitListeners: ((code: number) => void)[] = [];

  constructor(
    private readonly worker: Worker,
    private readonly key: string,
    private readonly port: MessagePort,
  ) {
    worker.on('error', this.onError);
    worker.on('exit', this.onExit);
  }

  postMessage(message: unknown): void {
    if (!this.ended) this.port.postMessage(message);
  }

  on(event: 'message' | 'error' | 'exit', listener: (value: never) => void): void {
    if (event === 'message') this.port.on('message', listener as (message: unknown) => void);
    else if (event === 'error') this.errorListeners.push(listener as (error: Error) => void);
    else this.exitListeners.push(listener as (code: number) => void);
  }

  release(): void {
    if (this.ended) return;
    this.end();
    this.worker.off('error', this.onError);
    this.worker.off('exit', this.onExit);
    park(this.key, this.worker);
  }

  async terminate(): Promise<void> {
    if (this.ended && !this.terminating) return;
    if (!this.ended) this.end();
    this.terminating = true;
    await this.worker.terminate();
  }

  private end(): void {
    this.ended = true;
    stats.leased -= 1;
    this.port.removeAllListeners();
    this.port.close();
  }
}

/**
 * Runs `source` (plain JavaScript, strict, setting no globals) as a job on a warm thread of this heap size, or on a
 * new one; `parentPort` and `workerData` are in its scope. The host must `release` it once the job's last reply came,
 * or `terminate` it.
 */
export function startCodecWorker(source: string, workerData: Record<string, unknown>, heap: CodecHeap): CodecThread {
  const key = `${heap.youngMb}/${heap.oldMb}`;
  const warm = idle.get(key)?.pop();
  let worker: Worker;
  if (warm !== undefined) {
    clearTimeout(warm.timer);
    worker = warm.worker;
    worker.ref();
  } else {
    worker = startThread(heap);
  }
  const { port1, port2 } = new MessageChannel();
  worker.postMessage({ port: port2, source, data: workerData }, [port2]);
  stats.leased += 1;
  return new Lease(worker, key, port1);
}
