// The node:http implementation of HttpTransport (httpTransport.ts), for a plain-http loopback gateway: a
// keep-alive Agent, and the bounds undici's `request` gave — a connect timeout, a headers timeout, a body
// timeout that counts only the wait for the next chunk, and an abort signal that rejects with its reason —
// with undici's error codes, so the callers' error handling and the error table see what they saw before.
import http from 'node:http';
import type { HttpRequest, HttpResponse, HttpTransport, HttpTransportOptions } from './httpTransport';

/** A bound ran out; `code` is undici's for the same bound (the causes callers and the error table know). */
export class HttpTimeoutError extends Error {
  constructor(
    override readonly name: 'ConnectTimeoutError' | 'HeadersTimeoutError' | 'BodyTimeoutError',
    readonly code: 'UND_ERR_CONNECT_TIMEOUT' | 'UND_ERR_HEADERS_TIMEOUT' | 'UND_ERR_BODY_TIMEOUT',
    message: string,
  ) {
    super(message);
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

export class NodeHttpTransport implements HttpTransport {
  private readonly agent: http.Agent;
  private readonly connectTimeoutMs: number;

  constructor(options: HttpTransportOptions = {}) {
    this.agent = new http.Agent({
      keepAlive: true,
      scheduling: 'lifo',
      // The Agent applies `timeout` to idle sockets only (it destroys a free socket that times out).
      timeout: options.keepAliveMs ?? 10_000,
      ...(options.maxConnections !== undefined ? { maxSockets: options.maxConnections } : {}),
    });
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  request(url: string, req: HttpRequest): Promise<HttpResponse> {
    const { signal } = req;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<HttpResponse>((resolve, reject) => {
      const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
      const headers: Record<string, string> = { ...req.headers };
      if (body !== undefined) headers['content-length'] = String(body.length);
      const timers = new Set<NodeJS.Timeout>();
      const after = (ms: number, fire: () => void): NodeJS.Timeout => {
        const t = setTimeout(() => {
          timers.delete(t);
          fire();
        }, ms);
        timers.add(t);
        return t;
      };
      const clear = (t: NodeJS.Timeout | undefined): void => {
        if (t === undefined) return;
        clearTimeout(t);
        timers.delete(t);
      };
      let response: http.IncomingMessage | undefined;
      const fail = (err: unknown): void => {
        // Before the headers: the request rejects; after: reading the body does.
        if (response) response.destroy(err as Error);
        else outgoing.destroy(err as Error);
      };
      const onAbort = (): void => fail(abortReason(signal!));
      const done = (): void => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        signal?.removeEventListener('abort', onAbort);
      };

      const outgoing = http.request(url, { method: req.method, headers, agent: this.agent });
      signal?.addEventListener('abort', onAbort, { once: true });
      const headersTimer = after(req.headersTimeoutMs, () => fail(new HttpTimeoutError('HeadersTimeoutError', 'UND_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error')));
      outgoing.on('socket', (socket) => {
        if (!socket.connecting) return; // a kept-alive connection
        const connectTimer = after(this.connectTimeoutMs, () => fail(new HttpTimeoutError('ConnectTimeoutError', 'UND_ERR_CONNECT_TIMEOUT', `Connect Timeout Error (attempted address: ${new URL(url).host}, timeout: ${this.connectTimeoutMs}ms)`)));
        socket.once('connect', () => clear(connectTimer));
      });
      outgoing.on('error', (err) => {
        done();
        reject(err);
      });
      outgoing.on('response', (res) => {
        response = res;
        clear(headersTimer);
        res.on('close', done);
        resolve({
          statusCode: res.statusCode ?? 0,
          body: bodyOf(res, req.bodyTimeoutMs, after, clear),
          destroy: () => {
            if (!res.destroyed) res.destroy();
          },
          get destroyed() {
            return res.destroyed;
          },
        });
      });
      outgoing.end(body);
    });
  }
}

/** The body's chunks; each wait for the next one is bounded by `timeoutMs` (0: unbounded), the time the caller spends on a chunk is not. */
async function* bodyOf(
  res: http.IncomingMessage,
  timeoutMs: number,
  after: (ms: number, fire: () => void) => NodeJS.Timeout,
  clear: (t: NodeJS.Timeout | undefined) => void,
): AsyncGenerator<Buffer> {
  const chunks = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  try {
    for (;;) {
      const timer = timeoutMs > 0 ? after(timeoutMs, () => res.destroy(new HttpTimeoutError('BodyTimeoutError', 'UND_ERR_BODY_TIMEOUT', 'Body Timeout Error'))) : undefined;
      let next: IteratorResult<Buffer>;
      try {
        next = await chunks.next();
      } finally {
        clear(timer);
      }
      if (next.done) return;
      yield next.value;
    }
  } finally {
    if (!res.destroyed && !res.complete) res.destroy();
  }
}
