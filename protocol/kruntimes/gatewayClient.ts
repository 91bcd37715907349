// The one client of the Runtime access API, used for a kruntimes gateway and the local gateway
// alike: bounded (connection limits, timeouts, response caps), typed errors, reads retried
// briefly after Ready (informer lag), mutations never retried (a transport failure means the
// outcome is unknown). It speaks both live eras (spec §10.10): status, listings and reads go
// over HTTP on both; commands and file mutations go over HTTP (`operations:execute`,
// `operations:stream`) on era C and over the process's one shared `operations:ws` Session
// connection per sandbox on era D. The era is learnt from the first operation call — era D
// answers it 404 `endpoint not found` before Run lookup, so nothing runs — and remembered per
// gateway for the whole process (gatewayEra.ts).
import { parseJsonWithBigInts } from './goJson';
import { isEndpointNotFoundError, knownGatewayEra, rememberGatewayEra } from './gatewayEra';
import { GatewayHttp, keyHeader, parseGatewayResponse, parseJsonOrThrow, type CallOptions, type OperationOptions } from './gatewayHttp';
import { gatewayTlsOptions, type GatewayTlsOptions } from './gatewayTls';
import type { HttpTransport } from './httpTransport';
import { decodeCommandResult, executeFromEvents, type CommandOutput } from './operationResults';
import type { HeartbeatHold, LeaseHeartbeatOptions } from './sessionConnection';
import { acquireSessionConnection, type SessionConnectionRef } from './sessionConnectionPool';
import { TerminalSocket, type TerminalQuery, type TerminalSocketHandlers } from './terminalSocket';
import {
  CancelResponseSchema,
  type CancelResponse,
  ExecuteResponseSchema,
  type ExecuteResponse,
  type FileEntry,
  GatewayLimits,
  ListResponseSchema,
  type ListResponse,
  ReadResponseSchema,
  type SessionCommand,
  type SessionOperation,
  SessionStatusSchema,
  type SessionStatus,
  STATUS_BIGINT_FIELDS,
  type StreamEvent,
} from './gateway';
import { GatewayProtocolError, GatewayUsageError } from './gatewayErrors';

export type { CallOptions, OperationOptions } from './gatewayHttp';
export { decodeCommandResult, executeFromEvents, type CommandOutput } from './operationResults';

export interface GatewayEndpoint {
  /** The Run's `status.endpoint.url`, ending in `sessions/<uid>`. */
  url: string;
  /** The Run's `status.endpoint.caBundle`: base64 of PEM (as in the Run), or PEM itself. */
  caBundle?: string | undefined;
}

export interface GatewayClientOptions {
  endpoint: GatewayEndpoint;
  /** Bearer token; sent as `Authorization: Bearer <token>`. */
  token?: string | undefined;
  /** A shared transport (httpTransport.ts); when absent the client owns a bounded one and `close()` closes it. */
  transport?: HttpTransport | undefined;
  /** Retry reads that answer 409/503 until this many ms after the client was created (0 = never). */
  readRetryWindowMs?: number | undefined;
  /** TLS adjustments, e.g. for a port-forwarded loopback hop whose certificate names the Service. */
  tls?: { rejectUnauthorized?: boolean; servername?: string } | undefined;
  /** Cap on a unary response body (default: the gateway's 1 MiB plus headroom). */
  maxResponseBytes?: number | undefined;
}

export interface FileContents {
  contents: Buffer;
  truncated: boolean;
}

/** Percent-encodes a workspace-relative path segment by segment, refusing what the API cannot take. */
export function encodeFilePath(path: string): string {
  if (path === '') throw new GatewayUsageError('file path is required');
  if (path.startsWith('/')) throw new GatewayUsageError(`file path must be workspace-relative: ${path}`);
  const segments = path.split('/');
  for (const s of segments) {
    if (s === '' || s === '.' || s === '..') {
      throw new GatewayUsageError(`file path must not contain empty, "." or ".." segments: ${path}`);
    }
  }
  return segments.map(encodeURIComponent).join('/');
}

export class GatewayClient {
  private readonly base: string;
  private readonly http: GatewayHttp;
  private readonly endpointUrl: string;
  private readonly token: string | undefined;
  private readonly tlsOptions: GatewayTlsOptions;
  private sessionRef: SessionConnectionRef | undefined;
  private closed = false;

  constructor(options: GatewayClientOptions) {
    let url: URL;
    try {
      url = new URL(options.endpoint.url);
    } catch {
      throw new GatewayUsageError(`invalid gateway endpoint URL: ${options.endpoint.url}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new GatewayUsageError(`gateway endpoint must be http or https: ${options.endpoint.url}`);
    }
    this.base = url.toString().replace(/\/+$/, '');
    this.endpointUrl = this.base;
    this.token = options.token || undefined;
    this.tlsOptions = gatewayTlsOptions(options.endpoint.caBundle, options.tls);
    this.http = new GatewayHttp({
      base: this.base,
      token: options.token,
      transport: options.transport,
      readRetryWindowMs: options.readRetryWindowMs ?? 0,
      maxResponseBytes: options.maxResponseBytes,
      tlsOptions: this.tlsOptions,
    });
  }

  /**
   * Closes the client's own connection pool (a shared transport is left to its owner) and lets
   * go of the shared Session connection (closed once no client of this process uses it).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.sessionRef?.release();
    this.sessionRef = undefined;
    await this.http.close();
  }

  /**
   * Opens the sandbox's interactive terminal (`GET P/pty`, where the status advertises
   * `capabilities.terminal`) with this client's endpoint, token and TLS settings.
   */
  openTerminal(query: TerminalQuery, handlers: TerminalSocketHandlers): Promise<TerminalSocket> {
    if (this.closed) throw new GatewayUsageError('the gateway client is closed');
    return TerminalSocket.connect({ ...query, endpointUrl: this.endpointUrl, token: this.token, tls: this.tlsOptions }, handlers);
  }

  /** The era this gateway was last seen to serve, if an operation call has shown it yet. */
  get era(): 'C' | 'D' | undefined {
    return knownGatewayEra(this.base);
  }

  /** This process's shared `operations:ws` connection to the sandbox (era D). */
  private session() {
    if (this.closed) throw new GatewayUsageError('the gateway client is closed');
    this.sessionRef ??= acquireSessionConnection({ endpointUrl: this.endpointUrl, token: this.token, tls: this.tlsOptions });
    return this.sessionRef.connection;
  }

  /**
   * Holds the Run's lease (`leaseTimeoutSeconds`): `{"type":"heartbeat"}` every lease/3
   * (0.1–30 s) on the sandbox's shared Session connection, reconnecting when it drops, until
   * released. The hold keeps the connection open even after this client is closed.
   */
  heartbeat(leaseTimeoutSeconds: number, options: LeaseHeartbeatOptions = {}): HeartbeatHold {
    const ref = acquireSessionConnection({ endpointUrl: this.endpointUrl, token: this.token, tls: this.tlsOptions });
    let hold: HeartbeatHold;
    try {
      hold = ref.connection.holdLease(leaseTimeoutSeconds, options);
    } catch (err) {
      ref.release();
      throw err;
    }
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        hold.release();
        ref.release();
      },
    };
  }

  // ---- reads (retried briefly on 409/503 inside the retry window) -------------------------

  async status(options: CallOptions = {}): Promise<SessionStatus> {
    const text = await this.http.readCall('GET', '', options);
    return parseGatewayResponse(SessionStatusSchema, parseJsonOrThrow(text, (t) => parseJsonWithBigInts(t, STATUS_BIGINT_FIELDS)));
  }

  /** One page of a directory listing. `limit` 1..1000 (default 100 on the server). */
  async listPage(
    args: { path?: string; limit?: number; pageToken?: string },
    options: CallOptions = {},
  ): Promise<ListResponse> {
    const query = new URLSearchParams();
    if (args.path !== undefined && args.path !== '') query.set('path', args.path);
    if (args.limit !== undefined) query.set('limit', String(args.limit));
    if (args.pageToken !== undefined && args.pageToken !== '') query.set('pageToken', args.pageToken);
    const qs = query.toString();
    const text = await this.http.readCall('GET', `/files${qs ? `?${qs}` : ''}`, options);
    return parseGatewayResponse(ListResponseSchema, parseJsonOrThrow(text));
  }

  /** Every entry of a directory, paging until `nextPageToken === ""`. */
  async *list(path = '', args: { limit?: number } & CallOptions = {}): AsyncGenerator<FileEntry> {
    let pageToken = '';
    do {
      const page = await this.listPage({ path, limit: args.limit ?? GatewayLimits.listMaxLimit, pageToken }, args);
      yield* page.entries;
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  }

  /**
   * Reads a file (at most `maxBytes` ≤ 786000 so the base64 answer fits the 1 MiB response).
   * `offset`/`length` are the local gateway's ranged-read extension; only send them when the
   * status advertises `capabilities.rangedReads`.
   */
  async read(
    path: string,
    args: { maxBytes?: number; offset?: number; length?: number } = {},
    options: CallOptions = {},
  ): Promise<FileContents> {
    const maxBytes = args.maxBytes ?? GatewayLimits.maxReadBytes;
    if (!Number.isInteger(maxBytes) || maxBytes <= 0 || maxBytes > GatewayLimits.maxReadBytes) {
      throw new GatewayUsageError(`maxBytes must be an integer in 1..${GatewayLimits.maxReadBytes}`);
    }
    const query = new URLSearchParams({ maxBytes: String(maxBytes) });
    if (args.offset !== undefined) query.set('offset', String(args.offset));
    if (args.length !== undefined) query.set('length', String(args.length));
    const text = await this.http.readCall('GET', `/files/${encodeFilePath(path)}?${query.toString()}`, options);
    const body = parseGatewayResponse(ReadResponseSchema, parseJsonOrThrow(text));
    return { contents: body.contents === null ? Buffer.alloc(0) : Buffer.from(body.contents, 'base64'), truncated: body.truncated };
  }

  // ---- mutations (never retried) ------------------------------------------------------------

  /**
   * One operation, waiting for its result: `operations:execute` on era C (the raw 200 body), the
   * `completed` event on era D (its output reassembled from the `output` events). A `failed`
   * operation rejects with the GatewayError era C would have answered (gRPC code → HTTP status).
   */
  async execute(operation: SessionOperation, options: OperationOptions = {}): Promise<ExecuteResponse> {
    if (this.era !== 'D') {
      try {
        const text = await this.http.mutationCall('/operations:execute', operation, keyHeader(options), options);
        return parseGatewayResponse(ExecuteResponseSchema, parseJsonOrThrow(text));
      } catch (err) {
        if (!isEndpointNotFoundError(err)) throw err;
        rememberGatewayEra(this.base, 'D');
      }
    }
    return executeFromEvents(this.socketStream(operation, options, true));
  }

  /** Runs a command and decodes its output. A non-zero exit is a result, not an error. */
  async runCommand(command: SessionCommand, options: OperationOptions = {}): Promise<CommandOutput> {
    const response = await this.execute({ command }, options);
    if (!response.command) throw new GatewayProtocolError('command response has no "command" result');
    return decodeCommandResult(response.command);
  }

  async writeFile(path: string, contents: Uint8Array, args: { createParents?: boolean } = {}, options: OperationOptions = {}) {
    if (contents.byteLength > GatewayLimits.maxWriteBytes) {
      throw new GatewayUsageError(
        `file of ${contents.byteLength} bytes exceeds one gateway call (${GatewayLimits.maxWriteBytes} bytes); write it in parts`,
      );
    }
    await this.execute(
      {
        writeFile: {
          path,
          contents: Buffer.from(contents).toString('base64'),
          ...(args.createParents !== undefined ? { createParents: args.createParents } : {}),
        },
      },
      options,
    );
  }

  async createDirectory(path: string, options: OperationOptions = {}): Promise<void> {
    await this.execute({ createDirectory: { path } }, options);
  }

  async deleteFile(path: string, args: { recursive?: boolean } = {}, options: OperationOptions = {}): Promise<void> {
    await this.execute({ deleteFile: { path, ...(args.recursive !== undefined ? { recursive: args.recursive } : {}) } }, options);
  }

  async renameFile(
    sourcePath: string,
    destinationPath: string,
    args: { overwrite?: boolean } = {},
    options: OperationOptions = {},
  ): Promise<void> {
    await this.execute(
      { renameFile: { sourcePath, destinationPath, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}) } },
      options,
    );
  }

  /**
   * The operation's events, `accepted` first, until `completed` or `failed`: `operations:stream`
   * (NDJSON) on era C, the Session connection on era D — the same StreamEvent objects either way.
   * Aborting the signal (or stopping to read) cancels the operation: era C closes the stream,
   * era D sends `cancel` (or drops the call from the queue unsent).
   */
  async *stream(operation: SessionOperation, args: OperationOptions = {}): AsyncGenerator<StreamEvent> {
    if (this.era !== 'D') {
      const response = await this.http.openStream(operation, args);
      if (response) {
        yield* this.http.streamEvents(response, args.signal);
        return;
      }
      rememberGatewayEra(this.base, 'D');
    }
    yield* this.socketStream(operation, args, true);
  }

  /**
   * Cancels an operation by id. Era C: the local gateway's `POST P/operations/{id}:cancel`
   * (answering cancelled | ended | unknown). Era D (or a kruntimes gateway without that route):
   * only an operation this process sends over its Session connection can be cancelled — a
   * `cancel` frame if it runs, or unqueued unsent — else a GatewayUsageError.
   */
  async cancelOperation(operationId: string, options: CallOptions = {}): Promise<CancelResponse['result']> {
    if (this.era !== 'D') {
      try {
        const text = await this.http.mutationCall(`/operations/${encodeURIComponent(operationId)}:cancel`, {}, undefined, options);
        return parseGatewayResponse(CancelResponseSchema, parseJsonOrThrow(text)).result;
      } catch (err) {
        if (!isEndpointNotFoundError(err)) throw err;
      }
    }
    // Any client of this sandbox in this process may have sent it: they share one connection.
    const ref = acquireSessionConnection({ endpointUrl: this.endpointUrl, token: this.token, tls: this.tlsOptions });
    try {
      if (ref.connection.cancel(operationId)) return 'cancelled';
    } finally {
      ref.release();
    }
    throw new GatewayUsageError(
      `operation ${operationId} is not running from this process, and this gateway cancels operations only over the connection that sent them`,
    );
  }

  // ---- era-D socket ------------------------------------------------------------------------

  /**
   * The operation over the Session connection. If the gateway turns out to have no
   * `operations:ws` (404 `endpoint not found` on the upgrade: it went back to era C), nothing
   * was sent, and the call goes over HTTP once.
   */
  private async *socketStream(operation: SessionOperation, args: OperationOptions, mayFallBack: boolean): AsyncGenerator<StreamEvent> {
    let yielded = false;
    try {
      for await (const event of this.session().operate(operation, args)) {
        yielded = true;
        yield event;
      }
    } catch (err) {
      if (yielded || !mayFallBack || !isEndpointNotFoundError(err)) throw err;
      rememberGatewayEra(this.base, 'C');
      const response = await this.http.openStream(operation, args);
      if (!response) throw err;
      yield* this.http.streamEvents(response, args.signal);
    }
  }
}
