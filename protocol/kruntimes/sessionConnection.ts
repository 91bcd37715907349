// The era-D Session connection (spec §10.4–§10.7): one `operations:ws` socket to a sandbox that
// carries every command and file mutation of this process, one at a time, plus the lease
// heartbeats. Calls queue here, FIFO; a queued call whose signal aborts leaves the queue
// without a byte sent; aborting the active one sends `cancel` and ends once the gateway's error
// frame (its only acknowledgement) arrives. An error frame ends the operation, not the socket.
// A socket that drops while an operation is in flight leaves its outcome unknown: the call
// fails with `outcomeUnknown` and is never re-sent. The upgrade authenticates with
// `Authorization: Bearer`, sends no `Origin`, and trusts the Run's CA bundle.
import { WebSocket } from 'ws';
import { type SessionOperation, type StreamEvent, GatewayLimits } from './gateway';
import { GatewayError, GatewayProtocolError, GatewayTransportError, GatewayUsageError } from './gatewayErrors';
import { abortError, createJob, type Job, type OperateOptions } from './sessionJob';
import { dropLostHolders, heartbeatIntervalMs, isLaggingRefusal, type HeartbeatHold, type LeaseHeartbeatOptions, type LeaseHolder } from './sessionLease';
import { dialOptions, dialSessionSocket, upgradeRefusal, type DialOptions, type SessionConnectionOptions } from './sessionSocketDial';
import { type ClientFrame, type ServerFrame, SessionCloseCode, SessionFrameMessages, statusForErrorFrame } from './sessionFrames';

export type { OperateOptions } from './sessionJob';
export type { SessionConnectionOptions } from './sessionSocketDial';
export { heartbeatIntervalMs, type HeartbeatHold, type LeaseHeartbeatOptions } from './sessionLease';

export class SessionConnection {
  readonly url: string;
  private readonly dial: DialOptions;
  private readonly maxClientFrameBytes: number;
  private readonly maxUpgradeRetries: number;

  private socket: WebSocket | undefined;
  private connecting = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private upgrade429s = 0;
  private reconnectBackoffMs = 100;
  private refusedSince: number | undefined;
  private readonly queue: Job[] = [];
  private active: Job | undefined;
  /** A cancel was sent for an operation that then ended some other way: one `no active…` error may follow. */
  private strayCancelError = false;
  private readonly holders = new Set<LeaseHolder>();
  /** Heartbeats (while a lease is held) and keep-alive pings (while the socket is open). */
  private ticker: NodeJS.Timeout | undefined;
  private tickEveryMs = 0;
  private readonly keepAliveMs: number;
  private lastPong = 0;
  private closed = false;
  private closeOnIdle = false;
  /** Upgrades attempted (a diagnostic for tests and logs). */
  upgrades = 0;

  constructor(opts: SessionConnectionOptions) {
    this.dial = dialOptions(opts);
    this.url = this.dial.url;
    this.maxClientFrameBytes = opts.maxClientFrameBytes ?? GatewayLimits.maxRequestBodyBytes;
    this.maxUpgradeRetries = opts.maxUpgradeRetries ?? 5;
    this.keepAliveMs = opts.keepAliveMs ?? 15_000;
  }

  /** The idempotency key (= operation ID) of the operation on the wire now, if any. */
  get activeOperationId(): string | undefined {
    return this.active?.key;
  }

  /** Operations waiting for the socket (diagnostic). */
  get queued(): number {
    return this.queue.length;
  }

  /**
   * Sends one operation (after those queued before it) and yields its events, `accepted` first,
   * until `completed` or `failed`. An error frame rejects with a GatewayError; aborting rejects
   * with an AbortError; a dropped socket rejects with an outcome-unknown GatewayTransportError.
   */
  async *operate(operation: SessionOperation, options: OperateOptions = {}): AsyncGenerator<StreamEvent> {
    const job = this.enqueue(operation, options);
    let finished = false;
    try {
      for await (const event of job.events) {
        if (event.type === 'completed' || event.type === 'failed') finished = true;
        yield event;
      }
      finished = true;
    } finally {
      // The reader stopped early (break, return, or its own error): stop the operation too.
      if (!finished) this.abandon(job);
    }
  }

  /**
   * Cancels this process's operation `operationId` if it is queued (it leaves the queue unsent)
   * or active (a `cancel` frame); its call then ends with an AbortError. False if it is neither.
   */
  cancel(operationId: string): boolean {
    const job = this.active?.key === operationId ? this.active : this.queue.find((j) => j.key === operationId);
    if (!job) return false;
    this.abandon(job);
    return true;
  }

  /** Sends `{"type":"heartbeat"}` every lease/3 (0.1–30 s) while held, reconnecting if the socket drops. */
  holdLease(leaseTimeoutSeconds: number, opts: LeaseHeartbeatOptions = {}): HeartbeatHold {
    if (!Number.isFinite(leaseTimeoutSeconds) || leaseTimeoutSeconds <= 0) {
      throw new GatewayUsageError(`leaseTimeoutSeconds must be a positive number, not ${leaseTimeoutSeconds}`);
    }
    if (this.closed) throw new GatewayUsageError('the Session connection is closed');
    const holder: LeaseHolder = { intervalMs: heartbeatIntervalMs(leaseTimeoutSeconds), opts };
    this.holders.add(holder);
    this.syncTicker();
    this.pump();
    return {
      release: () => {
        if (!this.holders.delete(holder)) return;
        this.syncTicker();
        this.closeIfIdle();
      },
    };
  }

  /**
   * Closes the socket. Queued calls fail unsent; an active one fails with outcome unknown (the
   * gateway may finish or cancel it). Heartbeats stop.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.holders.clear();
    this.syncTicker();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    for (const job of this.queue.splice(0)) this.finish(job, new GatewayTransportError('the Session connection was closed before the operation was sent', false));
    const socket = this.socket;
    this.socket = undefined;
    if (this.active) this.dropped(this.active, 'the Session connection was closed while the operation ran');
    socket?.terminate();
  }

  /** True when nothing is queued, running or held (the owner may close it without losing work). */
  get idle(): boolean {
    return this.active === undefined && this.queue.length === 0 && this.holders.size === 0;
  }

  /** Closes now if idle, else as soon as the queued and running operations and leases have ended. */
  closeWhenIdle(): void {
    this.closeOnIdle = true;
    this.closeIfIdle();
  }

  private closeIfIdle(): void {
    if (this.closeOnIdle && this.idle) this.close();
  }

  // ---- queue -------------------------------------------------------------------------------

  private enqueue(operation: SessionOperation, options: OperateOptions): Job {
    if (this.closed) throw new GatewayUsageError('the Session connection is closed');
    const job = createJob(operation, options, this.maxClientFrameBytes, (j) => this.abandon(j));
    this.queue.push(job);
    this.pump();
    return job;
  }

  /** The caller gave up on `job`: unqueue it unsent, or cancel it on the wire. */
  private abandon(job: Job): void {
    if (job.events.closed) return;
    job.abortRequested = true;
    const at = this.queue.indexOf(job);
    if (at !== -1) {
      this.queue.splice(at, 1);
      this.finish(job, abortError(job.signal));
      return;
    }
    if (job === this.active && job.state === 'accepted') this.sendCancel(job);
    // Sent but not yet accepted: the cancel follows `accepted` (an operation refused before
    // admission ends with an error frame and needs none).
  }

  private sendCancel(job: Job): void {
    if (job.cancelSent) return;
    job.cancelSent = true;
    this.write({ type: 'cancel', operationID: job.key });
  }

  private finish(job: Job, error?: unknown): void {
    job.detachAbort();
    if (error === undefined) job.events.end();
    else job.events.fail(error);
    if (this.active === job) {
      this.active = undefined;
      if (job.cancelSent) this.strayCancelError = true;
    }
    this.closeIfIdle();
  }

  /** Starts the next queued operation, connecting first if needed. */
  private pump(): void {
    if (this.closed) return;
    const needSocket = this.queue.length > 0 || this.active !== undefined || this.holders.size > 0;
    if (!needSocket) return;
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      if (!this.connecting && !this.retryTimer) this.connect();
      return;
    }
    if (this.active) return;
    const job = this.queue.shift();
    if (!job) return;
    this.active = job;
    job.state = 'sent';
    socket.send(job.frame, (err) => {
      // A write that fails leaves the frame possibly sent: the close handler reports it.
      if (err) socket.terminate();
    });
  }

  private write(frame: ClientFrame): void {
    const socket = this.socket;
    if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
  }

  // ---- the socket ----------------------------------------------------------------------------

  private connect(): void {
    this.connecting = true;
    this.upgrades++;
    dialSessionSocket(this.dial, {
      open: (ws) => this.opened(ws),
      refused: (status, body) => this.refused(status, body),
      unreachable: (err) => this.unreachable(err),
      frame: (ws, frame) => {
        if (this.socket === ws) this.onFrame(frame);
      },
      invalidFrame: (ws, message) => {
        if (this.socket === ws) this.protocolError(ws, message);
      },
      pong: () => (this.lastPong = Date.now()),
      closed: (ws, code, reason, lastError) => {
        if (this.socket !== ws) return;
        this.socket = undefined;
        this.syncTicker();
        this.onDropped(code, reason, lastError);
      },
    });
  }

  private opened(ws: WebSocket): void {
    this.connecting = false;
    this.socket = ws;
    this.upgrade429s = 0;
    this.reconnectBackoffMs = 100;
    this.refusedSince = undefined;
    this.lastPong = Date.now();
    if (this.closed) {
      ws.terminate();
      return;
    }
    this.syncTicker();
    this.pump();
  }

  /** The upgrade was answered with an HTTP error. */
  private refused(status: number, body: string): void {
    this.connecting = false;
    const error = upgradeRefusal(status, body);
    if (status === 429 && this.upgrade429s < this.maxUpgradeRetries && !this.closed) {
      // Bounded exponential backoff with full jitter, so many clients do not retry in step.
      const cap = Math.min(100 * 2 ** this.upgrade429s, 2_000);
      this.upgrade429s++;
      this.retryLater(cap / 2 + Math.random() * (cap / 2));
      return;
    }
    this.upgrade429s = 0;
    this.failQueued(error);
    this.refusedForHolders(error);
  }

  /** The gateway could not be reached (nothing was sent). */
  private unreachable(err: Error): void {
    this.connecting = false;
    this.failQueued(new GatewayTransportError(`cannot open the Session connection ${this.url}: ${err.message}`, false, { cause: err }));
    if (this.holders.size > 0) this.reconnectForHolders();
  }

  private failQueued(error: Error): void {
    for (const job of this.queue.splice(0)) this.finish(job, error);
  }

  private refusedForHolders(error: GatewayError): void {
    if (this.holders.size === 0) return;
    const now = Date.now();
    dropLostHolders(this.holders, error, this.refusedSince, now);
    if (isLaggingRefusal(error)) this.refusedSince ??= now;
    this.syncTicker();
    if (this.holders.size > 0) this.reconnectForHolders();
  }

  /** Heartbeat holders reconnect with backoff: quickly at first, never slower than min(interval, 5 s). */
  private reconnectForHolders(): void {
    const delay = this.reconnectBackoffMs;
    const cap = Math.max(100, Math.min(this.holders.size > 0 ? this.tickEveryMs : 5_000, 5_000));
    this.reconnectBackoffMs = Math.min(this.reconnectBackoffMs * 2, cap);
    this.retryLater(delay);
  }

  private retryLater(ms: number): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.pump();
    }, ms);
  }

  /** The open socket closed or broke. */
  private onDropped(code: number, reason: string, err: Error | undefined): void {
    const job = this.active;
    if (job) {
      const refusedBeforeAdmission =
        job.state === 'sent' && (code === SessionCloseCode.policyViolation || code === SessionCloseCode.messageTooBig);
      if (job.abortRequested) this.finish(job, abortError(job.signal));
      else if (refusedBeforeAdmission) {
        // 1008/1009 on a `send` come from decoding it, before the Runtime is asked: not run.
        this.finish(job, new GatewayError(code === SessionCloseCode.messageTooBig ? 413 : 400, reason || `the gateway closed the Session connection with ${code}`));
      } else {
        this.dropped(job, `the Session connection dropped (${code}${reason ? ` ${reason}` : ''}${err ? `: ${err.message}` : ''}) while the operation ran`);
      }
    }
    this.strayCancelError = false;
    if (this.holders.size > 0 && this.queue.length === 0) this.reconnectForHolders();
    else this.pump();
  }

  private dropped(job: Job, why: string): void {
    this.finish(job, new GatewayTransportError(`${why}; the outcome is unknown and it was not retried`, true));
  }

  private onFrame(frame: ServerFrame): void {
    const job = this.active;
    if (frame.type === 'error') {
      if (this.strayCancelError && frame.error === SessionFrameMessages.noActiveOperation && (!job || job.state === 'sent')) {
        // The answer to a cancel that crossed its operation's end: not about the current one.
        this.strayCancelError = false;
        return;
      }
      if (!job) return; // e.g. a failed lease renewal while idle; the socket drop that follows is handled
      this.finish(job, job.abortRequested ? abortError(job.signal) : new GatewayError(statusForErrorFrame(frame.error), frame.error));
      return this.pump();
    }
    if (!job) return; // events of an operation this connection no longer waits for
    if (frame.type === 'accepted') {
      job.state = 'accepted';
      this.strayCancelError = false;
      if (job.abortRequested) this.sendCancel(job);
    }
    if (!job.abortRequested) job.events.push(frame);
    if (frame.type === 'completed' || frame.type === 'failed') {
      this.finish(job, job.abortRequested ? abortError(job.signal) : undefined);
      this.pump();
    }
  }

  private protocolError(ws: WebSocket, message: string): void {
    const job = this.active;
    if (job) this.finish(job, new GatewayProtocolError(`${message}; the operation's outcome is unknown`));
    if (this.socket === ws) this.socket = undefined;
    ws.terminate();
    this.syncTicker();
    this.pump();
  }

  // ---- heartbeats ----------------------------------------------------------------------------

  /** (Re)starts the ticker for the current needs: heartbeat period while held, keep-alive while open, none otherwise. */
  private syncTicker(): void {
    const open = this.socket?.readyState === WebSocket.OPEN;
    const every = this.closed
      ? 0
      : this.holders.size > 0
        ? Math.min(...[...this.holders].map((h) => h.intervalMs))
        : open
          ? this.keepAliveMs
          : 0;
    if (every === this.tickEveryMs) return;
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
    this.tickEveryMs = every;
    if (every === 0) return;
    const silenceLimit = Math.max(3 * every, 5_000);
    this.ticker = setInterval(() => {
      const socket = this.socket;
      if (!socket || socket.readyState !== WebSocket.OPEN) return this.pump();
      if (Date.now() - this.lastPong > silenceLimit) {
        socket.terminate();
        return;
      }
      if (this.holders.size > 0) this.write({ type: 'heartbeat' });
      socket.ping();
    }, every);
    this.ticker.unref();
  }
}
