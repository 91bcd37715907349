// One operation queued on the era-D Session connection: its `send` frame (checked against the idempotency-key
// rules and the gateway's frame cap before anything queues), the caller's signal, and the channel its events
// arrive on. Apart from SessionConnection so that what a call is reads apart from how the queue runs it.
import type { SessionOperation, StreamEvent } from './gateway';
import { GatewayUsageError } from './gatewayErrors';
import { EventChannel } from './eventChannel';
import { type ClientFrame, idempotencyKeyProblem, newIdempotencyKey } from './sessionFrames';

export interface OperateOptions {
  signal?: AbortSignal | undefined;
  /** Sent as the operation's `idempotencyKey`; one is generated when absent. */
  idempotencyKey?: string | undefined;
}

export type JobState = 'queued' | 'sent' | 'accepted';

export interface Job {
  key: string;
  frame: string;
  signal: AbortSignal | undefined;
  events: EventChannel<StreamEvent>;
  state: JobState;
  /** The caller aborted (or cancelled it by id, or stopped reading): end with an AbortError. */
  abortRequested: boolean;
  cancelSent: boolean;
  detachAbort: () => void;
}

/**
 * A new queued job for `operation`, or a GatewayUsageError (bad key, frame over `maxClientFrameBytes`) or the
 * signal's abort reason before anything is queued. `onAbort` runs once if the signal aborts later.
 */
export function createJob(operation: SessionOperation, options: OperateOptions, maxClientFrameBytes: number, onAbort: (job: Job) => void): Job {
  const key = options.idempotencyKey ?? newIdempotencyKey();
  const problem = idempotencyKeyProblem(key);
  if (problem) throw new GatewayUsageError(`${problem}: ${JSON.stringify(key)}`);
  const frame: ClientFrame = { type: 'send', idempotencyKey: key, operation };
  const text = JSON.stringify(frame);
  const size = Buffer.byteLength(text);
  if (size > maxClientFrameBytes) {
    throw new GatewayUsageError(`the operation is ${size} bytes as a Session frame, more than the gateway's ${maxClientFrameBytes}; send it in parts`);
  }
  const signal = options.signal;
  signal?.throwIfAborted();
  const job: Job = { key, frame: text, signal, events: new EventChannel(), state: 'queued', abortRequested: false, cancelSent: false, detachAbort: () => undefined };
  if (signal) {
    const listener = (): void => onAbort(job);
    signal.addEventListener('abort', listener, { once: true });
    job.detachAbort = () => signal.removeEventListener('abort', listener);
  }
  return job;
}

/** The signal's own reason (an AbortError, or a TimeoutError from AbortSignal.timeout), else an AbortError. */
export function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.aborted ? signal.reason : undefined;
  if (reason instanceof Error) return reason;
  return new DOMException('The operation was aborted', 'AbortError');
}
