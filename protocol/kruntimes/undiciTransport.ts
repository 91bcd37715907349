// The undici implementation of HttpTransport (httpTransport.ts), for every gateway that is not plain-http
// loopback: a Run's TLS endpoint (its caBundle, a port-forwarded hop's servername), a remote gateway. A
// bounded Agent (keep-alive, connection limit, connect timeout); undici's own headers and body timeouts.
import { Agent, request } from 'undici';
import type { HttpRequest, HttpResponse, HttpTransport, HttpTransportOptions } from './httpTransport';

export class UndiciTransport implements HttpTransport {
  private readonly agent: Agent;

  constructor(options: HttpTransportOptions = {}) {
    this.agent = new Agent({
      ...(options.maxConnections !== undefined ? { connections: options.maxConnections } : {}),
      pipelining: 1,
      keepAliveTimeout: options.keepAliveMs ?? 10_000,
      keepAliveMaxTimeout: 60_000,
      connect: { timeout: options.connectTimeoutMs ?? 10_000, ...(options.tls ?? {}) },
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  async request(url: string, req: HttpRequest): Promise<HttpResponse> {
    const res = await request(url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      dispatcher: this.agent,
      signal: req.signal,
      headersTimeout: req.headersTimeoutMs,
      bodyTimeout: req.bodyTimeoutMs,
    });
    return {
      statusCode: res.statusCode,
      body: res.body as AsyncIterable<Buffer>,
      destroy: () => {
        if (!res.body.destroyed) res.body.destroy();
      },
      get destroyed() {
        return res.body.destroyed;
      },
    };
  }
}
