// A loopback HTTP proxy in front of one remote HTTP endpoint: what a forwarded port of a sandbox
// that is reached by an endpoint per port (OpenSandbox, spec §2.5) looks like on this machine.
// It listens on 127.0.0.1 only and sends every request on to the endpoint with the endpoint's own
// headers added (a client cannot override them), the Host of the endpoint, and the path appended to
// the endpoint's path (`…/proxy/8000` + `/app?x=1`). Bodies stream both ways (uploads, SSE, chunked
// downloads); WebSocket (any `Upgrade`) handshakes go through and the two sockets are then joined.
// Built on node:http/https — no HTTP parsing of its own. Hop-by-hop headers are not passed on. How each
// request and upgrade is forwarded is endpointForwarding.ts; this module owns the listener and its lifetime.
import http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import { CompanionError } from '../../protocol/companion';
import type { Logger } from '../log';
import { endpointUpstream, forwardRequest, joinUpgrade } from './endpointForwarding';

export interface EndpointTarget {
  /** `http(s)://host[:port][/path]`. */
  url: string;
  /** Headers every request to the endpoint must carry (secrets: never logged, never shown). */
  headers: Record<string, string>;
}

export interface EndpointProxy {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** Stops listening and cuts every open connection (upgraded ones included). */
  close(): Promise<void>;
}

export async function startEndpointProxy(o: { target: EndpointTarget; localPort?: number; what: string; log: Logger }): Promise<EndpointProxy> {
  const upstream = endpointUpstream(o.target, o.what);
  const sockets = new Set<Duplex>();
  const server = http.createServer((req, res) => forwardRequest(upstream, req, res));
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => joinUpgrade(upstream, sockets, req, socket, head));
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('clientError', (_err, socket: Duplex) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      if (err.code === 'EADDRINUSE') {
        reject(new CompanionError('conflict', `local port ${o.localPort} is already in use on 127.0.0.1; choose another one or leave it empty for a free one`, 'local_port_in_use'));
      } else reject(err);
    };
    const onListening = () => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(o.localPort ?? 0, '127.0.0.1');
  });
  const port = (server.address() as net.AddressInfo).port;
  server.on('error', (err) => o.log.warn('a forwarded port stopped listening', { what: o.what, message: err.message }));

  let closed: Promise<void> | undefined;
  return {
    host: '127.0.0.1',
    port,
    close: () =>
      (closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
        sockets.clear();
        upstream.agent.destroy();
      })),
  };
}
