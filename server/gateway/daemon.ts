// The local gateway daemon's HTTP server: loopback only, bearer-token protected, serving
// `/healthz` (200, empty, outside the concurrency limit), the Runtime access API under `/v1/`
// (including the `operations:ws` upgrade) and the local Runs API under `/local/v1/`. It owns the
// LocalRuntime and, when asked, publishes itself through the state file.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import fs from 'node:fs/promises';
import { GatewayLimits, GatewayMessages } from '../../protocol/kruntimes/gateway';
import { defaultBackends, type BackendRegistry } from '../local/backends';
import { LocalRuntime } from '../local/localRuntime';
import { StateLayout } from '../local/stateRoot';
import { AccessApi, matchAccessRoute } from './accessApi';
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
  runtime: LocalRuntime;
  layout: StateLayout;
  state?: GatewayState;
  close(): Promise<void>;
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
  let baseUrl = '';
  const runtime = new LocalRuntime({
    layout,
    backends: opts.backends ?? defaultBackends(),
    baseUrl: () => baseUrl,
    log: opts.log,
    tickMs: opts.tickMs,
  });
  const counters = new AccessRequestCounters();
  const access = new AccessApi(runtime, auth, limits, counters);
  const runs = new RunsApi(runtime, auth, GatewayLimits.maxRequestBodyBytes, counters);
  let inFlight = 0;
  /** A concurrency slot (429 beyond the limit); the release is idempotent. */
  const acquire = (): (() => void) | undefined => {
    if (inFlight >= maxConcurrent) return undefined;
    inFlight++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        inFlight--;
      }
    };
  };
  const wsRoute = (rawUrl: string | undefined): boolean => {
    const pathname = new URL(rawUrl ?? '/', 'http://localhost').pathname;
    return pathname.startsWith('/v1/') && matchAccessRoute(pathname)?.kind === 'ws';
  };

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
    const accessRoute = url.pathname.startsWith('/v1/') ? matchAccessRoute(url.pathname) : undefined;
    if (accessRoute) {
      const release = acquire();
      if (!release) {
        req.resume();
        sendError(res, 429, GatewayMessages.concurrencyLimit);
        return;
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
  // `operations:ws`: the upgrade request holds a concurrency slot while it is checked and
  // answered (like any request); an open connection does not — it is long-lived by design, and
  // its operations are bounded by the Run's queue.
  const serveUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const accessRoute = url.pathname.startsWith('/v1/') ? matchAccessRoute(url.pathname) : undefined;
    if (!accessRoute) return rejectUpgrade(socket, 404, GatewayMessages.endpointNotFound);
    if (accessRoute.kind !== 'ws') return rejectUpgrade(socket, 400, SocketMessages.upgradeOnlyOnWs);
    const release = acquire();
    if (!release) return rejectUpgrade(socket, 429, GatewayMessages.concurrencyLimit);
    void access.handleUpgrade(req, socket, head, accessRoute, url).finally(release);
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
    ? await writeGatewayState(layout.gatewayStateFile, { host, port, url: baseUrl, token })
    : undefined;

  let closing: Promise<void> | undefined;
  return {
    url: baseUrl,
    port,
    token,
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
