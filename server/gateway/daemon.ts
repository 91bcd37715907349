// The local gateway daemon's HTTP server: loopback only, bearer-token protected, serving
// `/healthz` (200, empty, outside both limits), the Runtime access API under `/v1/` (including
// the `operations:ws` upgrade; all era-C routes, or only era D's with `api: 'era-d'`) and the
// local Runs API under `/local/v1/`. HTTP requests and Session connections have separate caps
// (spec §10.2). It owns the LocalRuntime and, when asked, publishes itself through the state file.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import fs from 'node:fs/promises';
import { GatewayLimits } from '../../protocol/kruntimes/gateway';
import { defaultBackends, type BackendRegistry } from '../local/backends';
import { LocalRuntime } from '../local/localRuntime';
import { StateLayout } from '../local/stateRoot';
import { AccessApi } from './accessApi';
import { DEFAULT_GATEWAY_API, type GatewayApi } from './apiEra';
import { BearerAuth, newToken } from './auth';
import { createGatewayRouter, type GatewayRouter } from './gatewayRouter';
import { RunsApi } from './runsApi';
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
  /** false: local sandboxes get no interactive terminal (default: where this machine makes ptys, hostTerminal.ts). */
  hostTerminals?: boolean;
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

/**
 * The port is known only after listen, and the runtime needs it to load its Runs: a request that arrives in between
 * waits (`afterStart`) for the Runs instead of getting a wrong 404, and is refused if the runtime fails to start.
 */
function startGate(): { afterStart(serve: () => void, refuse: () => void): void; open(ok: boolean): void } {
  let runtimeStarted = false;
  let markStarted: (ok: boolean) => void = () => undefined;
  const started = new Promise<boolean>((resolve) => (markStarted = resolve));
  return {
    afterStart: (serve, refuse) => {
      if (runtimeStarted) return serve();
      void started.then((ok) => (ok ? serve() : refuse()));
    },
    open: (ok) => {
      runtimeStarted = ok;
      markStarted(ok);
    },
  };
}

/** The daemon's HTTP server over the router, every request held by the start gate. */
function createHttpServer(router: GatewayRouter, afterStart: (serve: () => void, refuse: () => void) => void): http.Server {
  const server = http.createServer(
    {
      maxHeaderSize: 1 << 20,
      // Only `operations:ws` is upgraded; any other request with an Upgrade header is served as
      // plain HTTP, as Go's net/http does (Node ≥ 24.9; older versions upgrade them all, below).
      shouldUpgradeCallback: (req) => router.wsRoute(req.url),
    },
    (req, res) => afterStart(() => router.serveRequest(req, res), () => res.destroy()),
  );
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    afterStart(() => router.serveUpgrade(req, socket, head), () => socket.destroy()),
  );
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 30_000;
  server.requestTimeout = 60_000;
  return server;
}

/** Listens on the port asked for, else the previous daemon's (when publishing the state file), else any. */
async function listenOnPreferredPort(server: http.Server, host: string, opts: GatewayOptions, layout: StateLayout): Promise<number> {
  const wanted = opts.port ?? (opts.writeStateFile ? ((await readGatewayState(layout.gatewayStateFile))?.port ?? 0) : 0);
  try {
    return await listen(server, host, wanted);
  } catch (err) {
    if (wanted === 0 || opts.port !== undefined) throw err;
    return await listen(server, host, 0); // the previous port is taken: any port will do
  }
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
    hostTerminals: opts.hostTerminals,
  });
  const counters = new AccessRequestCounters();
  const access = new AccessApi(runtime, auth, { ...limits, advertiseExtensions: api === 'era-c' }, counters, opts.log);
  const runs = new RunsApi(runtime, auth, GatewayLimits.maxRequestBodyBytes, counters);
  const router = createGatewayRouter({ api, access, runs, maxConcurrent, maxConnections, auth });

  const gate = startGate();
  const server = createHttpServer(router, gate.afterStart);

  const port = await listenOnPreferredPort(server, host, opts, layout);
  baseUrl = `http://${host}:${port}`;
  try {
    await runtime.start();
  } catch (err) {
    gate.open(false);
    server.close();
    server.closeAllConnections();
    throw err;
  }
  gate.open(true);
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
