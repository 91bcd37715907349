// The one client of the Runtime access API, used for a kruntimes gateway and the local gateway
// alike: bounded (connection limits, timeouts, response caps), typed errors, reads retried
// briefly after Ready (informer lag), mutations never retried (a transport failure means the
// outcome is unknown). It speaks both live eras (spec §10.10): status, listings and reads go
// over HTTP on both; commands and file mutations go over HTTP (`operations:execute`,
// `operations:stream`) on era C and over the process's one shared `operations:ws` Session
// connection per sandbox on era D. The era is learnt from the first operation call — era D
// answers it 404 `endpoint not found` before Run lookup, so nothing runs — and remembered per
// gateway for the whole process (gatewayEra.ts).
import { Agent, type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { parseJsonWithBigInts } from './goJson';
import { isEndpointNotFoundError, knownGatewayEra, rememberGatewayEra } from './gatewayEra';
import { gatewayTlsOptions, type GatewayTlsOptions } from './gatewayTls';
import { ndjsonLines, NdjsonLineError } from './ndjsonLines';
import type { HeartbeatHold, LeaseHeartbeatOptions } from './sessionConnection';
import { acquireSessionConnection, type SessionConnectionRef } from './sessionConnectionPool';
import {
  CancelResponseSchema,
  type CancelResponse,
  ErrorBodySchema,
  ExecuteResponseSchema,
  type ExecuteResponse,
  type FileEntry,
  GatewayLimits,
  httpStatusForGrpc,
  ListResponseSchema,
  type ListResponse,
  ReadResponseSchema,
  type SessionCommand,
  type SessionOperation,
  SessionStatusSchema,
  type SessionStatus,
  STATUS_BIGINT_FIELDS,
  StreamEventSchema,
  type StreamEvent,
} from './gateway';
import { GatewayError, GatewayProtocolError, GatewayTransportError, GatewayUsageError } from './gatewayErrors';

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
  /** A shared dispatcher; when absent the client owns a bounded Agent and `close()` closes it. */
  dispatcher?: Dispatcher | undefined;
  /** Retry reads that answer 409/503 until this many ms after the client was created (0 = never). */
  readRetryWindowMs?: number | undefined;
  /** TLS adjustments, e.g. for a port-forwarded loopback hop whose certificate names the Service. */
  tls?: { rejectUnauthorized?: boolean; servername?: string } | undefined;
  /** Cap on a unary response body (default: the gateway's 1 MiB plus headroom). */
  maxResponseBytes?: number | undefined;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
}

/** Options of a command or file mutation. */
export interface OperationOptions extends CallOptions {
  /**
   * The operation's idempotency key (≤ 128 bytes of `[A-Za-z0-9._-]`), which is also its
   * operation ID. On era D one is generated when absent; on era C it is sent only when given.
   */
  idempotencyKey?: string | undefined;
}

export interface CommandOutput {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

export interface FileContents {
  contents: Buffer;
  truncated: boolean;
}

const READ_HEADERS_TIMEOUT_MS = 30_000;
/** A command may queue and then run for the 5-minute operation timeout. */
const MUTATION_HEADERS_TIMEOUT_MS = GatewayLimits.maxOperationTimeoutMs + 60_000;
const DEFAULT_MAX_RESPONSE_BYTES = GatewayLimits.maxResponseBodyBytes + 64 * 1024;
const MAX_STREAM_LINE_BYTES = GatewayLimits.maxResponseBodyBytes + 64 * 1024;

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

function isConnectError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'EAI_AGAIN' ||
    code === 'EHOSTUNREACH' ||
    code === 'UND_ERR_CONNECT_TIMEOUT'
  );
}

function isAbort(err: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || (err as { name?: unknown } | null)?.name === 'AbortError';
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class GatewayClient {
  private readonly base: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly authorization: string | undefined;
  private readonly retryReadsUntil: number;
  private readonly maxResponseBytes: number;
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
    this.authorization = options.token ? `Bearer ${options.token}` : undefined;
    this.retryReadsUntil = Date.now() + (options.readRetryWindowMs ?? 0);
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    if (options.dispatcher) {
      this.dispatcher = options.dispatcher;
      this.ownsDispatcher = false;
    } else {
      this.dispatcher = new Agent({
        connections: 8,
        pipelining: 1,
        keepAliveTimeout: 10_000,
        keepAliveMaxTimeout: 60_000,
        connect: { timeout: 10_000, ...this.tlsOptions },
      });
      this.ownsDispatcher = true;
    }
  }

  /**
   * Closes the client's own connection pool (a shared dispatcher is left to its owner) and lets
   * go of the shared Session connection (closed once no client of this process uses it).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.sessionRef?.release();
    this.sessionRef = undefined;
    if (this.ownsDispatcher) await this.dispatcher.close();
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
    const text = await this.readCall('GET', '', options);
    return this.parse(SessionStatusSchema, parseJsonOrThrow(text, (t) => parseJsonWithBigInts(t, STATUS_BIGINT_FIELDS)));
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
    const text = await this.readCall('GET', `/files${qs ? `?${qs}` : ''}`, options);
    return this.parse(ListResponseSchema, parseJsonOrThrow(text));
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
    const text = await this.readCall('GET', `/files/${encodeFilePath(path)}?${query.toString()}`, options);
    const body = this.parse(ReadResponseSchema, parseJsonOrThrow(text));
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
        const text = await this.mutationCall('/operations:execute', operation, keyHeader(options), options);
        return this.parse(ExecuteResponseSchema, parseJsonOrThrow(text));
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
      const response = await this.openHttpStream(operation, args);
      if (response) {
        yield* this.httpStreamEvents(response, args.signal);
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
        const text = await this.mutationCall(`/operations/${encodeURIComponent(operationId)}:cancel`, {}, undefined, options);
        return this.parse(CancelResponseSchema, parseJsonOrThrow(text)).result;
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

  // ---- era-C stream and era-D socket ---------------------------------------------------------

  /** POSTs `operations:stream`: the 200 response, or undefined when the gateway is era D. */
  private async openHttpStream(operation: SessionOperation, args: OperationOptions): Promise<Dispatcher.ResponseData | undefined> {
    const response = await this.send('POST', '/operations:stream', JSON.stringify(operation), keyHeader(args), args.signal, true);
    if (response.statusCode === 200) return response;
    const error = await this.errorFrom(response);
    if (isEndpointNotFoundError(error)) return undefined;
    throw error;
  }

  private async *httpStreamEvents(response: Dispatcher.ResponseData, signal: AbortSignal | undefined): AsyncGenerator<StreamEvent> {
    let sawTerminal = false;
    try {
      for await (const line of ndjsonLines(response.body as AsyncIterable<Buffer>, MAX_STREAM_LINE_BYTES)) {
        const event = this.parse(StreamEventSchema, parseJsonOrThrow(line));
        if (event.type === 'completed' || event.type === 'failed') sawTerminal = true;
        yield event;
      }
    } catch (err) {
      if (err instanceof NdjsonLineError) {
        throw new GatewayProtocolError(err.code === 'ndjson_truncated' ? 'stream ended inside an event line' : err.message);
      }
      if (err instanceof GatewayProtocolError || isAbort(err, signal)) throw err;
      throw new GatewayTransportError(
        `the operation stream broke before it ended; the outcome is unknown: ${(err as Error).message}`,
        true,
        { cause: err },
      );
    } finally {
      if (!response.body.destroyed) response.body.destroy();
    }
    if (!sawTerminal) {
      throw new GatewayTransportError('the operation stream ended without a terminal event; the outcome is unknown', true);
    }
  }

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
      const response = await this.openHttpStream(operation, args);
      if (!response) throw err;
      yield* this.httpStreamEvents(response, args.signal);
    }
  }

  // ---- plumbing -----------------------------------------------------------------------------

  private async readCall(method: 'GET', suffix: string, options: CallOptions): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      try {
        const response = await this.send(method, suffix, undefined, {}, options.signal, false);
        if (response.statusCode === 200) return await this.readBody(response);
        throw await this.errorFrom(response);
      } catch (err) {
        const retryable =
          err instanceof GatewayError && (err.status === 409 || err.status === 503) && Date.now() < this.retryReadsUntil;
        if (!retryable || options.signal?.aborted) throw err;
        await sleep(Math.min(100 * 2 ** attempt, 1000));
      }
    }
  }

  private async mutationCall(
    suffix: string,
    body: unknown,
    headers: Record<string, string> | undefined,
    options: CallOptions,
  ): Promise<string> {
    const response = await this.send('POST', suffix, JSON.stringify(body), headers ?? {}, options.signal, true);
    if (response.statusCode === 200) return await this.readBody(response, true);
    throw await this.errorFrom(response);
  }

  private async send(
    method: 'GET' | 'POST',
    suffix: string,
    body: string | undefined,
    extraHeaders: Record<string, string>,
    signal: AbortSignal | undefined,
    mutation: boolean,
  ): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { accept: 'application/json', ...extraHeaders };
    if (this.authorization) headers.authorization = this.authorization;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await request(this.base + suffix, {
        method,
        headers,
        body,
        dispatcher: this.dispatcher,
        signal,
        headersTimeout: mutation ? MUTATION_HEADERS_TIMEOUT_MS : READ_HEADERS_TIMEOUT_MS,
        bodyTimeout: mutation ? MUTATION_HEADERS_TIMEOUT_MS : READ_HEADERS_TIMEOUT_MS,
      });
    } catch (err) {
      if (isAbort(err, signal)) throw err;
      const unsent = isConnectError(err);
      const what = `${method} ${new URL(this.base).pathname}${suffix.split('?')[0]}`;
      throw new GatewayTransportError(
        mutation && !unsent
          ? `${what} failed in transit; the operation may or may not have run: ${(err as Error).message}`
          : `cannot reach the gateway for ${what}: ${(err as Error).message}`,
        mutation && !unsent,
        { cause: err },
      );
    }
  }

  private async readBody(response: Dispatcher.ResponseData, mutation = false): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.maxResponseBytes) {
          response.body.destroy();
          throw new GatewayProtocolError(`gateway response exceeds ${this.maxResponseBytes} bytes`);
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof GatewayProtocolError) throw err;
      throw new GatewayTransportError(`the gateway response broke off: ${(err as Error).message}`, mutation, { cause: err });
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  private async errorFrom(response: Dispatcher.ResponseData): Promise<GatewayError> {
    let text = '';
    try {
      text = await this.readBody(response);
    } catch {
      // The status alone still says what happened.
    }
    let message = text.trim();
    try {
      const parsed = ErrorBodySchema.safeParse(JSON.parse(text));
      if (parsed.success) message = parsed.data.error;
    } catch {
      // Not JSON (e.g. a 431 from the HTTP server, or a proxy page): keep the text.
    }
    return new GatewayError(response.statusCode, message || `HTTP ${response.statusCode}`);
  }

  private parse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
    const result = schema.safeParse(value);
    if (!result.success) {
      const where = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
      throw new GatewayProtocolError(`unexpected gateway response: ${where}`);
    }
    return result.data;
  }
}

function keyHeader(options: OperationOptions): Record<string, string> {
  return options.idempotencyKey !== undefined ? { 'idempotency-key': options.idempotencyKey } : {};
}

/**
 * Era D's `execute`: the events of one operation folded into the era-C unary answer. Output is
 * taken from the `output` events; `completed.command.stdout`/`stderr` only for a stream that
 * sent none (spec §10.6 a). `failed` becomes the GatewayError era C answers for that gRPC code.
 */
export async function executeFromEvents(events: AsyncIterable<StreamEvent>): Promise<ExecuteResponse> {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  for await (const event of events) {
    if (event.type === 'output' && event.output.data) {
      (event.output.stream === 'stderr' ? stderr : stdout).push(Buffer.from(event.output.data, 'base64'));
    } else if (event.type === 'failed') {
      throw new GatewayError(httpStatusForGrpc(event.failed.code), event.failed.message ?? `operation failed (gRPC code ${event.failed.code})`);
    } else if (event.type === 'completed') {
      const result = event.completed.command;
      if (!result) return event.completed;
      const join = (parts: Buffer[], fallback: string | undefined) => (parts.length > 0 ? Buffer.concat(parts).toString('base64') : fallback);
      const out = join(stdout, result.stdout);
      const err = join(stderr, result.stderr);
      return {
        ...event.completed,
        command: { ...result, ...(out ? { stdout: out } : {}), ...(err ? { stderr: err } : {}) },
      };
    }
  }
  throw new GatewayTransportError('the operation ended without a terminal event; the outcome is unknown', true);
}

function parseJsonOrThrow(text: string, parse: (t: string) => unknown = JSON.parse): unknown {
  try {
    return parse(text);
  } catch {
    throw new GatewayProtocolError(`gateway response is not JSON: ${text.slice(0, 120)}`);
  }
}

export function decodeCommandResult(result: NonNullable<ExecuteResponse['command']>): CommandOutput {
  return {
    exitCode: result.exitCode,
    stdout: result.stdout ? Buffer.from(result.stdout, 'base64') : Buffer.alloc(0),
    stderr: result.stderr ? Buffer.from(result.stderr, 'base64') : Buffer.alloc(0),
    timedOut: result.timedOut === true,
  };
}
