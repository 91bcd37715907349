// The local gateway daemon's HTTP server: loopback only, bearer-token protected, serving
// `/healthz` (200, empty, outside both limits), the Runtime access API under `/v1/` (including
// the `operations:ws` upgrade; all era-C routes, or only era D's with `api: 'era-d'`) and the
// local Runs API under `/local/v1/`. HTTP requests and Session connections have separate caps
// (spec §10.2). It owns the LocalRuntime and, when asked, publishes itself through the state file.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import fs from 'node:fs/promises';
import { GatewayLimits, GatewayMessages } from '../../protocol/kruntimes/gateway';
import { defaultBackends, type BackendRegistry } from '../local/backends';
import { LocalRuntime } from '../local/localRuntime';
import { StateLayout } from '../local/stateRoot';
import { AccessApi, matchAccessRoute, type AccessRoute } from './accessApi';
import { DEFAULT_GATEWAY_API, servesRoute, type GatewayApi } from './apiEra';
import { BearerAuth, newToken } from './auth';
import { sendError } from './httpBodies';
import { rejectUpgrade, SocketMessages } from './sessionSocket';
import { RunsApi, matchRunsRoute } from './runsApi';
import { readGatewayState, writeGatewayState, type GatewayState } from './stateFile';
import { AccessRequestCounters } from './requestCounters';

export interface GatewayOptions {
  stateDir: string;
  host?: string;
  /** 0 = a random port; by default the previous daemon's port is tried first. */
  port?: number;
  token?: string;
  maxRequestBodyBytes?: number;
  maxResponseBodyBytes?: number;
  maxConcurrentRequests?: number;
  /** Open `operations:ws` connections (era D's `MaxSessionConnections`; below 1 → the default 128). */
  maxSessionConnections?: number;
  /** The access API era to serve (default `era-c`; see apiEra.ts). */
  api?: GatewayApi;
  backends?: BackendRegistry;
  /** Publish `<state>/gateway.json` (the CLI daemon does; in-process test servers need not). */
  writeStateFile?: boolean;
  log?: (line: string) => void;
  tickMs?: number;
}

export interface RunningGateway {
  url: string;
  port: number;
  token: string;
  api: GatewayApi;
  runtime: LocalRuntime;
  layout: StateLayout;
  state?: GatewayState;
  close(): Promise<void>;
}

/** era D's `DefaultMaxSessionConnections`. */
export const DEFAULT_MAX_SESSION_CONNECTIONS = 128;

/** A bounded count of slots; `acquire` gives an idempotent release, or undefined when full (429). */
function slotPool(max: number): { acquire(): (() => void) | undefined } {
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

function listen(server: http.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      server.off('listening', onListening);
      reject(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const layout = new StateLayout(opts.stateDir);
  await fs.mkdir(layout.root, { recursive: true, mode: 0o700 });
  const host = opts.host ?? '127.0.0.1';
  const token = opts.token ?? newToken();
  const auth = new BearerAuth(token);
  const limits = {
    maxRequestBodyBytes: opts.maxRequestBodyBytes ?? GatewayLimits.maxRequestBodyBytes,
    maxResponseBodyBytes: opts.maxResponseBodyBytes ?? GatewayLimits.maxResponseBodyBytes,
  };
  const maxConcurrent = opts.maxConcurrentRequests ?? GatewayLimits.maxConcurrentRequests;
  const maxConnections = opts.maxSessionConnections !== undefined && opts.maxSessionConnections >= 1 ? opts.maxSessionConnections : DEFAULT_MAX_SESSION_CONNECTIONS;
  const api = opts.api ?? DEFAULT_GATEWAY_API;
  let baseUrl = '';
  const runtime = new LocalRuntime({
    layout,
    backends: opts.backends ?? defaultBackends(),
    baseUrl: () => baseUrl,
    log: opts.log,
    tickMs: opts.tickMs,
  });
  const counters = new AccessRequestCounters();
  const access = new AccessApi(runtime, auth, { ...limits, advertiseExtensions: api === 'era-c' }, counters);
  const runs = new RunsApi(runtime, auth, GatewayLimits.maxRequestBodyBytes, counters);
  /** HTTP requests in flight; `operations:ws` requests and connections count in `connections` instead. */
  const requests = slotPool(maxConcurrent);
  const connections = slotPool(maxConnections);
  /** The access route `pathname` names, if this era serves it (else 404 `endpoint not found`). */
  const accessRouteOf = (pathname: string): AccessRoute | undefined => {
    const route = pathname.startsWith('/v1/') ? matchAccessRoute(pathname) : undefined;
    return route && servesRoute(api, route.kind) ? route : undefined;
  };
  const wsRoute = (rawUrl: string | undefined): boolean => accessRouteOf(new URL(rawUrl ?? '/', 'http://localhost').pathname)?.kind === 'ws';

  // The port is known only after listen, and the runtime needs it to load its Runs: a request
  // that arrives in between waits for the Runs instead of getting a wrong 404.
  let runtimeStarted = false;
  let markStarted: (ok: boolean) => void = () => undefined;
  const started = new Promise<boolean>((resolve) => (markStarted = resolve));
  const afterStart = (serve: () => void, refuse: () => void): void => {
    if (runtimeStarted) return serve();
    void started.then((ok) => (ok ? serve() : refuse()));
  };

  const serveRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/healthz') {
      res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 200 : 405, { 'Content-Length': '0' });
      res.end();
      return;
    }
    const accessRoute = accessRouteOf(url.pathname);
    if (accessRoute) {
      const isWs = accessRoute.kind === 'ws';
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
    const runsRoute = matchRunsRoute(url.pathname);
    if (runsRoute) {
      void runs.handle(req, res, runsRoute, url);
      return;
    }
    req.resume();
    sendError(res, 404, GatewayMessages.endpointNotFound);
  };
  const server = http.createServer(
    {
      maxHeaderSize: 1 << 20,
      // Only `operations:ws` is upgraded; any other request with an Upgrade header is served as
      // plain HTTP, as Go's net/http does (Node ≥ 24.9; older versions upgrade them all, below).
      shouldUpgradeCallback: (req) => wsRoute(req.url),
    },
    (req, res) => afterStart(() => serveRequest(req, res), () => res.destroy()),
  );
  // `operations:ws` (era D, spec §10.2): the connection cap is checked first (before the Run
  // lookup and authorization), and the slot is held from the upgrade request until the
  // connection closes; HTTP request slots are never used, so open sockets cannot starve HTTP.
  const serveUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const accessRoute = accessRouteOf(url.pathname);
    if (!accessRoute) return rejectUpgrade(socket, 404, GatewayMessages.endpointNotFound);
    if (accessRoute.kind !== 'ws') return rejectUpgrade(socket, 400, SocketMessages.upgradeOnlyOnWs);
    const release = connections.acquire();
    if (!release) return rejectUpgrade(socket, 429, SocketMessages.connectionLimit);
    socket.once('close', release);
    void access.handleUpgrade(req, socket, head, accessRoute, url);
  };
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    afterStart(() => serveUpgrade(req, socket, head), () => socket.destroy()),
  );
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 30_000;
  server.requestTimeout = 60_000;

  let port: number;
  const wanted = opts.port ?? (opts.writeStateFile ? ((await readGatewayState(layout.gatewayStateFile))?.port ?? 0) : 0);
  try {
    port = await listen(server, host, wanted);
  } catch (err) {
    if (wanted === 0 || opts.port !== undefined) throw err;
    port = await listen(server, host, 0); // the previous port is taken: any port will do
  }
  baseUrl = `http://${host}:${port}`;
  try {
    await runtime.start();
  } catch (err) {
    markStarted(false);
    server.close();
    server.closeAllConnections();
    throw err;
  }
  runtimeStarted = true;
  markStarted(true);
  const state = opts.writeStateFile
    ? await writeGatewayState(layout.gatewayStateFile, { host, port, url: baseUrl, token, api })
    : undefined;

  let closing: Promise<void> | undefined;
  return {
    url: baseUrl,
    port,
    token,
    api,
    runtime,
    layout,
    state,
    close: () =>
      (closing ??= (async () => {
        server.close();
        server.closeAllConnections();
        access.closeSockets();
        await runtime.stop();
        if (opts.writeStateFile) {
          const current = await readGatewayState(layout.gatewayStateFile);
          if (current?.pid === process.pid) await fs.rm(layout.gatewayStateFile, { force: true });
        }
      })()),
  };
}
