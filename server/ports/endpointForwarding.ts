// How one client request reaches the remote endpoint behind a forwarded port (endpointProxy.ts owns the
// listening server and its lifetime): the request to the endpoint (its Host, its own headers — a client cannot
// override them — its path prefix, no hop-by-hop headers), a plain request streamed both ways, and an `Upgrade`
// handshake whose two sockets are joined once the endpoint switches protocols.
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { EndpointTarget } from './endpointProxy';

/** Headers that belong to one connection, not to the request (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** Builds the requests to one endpoint. */
export interface EndpointUpstream {
  /** The request to the endpoint, or undefined when the client's request line is not a path (absolute-form: a forward-proxy request). */
  request(req: http.IncomingMessage, upgrade: boolean): http.ClientRequest | undefined;
  /** The text a client gets when the endpoint cannot be reached. */
  unreachable(err: Error): string;
  /** The keep-alive agent of plain requests (destroyed when the proxy closes). */
  readonly agent: http.Agent;
}

export function endpointUpstream(target: EndpointTarget, what: string): EndpointUpstream {
  const base = new URL(target.url);
  const secure = base.protocol === 'https:';
  const transport = secure ? https : http;
  const prefix = base.pathname.replace(/\/+$/, '');
  const agent = new transport.Agent({ keepAlive: true, maxSockets: 64 });
  const own = Object.fromEntries(Object.entries(target.headers).map(([k, v]) => [k.toLowerCase(), v]));

  const headersFor = (req: http.IncomingMessage, upgrade: boolean): http.OutgoingHttpHeaders => {
    const out: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined || k === 'host' || k in own) continue;
      if (HOP_BY_HOP.has(k) && !(upgrade && (k === 'connection' || k === 'upgrade'))) continue;
      out[k] = v;
    }
    out.host = base.host;
    return { ...out, ...own };
  };

  return {
    agent,
    request: (req, upgrade) => {
      const url = req.url ?? '/';
      if (!url.startsWith('/')) return undefined;
      return transport.request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port || (secure ? 443 : 80),
        method: req.method,
        path: `${prefix}${url}`,
        headers: headersFor(req, upgrade),
        ...(upgrade ? {} : { agent }),
      });
    },
    unreachable: (err) => `cannot reach ${what} (${(err as NodeJS.ErrnoException).code ?? err.message})\n`,
  };
}

function statusHead(res: http.IncomingMessage): string {
  const lines = [`HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}`];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Sends one plain request on to the endpoint and its answer back, both bodies streamed. */
export function forwardRequest(upstream: EndpointUpstream, req: http.IncomingMessage, res: http.ServerResponse): void {
  const up = upstream.request(req, false);
  if (!up) {
    res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' }).end('this address serves a forwarded sandbox port, not a proxy for other hosts\n');
    return;
  }
  up.on('response', (r) => {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    res.writeHead(r.statusCode ?? 502, r.statusMessage, headers);
    r.pipe(res);
    r.on('error', () => res.destroy());
  });
  up.on('error', (err) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(502, { 'Content-Type': 'text/plain; charset=utf-8' }).end(upstream.unreachable(err));
  });
  // The client went away (or the forward stopped): the request to the endpoint stops too.
  res.on('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  req.on('error', () => up.destroy());
  req.pipe(up);
}

/**
 * Sends an `Upgrade` handshake on to the endpoint; when it switches protocols the two sockets are joined. Every
 * socket involved is added to `sockets` while open (closing the proxy cuts them).
 */
export function joinUpgrade(upstream: EndpointUpstream, sockets: Set<Duplex>, req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  sockets.add(socket);
  socket.on('close', () => sockets.delete(socket));
  socket.on('error', () => socket.destroy());
  const up = upstream.request(req, true);
  if (!up) return void socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  up.on('upgrade', (r, upSocket, upHead) => {
    sockets.add(upSocket);
    socket.write(statusHead(r));
    if (upHead.length > 0) socket.write(upHead);
    if (head.length > 0) upSocket.write(head);
    upSocket.pipe(socket);
    socket.pipe(upSocket);
    upSocket.on('error', () => socket.destroy());
    upSocket.on('close', () => {
      sockets.delete(upSocket);
      socket.destroy();
    });
    socket.on('close', () => upSocket.destroy());
  });
  // The endpoint answered without switching protocols (e.g. 401, 404): that answer goes back as it is.
  up.on('response', (r) => {
    socket.write(statusHead(r));
    r.pipe(socket);
  });
  up.on('error', (err) => {
    const text = upstream.unreachable(err);
    socket.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  });
  socket.on('close', () => up.destroy());
  up.end();
}
