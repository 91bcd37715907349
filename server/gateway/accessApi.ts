// The Runtime access API for local Runs, `/v1/namespaces/{ns}/runtimes/{rt}/sessions/{uid}`,
// in the kruntimes era-C check order: route (404 `endpoint not found`) → concurrency (429,
// counted by the daemon) → Run lookup (404/409) → authorization (401/403/503, pluggable) →
// method (405) → body and query (400/413) → the operation. `operations:ws` goes through the same
// checks on its upgrade request (answered as plain HTTP errors before any upgrade), then hands
// the connection to a SessionSocket. Extensions, advertised under `capabilities` in the status
// body: ranged reads (`offset`, `length`), `POST P/operations/{id}:cancel`, `isolateNetwork`,
// and `terminal` — `GET P/pty` upgraded to an interactive terminal where the Run's workspace has
// a PTY (terminalBridge.ts), through the same checks as `operations:ws`.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  GatewayLimits,
  GatewayMessages,
  NDJSON_CONTENT_TYPE,
  checkIdempotencyKey,
  type ExecuteResponse,
} from '../../protocol/kruntimes/gateway';
import type { LocalRuntime } from '../local/localRuntime';
import type { LocalSession } from '../local/localSession';
import { SessionError, invalidArgument } from '../local/sessionError';
import { isValidOperationId } from '../local/execRecord';
import type { AccessAuthorizer, AuthResult } from './auth';
import { BodyTooLargeError, goJsonBytes, readBody, sendError, sendJson } from './httpBodies';
import { decodeOperation } from './operationDecode';
import { produceOperationEvents, type OperationEvent } from './operationEvents';
import type { AccessRequestCounters } from './requestCounters';
import { SessionSocket, SocketMessages, rejectUpgrade, upgradeProblem } from './sessionSocket';
import type { TerminalBridge } from './terminalBridge';

export interface AccessLimits {
  maxRequestBodyBytes: number;
  maxResponseBodyBytes: number;
  /** Advertise the local extensions under `capabilities` (default true; a kruntimes Console has none). */
  advertiseExtensions?: boolean;
}

export type AccessRoute =
  | { kind: 'status' | 'execute' | 'stream' | 'ws' | 'pty' | 'list'; ns: string; rt: string; uid: string }
  | { kind: 'read'; ns: string; rt: string; uid: string; path: string }
  | { kind: 'cancel'; ns: string; rt: string; uid: string; operationId: string };

const METHODS: Record<AccessRoute['kind'], string> = {
  status: 'GET',
  execute: 'POST',
  stream: 'POST',
  ws: 'GET',
  pty: 'GET',
  list: 'GET',
  read: 'GET',
  cancel: 'POST',
};

/** Matches a `/v1/...sessions/{uid}...` path; undefined → 404 `endpoint not found`. */
export function matchAccessRoute(pathname: string): AccessRoute | undefined {
  const seg = pathname.split('/');
  if (seg.length < 8 || seg[0] !== '' || seg[1] !== 'v1' || seg[2] !== 'namespaces' || seg[4] !== 'runtimes' || seg[6] !== 'sessions') {
    return undefined;
  }
  let decoded: string[];
  try {
    decoded = seg.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
  const [ns, rt, uid] = [decoded[3] as string, decoded[5] as string, decoded[7] as string];
  if (ns === '' || rt === '' || uid === '') return undefined;
  const rest = decoded.slice(8);
  const base = { ns, rt, uid };
  if (rest.length === 0) return { kind: 'status', ...base };
  if (rest.length === 1 && rest[0] === 'operations:execute') return { kind: 'execute', ...base };
  if (rest.length === 1 && rest[0] === 'operations:stream') return { kind: 'stream', ...base };
  if (rest.length === 1 && rest[0] === 'operations:ws') return { kind: 'ws', ...base };
  if (rest.length === 1 && rest[0] === 'pty') return { kind: 'pty', ...base };
  if (rest.length === 1 && rest[0] === 'files') return { kind: 'list', ...base };
  if (rest.length >= 2 && rest[0] === 'files') return { kind: 'read', ...base, path: rest.slice(1).join('/') };
  if (rest.length === 2 && rest[0] === 'operations' && rest[1]?.endsWith(':cancel')) {
    const operationId = rest[1].slice(0, -':cancel'.length);
    if (operationId !== '') return { kind: 'cancel', ...base, operationId };
  }
  return undefined;
}

function positiveInt(raw: string | null, message: string): number | undefined {
  if (raw === null) return undefined;
  if (!/^[-+]?\d+$/.test(raw) || Number(raw) <= 0 || !Number.isSafeInteger(Number(raw))) throw invalidArgument(message);
  return Number(raw);
}

function nonNegativeInt(raw: string | null, message: string): number | undefined {
  if (raw === null) return undefined;
  if (!/^\+?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw invalidArgument(message);
  return Number(raw);
}

function newOperationId(): string {
  return randomBytes(16).toString('hex');
}

function operationIdFrom(req: IncomingMessage): string {
  const header = req.headers['idempotency-key'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key === undefined || key === '') return newOperationId();
  const problem = checkIdempotencyKey(key);
  if (problem) throw invalidArgument(problem);
  if (!isValidOperationId(key)) throw invalidArgument(GatewayMessages.idempotencyKeyCharacters);
  return key;
}

/** An AbortSignal that fires when the caller goes away before the response is complete. */
function clientGone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The server that upgrades sockets (no server of its own: the daemon's HTTP server feeds it); loads `ws`. */
async function newSocketServer(maxPayload: number) {
  const { WebSocketServer } = await import('ws');
  return new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });
}
type SocketServer = Awaited<ReturnType<typeof newSocketServer>>;

/** A request that passed the Run lookup and authorization, or the HTTP error it gets. */
type Admission = { ok: true; session: LocalSession } | { ok: false; status: number; message: string };

export class AccessApi {
  /**
   * Upgrades `operations:ws` and `pty` requests (no server of its own: the daemon's HTTP server feeds it).
   * Made on the first upgrade: `ws`, and the `tls`/`https` it loads, cost a daemon nobody opened a socket
   * to several MB of RSS (issue 25).
   */
  private sockets: Promise<SocketServer> | undefined;
  private socketsClosed = false;

  constructor(
    private readonly runtime: LocalRuntime,
    private readonly auth: AccessAuthorizer,
    private readonly limits: AccessLimits,
    private readonly counters?: AccessRequestCounters,
    private readonly log?: (line: string) => void,
  ) {
  }

  private socketServer(): Promise<SocketServer> {
    const sockets = (this.sockets ??= newSocketServer(this.limits.maxRequestBodyBytes).then((server) => {
      if (this.socketsClosed) server.close(); // the daemon stopped while ws loaded
      return server;
    }));
    return sockets;
  }

  /** Run lookup (404/409) then authorization (401/403/503), in the era-C order. */
  private async admit(route: AccessRoute, headers: IncomingHttpHeaders): Promise<Admission> {
    let session: LocalSession;
    let run: { metadata: { name?: string } };
    try {
      if (route.kind === 'cancel') {
        // Cancel also reaches a Run that is draining (its accepted commands still run).
        const found = this.runtime.sessionByUid(route.ns, route.rt, route.uid) ?? this.runtime.lookupSession(route.ns, route.rt, route.uid);
        ({ session, run } = found);
      } else {
        ({ session, run } = this.runtime.lookupSession(route.ns, route.rt, route.uid));
      }
    } catch (err) {
      if (err instanceof SessionError) return { ok: false, status: err.httpStatus, message: err.message };
      throw err;
    }
    let decision: AuthResult;
    try {
      decision = await this.auth.authorize(headers, { namespace: route.ns, name: run.metadata.name ?? '', uid: route.uid });
    } catch (err) {
      decision = { ok: false, status: 503, message: `authorize Session Run: ${(err as Error).message}` };
    }
    return decision.ok ? { ok: true, session } : decision;
  }

  async handle(req: IncomingMessage, res: ServerResponse, route: AccessRoute, url: URL): Promise<void> {
    try {
      const admitted = await this.admit(route, req.headers);
      if (!admitted.ok) return sendError(res, admitted.status, admitted.message);
      const session = admitted.session;
      if (req.method !== METHODS[route.kind]) return sendError(res, 405, GatewayMessages.methodNotAllowed);
      if (route.kind === 'ws' || route.kind === 'pty') return sendError(res, 426, SocketMessages.upgradeRequired, { Upgrade: 'websocket' });
      this.counters?.record(route.uid, route.kind);
      switch (route.kind) {
        case 'status':
          return this.status(res, session);
        case 'execute':
          return await this.execute(req, res, session);
        case 'stream':
          return await this.stream(req, res, session, url);
        case 'list':
          return await this.list(res, session, url);
        case 'read':
          return await this.read(res, session, route.path, url);
        case 'cancel':
          return sendJson(res, 200, { result: await session.cancel(route.operationId) }, this.limits.maxResponseBodyBytes);
      }
    } catch (err) {
      this.fail(res, err);
    }
  }

  /**
   * An HTTP upgrade request (the daemon's `upgrade` event) for an access route: the same checks
   * as `handle` — failures answered on the raw socket as HTTP errors with the JSON error body,
   * before anything is upgraded — then `operations:ws` becomes a SessionSocket. Resolves once
   * the request is answered or upgraded (the connection itself lives on).
   */
  async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, route: AccessRoute, url: URL): Promise<void> {
    socket.on('error', () => socket.destroy());
    try {
      const admitted = await this.admit(route, req.headers);
      if (!admitted.ok) return rejectUpgrade(socket, admitted.status, admitted.message);
      if (req.method !== METHODS[route.kind]) return rejectUpgrade(socket, 405, GatewayMessages.methodNotAllowed);
      if (route.kind !== 'ws' && route.kind !== 'pty') return rejectUpgrade(socket, 400, SocketMessages.upgradeOnlyOnWs);
      const problem = upgradeProblem(req.headers);
      if (problem) return rejectUpgrade(socket, problem.status, problem.message, problem.headers);
      this.counters?.record(route.uid, route.kind);
      const session = admitted.session;
      if (route.kind === 'pty') return await this.upgradeTerminal(req, socket, head, session, url);
      const sockets = await this.socketServer();
      await new Promise<void>((resolve) => {
        sockets.handleUpgrade(req, socket, head, (ws) => {
          new SessionSocket(ws, { session, maxFrameBytes: this.limits.maxResponseBodyBytes }).start();
          resolve();
        });
        // ws answers a handshake it cannot complete itself (and then never calls back).
        socket.once('close', () => resolve());
      });
    } catch (err) {
      rejectUpgrade(socket, 500, (err as Error).message ?? String(err));
    }
  }

  /** `GET P/pty`: the workspace terminal is opened first (its refusals are HTTP errors), then bridged. */
  private async upgradeTerminal(req: IncomingMessage, socket: Duplex, head: Buffer, session: LocalSession, url: URL): Promise<void> {
    let bridge: TerminalBridge;
    try {
      // Imported here: the bridge (and the terminal client's `ws` in its protocol module) only serves terminals.
      const { TerminalBridge, parseTerminalRequest } = await import('./terminalBridge.js');
      bridge = new TerminalBridge(session, parseTerminalRequest(url.searchParams), this.log);
      await bridge.open();
    } catch (err) {
      if (err instanceof SessionError) return rejectUpgrade(socket, err.httpStatus, err.message);
      throw err;
    }
    const sockets = await this.socketServer().catch((err: unknown) => {
      bridge.closeUnattached();
      throw err;
    });
    await new Promise<void>((resolve) => {
      sockets.handleUpgrade(req, socket, head, (ws) => {
        bridge.attach(ws);
        resolve();
      });
      socket.once('close', () => {
        bridge.closeUnattached();
        resolve();
      });
    });
  }

  /** Closes every open `operations:ws` connection (daemon shutdown). */
  closeSockets(): void {
    this.socketsClosed = true;
    void this.sockets?.then((sockets) => {
      for (const ws of sockets.clients) ws.terminate();
      sockets.close();
    });
  }

  private fail(res: ServerResponse, err: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof BodyTooLargeError) return sendError(res, 413, GatewayMessages.requestTooLarge, { Connection: 'close' });
    if (err instanceof SessionError) return sendError(res, err.httpStatus, err.message);
    sendError(res, 500, (err as Error).message ?? String(err));
  }

  private status(res: ServerResponse, session: LocalSession): void {
    const backend = session.config.backend;
    if (this.limits.advertiseExtensions === false) {
      return sendJson(res, 200, { state: 'SESSION_STATE_READY', lastActivityUnixNano: session.lastActivityNs }, this.limits.maxResponseBodyBytes);
    }
    sendJson(
      res,
      200,
      {
        state: 'SESSION_STATE_READY',
        lastActivityUnixNano: session.lastActivityNs,
        capabilities: {
          rangedReads: true,
          cancel: true,
          isolateNetwork: backend.capabilities.isolateNetwork,
          backend: backend.name,
          isolation: backend.capabilities.isolation,
          ...(session.hasTerminal ? { terminal: true } : {}),
        },
      },
      this.limits.maxResponseBodyBytes,
    );
  }

  private async execute(req: IncomingMessage, res: ServerResponse, session: LocalSession): Promise<void> {
    const operationId = operationIdFrom(req);
    const body = await readBody(req, this.limits.maxRequestBodyBytes);
    const op = decodeOperation(body);
    const result: ExecuteResponse = await session.execute(op, { operationId, clientSignal: clientGone(res) });
    sendJson(res, 200, result, this.limits.maxResponseBodyBytes);
  }

  private async stream(req: IncomingMessage, res: ServerResponse, session: LocalSession, url: URL): Promise<void> {
    const operationId = operationIdFrom(req);
    nonNegativeInt(url.searchParams.get('after'), GatewayMessages.cursorInvalid);
    const body = await readBody(req, this.limits.maxRequestBodyBytes);
    const op = decodeOperation(body);
    const writeEvent = (event: OperationEvent): void => {
      if (res.writableEnded || res.destroyed) return;
      // The first event is written only once accepted: an earlier failure is still a plain HTTP error.
      if (event.type === 'accepted') {
        res.writeHead(200, { 'Content-Type': NDJSON_CONTENT_TYPE, 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
      }
      let line = goJsonBytes(event);
      if (line.length > this.limits.maxResponseBodyBytes) {
        line = goJsonBytes({ sequence: event.sequence, type: 'failed', failed: { code: 8, message: GatewayMessages.responseTooLarge } });
      }
      res.write(line);
    };
    await produceOperationEvents(session, op, { operationId, signal: clientGone(res) }, writeEvent);
    res.end();
  }

  private async list(res: ServerResponse, session: LocalSession, url: URL): Promise<void> {
    const limit = positiveInt(url.searchParams.get('limit'), GatewayMessages.limitPositive) ?? GatewayLimits.listDefaultLimit;
    const page = await session.list(url.searchParams.get('path') ?? '', limit, url.searchParams.get('pageToken') ?? '');
    sendJson(res, 200, { entries: page.entries, nextPageToken: page.nextPageToken }, this.limits.maxResponseBodyBytes);
  }

  private async read(res: ServerResponse, session: LocalSession, path: string, url: URL): Promise<void> {
    const maxBytes = positiveInt(url.searchParams.get('maxBytes'), GatewayMessages.maxBytesPositive);
    const offset = nonNegativeInt(url.searchParams.get('offset'), 'offset must be a non-negative integer') ?? 0;
    const length = positiveInt(url.searchParams.get('length'), 'length must be a positive integer');
    const result = await session.read(path, length ?? maxBytes ?? GatewayLimits.maxFileBytes, offset);
    sendJson(
      res,
      200,
      { contents: result.contents.length === 0 ? null : result.contents.toString('base64'), truncated: result.truncated },
      this.limits.maxResponseBodyBytes,
    );
  }
}
