// Drives the codec's threaded fast paths with small fixtures: every threshold of bundleTuning lowered so worker
// threads start for any size (the paths change which threads do the work, never the bytes written or accepted).
import { codecThreadStats } from '../../../server/bundle/codecThreads';
import { bundleTuning } from '../../../server/bundle/tuning';

export const THREADS_EVERYWHERE = {
  hashWorkers: 2,
  parallelHashMinBytes: 0,
  workerWriterMinTarBytes: 0,
  workerReaderMinBytes: 0,
  fileWriters: 2,
  fileWritersNotDurable: 2,
  syncWorkers: 2,
  syncWorkersAfterFiles: 0,
} as const;

export const NO_THREADS = {
  hashWorkers: 0,
  parallelHashMinBytes: Number.MAX_SAFE_INTEGER,
  workerWriterMinTarBytes: Number.MAX_SAFE_INTEGER,
  workerReaderMinBytes: Number.MAX_SAFE_INTEGER,
  syncWorkers: 0,
  syncWorkersAfterFiles: Number.MAX_SAFE_INTEGER,
} as const;

/** Set tuning fields; returns a function restoring the previous values. */
export function tune(values: Partial<typeof bundleTuning>): () => void {
  const saved = { ...bundleTuning };
  Object.assign(bundleTuning, values);
  return () => Object.assign(bundleTuning, saved);
}

/** Mocha hooks running the enclosing suite with `values`. */
export function withTuning(values: Partial<typeof bundleTuning>): void {
  let restore: (() => void) | undefined;
  before(() => (restore = tune(values)));
  after(() => restore?.());
}

/** Threads of this process (Linux): worker threads that were not stopped would show here. */
export function threadCount(): number {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('node:fs') as typeof import('node:fs')).readdirSync('/proc/self/task').length;
}

/**
 * The thread count once it is back to `expected`, or what it is after `ms`: a worker's `exit` event (what pack and
 * hydrate await) comes as its JavaScript stops, and the OS thread is joined a moment later.
 */
export async function threadCountSettled(expected: number, ms = 2000): Promise<number> {
  const deadline = Date.now() + ms;
  while (threadCount() !== expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return threadCount();
}

/** This process's threads and its idle warm codec threads (codecThreads.ts), before an operation. */
export function threadSnapshot(): { threads: number; idle: number } {
  return { threads: threadCount(), idle: codecThreadStats().idle };
}

/**
 * After an operation: no codec thread is still leased, and the process has the threads it had before except the idle
 * codec threads that left (an abandoned job ends its thread) or came back (a finished job returns it): anything more
 * is a thread left running. Polls until the counts agree or `ms` passed.
 */
export async function threadsSettled(before: { threads: number; idle: number }, ms = 2000): Promise<{ leased: number; threads: number; expected: number }> {
  const expected = (): number => before.threads - before.idle + codecThreadStats().idle;
  const deadline = Date.now() + ms;
  // Polls the observable counts (threads end asynchronously; no event says when): the caller asserts what they settled at.
  while ((threadCount() !== expected() || codecThreadStats().leased !== 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return { leased: codecThreadStats().leased, threads: threadCount(), expected: expected() };
}

/** Open descriptors of this process (Linux). */
export function openDescriptors(): number {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('node:fs') as typeof import('node:fs')).readdirSync('/proc/self/fd').length;
}
