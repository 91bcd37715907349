// Which handler serves each request of the local gateway daemon: `/healthz`, the Runtime access API routes of the
// era it serves (HTTP, or a WebSocket upgrade for `operations:ws` and `pty`), the local Runs API, or a 404 — with
// the HTTP request and Session connection caps (spec §10.2) applied on the way in.
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { GatewayMessages } from '../../protocol/kruntimes/gateway';
import { type AccessApi, matchAccessRoute, type AccessRoute } from './accessApi';
import { servesRoute, type GatewayApi } from './apiEra';
import { sendError } from './httpBodies';
import { rejectUpgrade, SocketMessages } from './sessionSocket';
import { type RunsApi, matchRunsRoute } from './runsApi';
import type { BearerAuth } from './auth';
import { SECRETS_PATH, serveSecrets } from './secretsRoute';

/** A bounded count of slots; `acquire` gives an idempotent release, or undefined when full (429). */
export function slotPool(max: number): { acquire(): (() => void) | undefined } {
  let used = 0;
  return {
    acquire: () => {
      if (used >= max) return undefined;
      used++;
      let released = false;
      return () => {
        if (!released) {
          released = true;
          used--;
        }
      };
    },
  };
}

export interface GatewayRouter {
  serveRequest(req: http.IncomingMessage, res: http.ServerResponse): void;
  serveUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Whether a request to this URL is to be upgraded (only the socket routes are). */
  wsRoute(rawUrl: string | undefined): boolean;
}

export function createGatewayRouter(opts: { api: GatewayApi; access: AccessApi; runs: RunsApi; maxConcurrent: number; maxConnections: number; auth?: BearerAuth }): GatewayRouter {
  const { api, access, runs } = opts;
  /** HTTP requests in flight; `operations:ws` requests and connections count in `connections` instead. */
  const requests = slotPool(opts.maxConcurrent);
  const connections = slotPool(opts.maxConnections);
  /** The access route `pathname` names, if this era serves it (else 404 `endpoint not found`). */
  const accessRouteOf = (pathname: string): AccessRoute | undefined => {
    const route = pathname.startsWith('/v1/') ? matchAccessRoute(pathname) : undefined;
    return route && servesRoute(api, route.kind) ? route : undefined;
  };
  /** `operations:ws`, and the local `pty` terminal extension: the routes served as WebSocket upgrades. */
  const isSocketKind = (kind: AccessRoute['kind'] | undefined): boolean => kind === 'ws' || kind === 'pty';
  const wsRoute = (rawUrl: string | undefined): boolean => isSocketKind(accessRouteOf(new URL(rawUrl ?? '/', 'http://localhost').pathname)?.kind);


  const serveRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/healthz') {
      res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 200 : 405, { 'Content-Length': '0' });
      res.end();
      return;
    }
    const accessRoute = accessRouteOf(url.pathname);
    if (accessRoute) {
      const isWs = isSocketKind(accessRoute.kind);
      const release = (isWs ? connections : requests).acquire();
      if (!release) {
        req.resume();
        sendError(res, 429, isWs ? SocketMessages.connectionLimit : GatewayMessages.concurrencyLimit);
        return;
      }
      if (api === 'era-d') {
        // Go's gateway reads only the query parameters it knows: the ranged-read extension's are ignored.
        url.searchParams.delete('offset');
        url.searchParams.delete('length');
      }
      res.on('close', release);
      res.on('finish', release);
      void access.handle(req, res, accessRoute, url);
      return;
    }
    if (url.pathname === SECRETS_PATH && opts.auth) {
      void serveSecrets(req, res, opts.auth);
      return;
    }
    const runsRoute = matchRunsRoute(url.pathname);
    if (runsRoute) {
      void runs.handle(req, res, runsRoute, url);
      return;
    }
    req.resume();
    sendError(res, 404, GatewayMessages.endpointNotFound);
  };
  // `operations:ws` (era D, spec §10.2): the connection cap is checked first (before the Run
  // lookup and authorization), and the slot is held from the upgrade request until the
  // connection closes; HTTP request slots are never used, so open sockets cannot starve HTTP.
  const serveUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const accessRoute = accessRouteOf(url.pathname);
    if (!accessRoute) return rejectUpgrade(socket, 404, GatewayMessages.endpointNotFound);
    if (!isSocketKind(accessRoute.kind)) return rejectUpgrade(socket, 400, SocketMessages.upgradeOnlyOnWs);
    const release = connections.acquire();
    if (!release) return rejectUpgrade(socket, 429, SocketMessages.connectionLimit);
    socket.once('close', release);
    void access.handleUpgrade(req, socket, head, accessRoute, url);
  };
  return { serveRequest, serveUpgrade, wsRoute };
}
