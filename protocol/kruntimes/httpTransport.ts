// The HTTP transport under the gateway clients (GatewayHttp, the local gateway's LocalGatewayClient): one
// request with its bounds — connect, headers and body-idle timeouts, an abort signal — answering the status
// and a body read as it arrives. Two implementations behind it: undici (undiciTransport.ts, loaded on first
// use), and node:http for a plain-http loopback gateway when a short-lived caller asks for it — the `sandbox`
// CLI, where loading undici cost ~0.1 s of CPU and ~20 MB per call (bench/cliStart.ts, issue 25). Long-lived
// processes (the companion server, the extension host) stay on undici: its pool is the one whose idle
// keep-alive reuse was proven there (node:http's reuse of a socket the daemon was closing cut an execute
// "in transit" in the integration suite). What a caller does with the answer — caps, typed errors, retries —
// is written once, in the callers, against this interface.
import { HttpTimeoutError, NodeHttpTransport } from './nodeHttpTransport';
import type { GatewayTlsOptions } from './gatewayTls';

export { HttpTimeoutError };

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers: Record<string, string>;
  /** Sent as UTF-8 with its content-length. */
  body?: string | undefined;
  /** Aborting rejects the request, or breaks off the body being read, with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** From sending the request until the response headers have arrived. */
  headersTimeoutMs: number;
  /** The longest wait for the next chunk of the body; 0: no bound (a watch, a followed log). */
  bodyTimeoutMs: number;
}

export interface HttpResponse {
  readonly statusCode: number;
  /** The body's bytes as they arrive (read once). */
  readonly body: AsyncIterable<Buffer>;
  /** Stops reading the body and lets go of its connection; idempotent. */
  destroy(): void;
  readonly destroyed: boolean;
}

export interface HttpTransport {
  request(url: string, request: HttpRequest): Promise<HttpResponse>;
  /** Closes the transport's connections (a shared transport is never closed). */
  close(): Promise<void>;
}

export interface HttpTransportOptions {
  /** Connections kept per origin at most (default: no limit). */
  maxConnections?: number;
  /** How long an idle keep-alive connection is kept (default 10 s). */
  keepAliveMs?: number;
  /** How long a TCP (and TLS) connect may take (default 10 s). */
  connectTimeoutMs?: number;
  /** For an https URL: the CA, servername and verification to connect with. */
  tls?: GatewayTlsOptions;
  /** A plain-http loopback URL goes over node:http (for short-lived processes: no undici to load). */
  nodeHttpForLoopback?: boolean;
}

/** Whether `url` is plain http to this machine (127.0.0.0/8, ::1, localhost): node:http serves it. */
export function isLoopbackHttp(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (u.protocol !== 'http:') return false;
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * A transport for requests to `url`'s origin (and any other of its kind): undici, or node:http for plain-http
 * loopback when `nodeHttpForLoopback` asks. The caller owns it and closes it.
 */
export function openHttpTransport(url: string, options: HttpTransportOptions = {}): HttpTransport {
  if (options.nodeHttpForLoopback === true && isLoopbackHttp(url)) return new NodeHttpTransport(options);
  return new LazyUndiciTransport(options);
}

const shared = new Map<'node:http' | 'undici', HttpTransport>();

/** The process's shared transport for `url` (unbounded pool, kept for the process's life, like undici's global dispatcher). */
export function sharedHttpTransport(url: string, options: { nodeHttpForLoopback?: boolean } = {}): HttpTransport {
  const kind = options.nodeHttpForLoopback === true && isLoopbackHttp(url) ? 'node:http' : 'undici';
  let transport = shared.get(kind);
  if (!transport) {
    transport = openHttpTransport(url, options);
    shared.set(kind, transport);
  }
  return transport;
}

/** Reads the whole body as UTF-8; over `maxBytes` it stops reading and rejects with `tooLarge()`. */
export async function readText(response: HttpResponse, maxBytes = Infinity, tooLarge: () => Error = () => new Error(`response body exceeds ${maxBytes} bytes`)): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    if (size > maxBytes) {
      response.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** undici, loaded on the first request: a process that only talks to a loopback daemon never loads it. */
class LazyUndiciTransport implements HttpTransport {
  private inner: Promise<HttpTransport> | undefined;
  private closed = false;

  constructor(private readonly options: HttpTransportOptions) {}

  private load(): Promise<HttpTransport> {
    this.inner ??= import('./undiciTransport.js').then(({ UndiciTransport }) => new UndiciTransport(this.options));
    return this.inner;
  }

  async request(url: string, request: HttpRequest): Promise<HttpResponse> {
    if (this.closed) throw new Error('the HTTP transport is closed');
    return (await this.load()).request(url, request);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.inner) await (await this.inner).close();
  }
}
