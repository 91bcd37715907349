// The HTTP half of the Runtime access API client (GatewayClient): bounded requests (connection pool, header
// and body timeouts, response caps), read retries inside the window after Ready, error bodies turned into typed
// GatewayErrors, and era C's NDJSON operation stream. Apart from the client so that its public surface — which
// era a call goes over — reads on its own. The requests go through an HttpTransport (httpTransport.ts).
import type { z } from 'zod';
import { isEndpointNotFoundError } from './gatewayEra';
import type { GatewayTlsOptions } from './gatewayTls';
import { ndjsonLines, NdjsonLineError } from './ndjsonLines';
import { ErrorBodySchema, GatewayLimits, type SessionOperation, StreamEventSchema, type StreamEvent } from './gateway';
import { GatewayError, GatewayProtocolError, GatewayTransportError } from './gatewayErrors';
import { type HttpResponse, type HttpTransport, openHttpTransport, readText } from './httpTransport';

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

/** What the transport needs of GatewayClientOptions (see there). */
export interface GatewayHttpOptions {
  base: string;
  token: string | undefined;
  transport: HttpTransport | undefined;
  readRetryWindowMs: number;
  maxResponseBytes: number | undefined;
  tlsOptions: GatewayTlsOptions;
}

const READ_HEADERS_TIMEOUT_MS = 30_000;
/** A command may queue and then run for the 5-minute operation timeout. */
const MUTATION_HEADERS_TIMEOUT_MS = GatewayLimits.maxOperationTimeoutMs + 60_000;
const DEFAULT_MAX_RESPONSE_BYTES = GatewayLimits.maxResponseBodyBytes + 64 * 1024;
const MAX_STREAM_LINE_BYTES = GatewayLimits.maxResponseBodyBytes + 64 * 1024;

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

export class GatewayHttp {
  private readonly base: string;
  private readonly transport: HttpTransport;
  private readonly ownsTransport: boolean;
  private readonly authorization: string | undefined;
  private readonly retryReadsUntil: number;
  private readonly maxResponseBytes: number;

  constructor(options: GatewayHttpOptions) {
    this.base = options.base;
    this.authorization = options.token ? `Bearer ${options.token}` : undefined;
    this.retryReadsUntil = Date.now() + options.readRetryWindowMs;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    if (options.transport) {
      this.transport = options.transport;
      this.ownsTransport = false;
    } else {
      this.transport = openHttpTransport(this.base, { maxConnections: 8, keepAliveMs: 10_000, connectTimeoutMs: 10_000, tls: options.tlsOptions });
      this.ownsTransport = true;
    }
  }

  /** Closes the connection pool if this client made it (a shared transport is left to its owner). */
  async close(): Promise<void> {
    if (this.ownsTransport) await this.transport.close();
  }

  /** POSTs `operations:stream`: the 200 response, or undefined when the gateway is era D. */
  async openStream(operation: SessionOperation, args: OperationOptions): Promise<HttpResponse | undefined> {
    const response = await this.send('POST', '/operations:stream', JSON.stringify(operation), keyHeader(args), args.signal, true);
    if (response.statusCode === 200) return response;
    const error = await this.errorFrom(response);
    if (isEndpointNotFoundError(error)) return undefined;
    throw error;
  }

  async *streamEvents(response: HttpResponse, signal: AbortSignal | undefined): AsyncGenerator<StreamEvent> {
    let sawTerminal = false;
    try {
      for await (const line of ndjsonLines(response.body, MAX_STREAM_LINE_BYTES)) {
        const event = parseGatewayResponse(StreamEventSchema, parseJsonOrThrow(line));
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
      response.destroy();
    }
    if (!sawTerminal) {
      throw new GatewayTransportError('the operation stream ended without a terminal event; the outcome is unknown', true);
    }
  }

  async readCall(method: 'GET', suffix: string, options: CallOptions): Promise<string> {
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

  async mutationCall(
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
  ): Promise<HttpResponse> {
    const headers: Record<string, string> = { accept: 'application/json', ...extraHeaders };
    if (this.authorization) headers.authorization = this.authorization;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await this.transport.request(this.base + suffix, {
        method,
        headers,
        body,
        signal,
        headersTimeoutMs: mutation ? MUTATION_HEADERS_TIMEOUT_MS : READ_HEADERS_TIMEOUT_MS,
        bodyTimeoutMs: mutation ? MUTATION_HEADERS_TIMEOUT_MS : READ_HEADERS_TIMEOUT_MS,
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

  private async readBody(response: HttpResponse, mutation = false): Promise<string> {
    try {
      return await readText(response, this.maxResponseBytes, () => new GatewayProtocolError(`gateway response exceeds ${this.maxResponseBytes} bytes`));
    } catch (err) {
      if (err instanceof GatewayProtocolError) throw err;
      throw new GatewayTransportError(`the gateway response broke off: ${(err as Error).message}`, mutation, { cause: err });
    }
  }

  private async errorFrom(response: HttpResponse): Promise<GatewayError> {
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
}

/** Validates a gateway answer against its schema; a mismatch is a GatewayProtocolError naming where. */
export function parseGatewayResponse<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const where = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new GatewayProtocolError(`unexpected gateway response: ${where}`);
  }
  return result.data;
}

/** The idempotency-key header of an operation, when the caller gave a key. */
export function keyHeader(options: OperationOptions): Record<string, string> {
  return options.idempotencyKey !== undefined ? { 'idempotency-key': options.idempotencyKey } : {};
}

/** Parses a gateway answer as JSON; anything else is a GatewayProtocolError. */
export function parseJsonOrThrow(text: string, parse: (t: string) => unknown = JSON.parse): unknown {
  try {
    return parse(text);
  } catch {
    throw new GatewayProtocolError(`gateway response is not JSON: ${text.slice(0, 120)}`);
  }
}
