// The one client of the Runtime access API, used for a kruntimes gateway and the local gateway
// alike: bounded (connection limits, timeouts, response caps), typed errors, reads retried
// briefly after Ready (informer lag), mutations never retried (a transport failure means the
// outcome is unknown).
import { Agent, type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { parseJsonWithBigInts } from './goJson';
import {
  CancelResponseSchema,
  type CancelResponse,
  ErrorBodySchema,
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

function decodeCaBundle(caBundle: string): string {
  const trimmed = caBundle.trim();
  if (trimmed.startsWith('-----BEGIN')) return trimmed;
  return Buffer.from(trimmed, 'base64').toString('utf8');
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
    this.authorization = options.token ? `Bearer ${options.token}` : undefined;
    this.retryReadsUntil = Date.now() + (options.readRetryWindowMs ?? 0);
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    if (options.dispatcher) {
      this.dispatcher = options.dispatcher;
      this.ownsDispatcher = false;
    } else {
      const ca = options.endpoint.caBundle ? decodeCaBundle(options.endpoint.caBundle) : undefined;
      this.dispatcher = new Agent({
        connections: 8,
        pipelining: 1,
        keepAliveTimeout: 10_000,
        keepAliveMaxTimeout: 60_000,
        connect: {
          timeout: 10_000,
          ...(ca ? { ca } : {}),
          ...(options.tls?.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
          ...(options.tls?.servername ? { servername: options.tls.servername } : {}),
        },
      });
      this.ownsDispatcher = true;
    }
  }

  /** Closes the client's own connection pool (a shared dispatcher is left to its owner). */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
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

  /** `operations:execute` with one operation; the raw 200 body. */
  async execute(operation: SessionOperation, options: CallOptions = {}): Promise<ExecuteResponse> {
    const text = await this.mutationCall('/operations:execute', operation, undefined, options);
    return this.parse(ExecuteResponseSchema, parseJsonOrThrow(text));
  }

  /** Runs a command and decodes its output. A non-zero exit is a result, not an error. */
  async runCommand(command: SessionCommand, options: CallOptions = {}): Promise<CommandOutput> {
    const response = await this.execute({ command }, options);
    if (!response.command) throw new GatewayProtocolError('command response has no "command" result');
    return decodeCommandResult(response.command);
  }

  async writeFile(path: string, contents: Uint8Array, args: { createParents?: boolean } = {}, options: CallOptions = {}) {
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

  async createDirectory(path: string, options: CallOptions = {}): Promise<void> {
    await this.execute({ createDirectory: { path } }, options);
  }

  async deleteFile(path: string, args: { recursive?: boolean } = {}, options: CallOptions = {}): Promise<void> {
    await this.execute({ deleteFile: { path, ...(args.recursive !== undefined ? { recursive: args.recursive } : {}) } }, options);
  }

  async renameFile(
    sourcePath: string,
    destinationPath: string,
    args: { overwrite?: boolean } = {},
    options: CallOptions = {},
  ): Promise<void> {
    await this.execute(
      { renameFile: { sourcePath, destinationPath, ...(args.overwrite !== undefined ? { overwrite: args.overwrite } : {}) } },
      options,
    );
  }

  /**
   * `operations:stream`: NDJSON events until `completed` or `failed`. Aborting the signal
   * closes the stream, which cancels the operation on the server.
   */
  async *stream(
    operation: SessionOperation,
    args: { idempotencyKey?: string } & CallOptions = {},
  ): AsyncGenerator<StreamEvent> {
    const headers: Record<string, string> = {};
    if (args.idempotencyKey !== undefined) headers['idempotency-key'] = args.idempotencyKey;
    const response = await this.send('POST', '/operations:stream', JSON.stringify(operation), headers, args.signal, true);
    if (response.statusCode !== 200) {
      throw await this.errorFrom(response);
    }
    let pending: Buffer = Buffer.alloc(0);
    let sawTerminal = false;
    try {
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let newline: number;
        while ((newline = pending.indexOf(0x0a)) !== -1) {
          const line = pending.subarray(0, newline).toString('utf8');
          pending = pending.subarray(newline + 1);
          if (line.trim() === '') continue;
          const event = this.parse(StreamEventSchema, parseJsonOrThrow(line));
          if (event.type === 'completed' || event.type === 'failed') sawTerminal = true;
          yield event;
        }
        if (pending.length > MAX_STREAM_LINE_BYTES) {
          throw new GatewayProtocolError(`stream line exceeds ${MAX_STREAM_LINE_BYTES} bytes`);
        }
      }
    } catch (err) {
      if (err instanceof GatewayProtocolError || isAbort(err, args.signal)) throw err;
      throw new GatewayTransportError(
        `the operation stream broke before it ended; the outcome is unknown: ${(err as Error).message}`,
        true,
        { cause: err },
      );
    } finally {
      if (!response.body.destroyed) response.body.destroy();
    }
    if (pending.toString('utf8').trim() !== '') throw new GatewayProtocolError('stream ended inside an event line');
    if (!sawTerminal) {
      throw new GatewayTransportError('the operation stream ended without a terminal event; the outcome is unknown', true);
    }
  }

  /** Local-gateway extension: cancel an operation by id from any process. */
  async cancelOperation(operationId: string, options: CallOptions = {}): Promise<CancelResponse['result']> {
    const text = await this.mutationCall(`/operations/${encodeURIComponent(operationId)}:cancel`, {}, undefined, options);
    return this.parse(CancelResponseSchema, parseJsonOrThrow(text)).result;
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
