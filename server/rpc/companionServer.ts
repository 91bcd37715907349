// The companion server's JSON-RPC endpoint: validates every request against the protocol's
// method table, runs its handler with a cancellation signal and a progress reporter, checks the
// result, and maps failures to JSON-RPC errors with a stable `data.code`. It never dies on a
// bad request.
import {
  type CancellationToken,
  createMessageConnection,
  type MessageConnection,
  ProgressType,
  ResponseError,
  type ResponseMessage,
  StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import {
  CompanionError,
  type CompanionErrorData,
  type CompanionMethodName,
  companionMethods,
  JsonRpcErrorNumber,
  type ParamsOf,
  type ProgressValue,
  ProgressTokenSchema,
  type ResultOf,
  zodIssues,
} from '../../protocol/companion';
import type { Logger } from '../log';
import { FrameError, type FramingLimits, ResilientMessageReader, DEFAULT_FRAMING_LIMITS } from './framing';
import { jsonRpcNumber, toCompanionError } from '../errorMapping';

export interface RequestContext {
  /** Aborted when the client sends `$/cancelRequest` or the connection closes. */
  signal: AbortSignal;
  /** Reports progress when the client passed a `progressToken`; otherwise a no-op. */
  progress(value: ProgressValue): void;
  /** Sends a notification to the client (e.g. streamed provisional events). */
  notify(method: string, params: unknown): void;
  log: Logger;
}

export type MethodHandler<M extends CompanionMethodName> = (params: ParamsOf<M>, ctx: RequestContext) => Promise<ResultOf<M>>;
export type MethodHandlers = { [M in CompanionMethodName]: MethodHandler<M> };

export interface CompanionServerOptions {
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
  handlers: MethodHandlers;
  log: Logger;
  limits?: FramingLimits;
}

export interface CompanionServer {
  connection: MessageConnection;
  /** Resolves when the client closes the input. */
  closed: Promise<void>;
  notify(method: string, params: unknown): Promise<void>;
  dispose(): void;
}

const progressType = new ProgressType<ProgressValue>();

function isMethodName(name: string): name is CompanionMethodName {
  return Object.prototype.hasOwnProperty.call(companionMethods, name);
}

interface ConnectionState {
  connection: MessageConnection;
  handlers: MethodHandlers;
  log: Logger;
  /** The requests in flight, aborted when the connection closes. */
  open: Set<AbortController>;
}

/** Params by name (an object), or by position with the object as the only element, checked against the method's schema. */
function parseParams(method: CompanionMethodName, rawParams: unknown): { params: unknown; data: unknown } | ResponseError<CompanionErrorData> {
  const params: unknown =
    rawParams === undefined || rawParams === null ? {} : Array.isArray(rawParams) && rawParams.length === 1 ? rawParams[0] : rawParams;
  const parsed = companionMethods[method].params.safeParse(params);
  if (!parsed.success) {
    const issues = zodIssues(parsed.error);
    return new ResponseError<CompanionErrorData>(
      JsonRpcErrorNumber.InvalidParams,
      `invalid params for ${method}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { code: 'invalid_params', issues },
    );
  }
  return { params, data: parsed.data };
}

/** A handler's failure as a JSON-RPC error with a stable `data.code` (cancelled when the request was). */
function failureResponse(method: string, err: unknown, cancelled: boolean, log: Logger): ResponseError<CompanionErrorData> {
  if (cancelled) {
    return new ResponseError<CompanionErrorData>(JsonRpcErrorNumber.RequestCancelled, `${method} was cancelled`, {
      code: 'cancelled',
    });
  }
  const mapped = toCompanionError(err);
  if (mapped.code === 'internal') log.error('request failed', { method, error: err instanceof Error ? err.stack : String(err) });
  else log.info('request refused', { method, code: mapped.code, cause: mapped.causeCode });
  return new ResponseError<CompanionErrorData>(
    jsonRpcNumber(mapped.code),
    mapped.message,
    { code: mapped.code, ...(mapped.causeCode !== undefined ? { cause: mapped.causeCode } : {}) },
  );
}

/** One request: method and params checked, the handler run with cancellation and progress, its result checked. */
async function serveRequest(state: ConnectionState, method: string, rawParams: unknown, token: CancellationToken): Promise<unknown> {
  const { connection, log, open } = state;
  if (!isMethodName(method)) {
    return new ResponseError<CompanionErrorData>(JsonRpcErrorNumber.MethodNotFound, `unknown method "${method}"`, {
      code: 'not_found',
    });
  }
  const definition = companionMethods[method];
  const parsed = parseParams(method, rawParams);
  if (parsed instanceof ResponseError) return parsed;
  const params = parsed.params;
  const controller = new AbortController();
  open.add(controller);
  const cancellation = token.onCancellationRequested(() => controller.abort());
  const progressToken = definition.progress ? ProgressTokenSchema.safeParse((params as { progressToken?: unknown }).progressToken) : undefined;
  const sendProgress = (value: ProgressValue) => {
    if (progressToken?.success) void connection.sendProgress(progressType, progressToken.data, value);
  };
  const started = Date.now();
  try {
    const handler = state.handlers[method] as MethodHandler<typeof method>;
    const notify = (m: string, p: unknown) => void connection.sendNotification(m, p);
    const result = await handler(parsed.data as ParamsOf<typeof method>, { signal: controller.signal, progress: sendProgress, notify, log });
    const checked = definition.result.safeParse(result);
    if (!checked.success) {
      log.error('handler returned a result that breaks the protocol', { method, issues: zodIssues(checked.error) });
      return new ResponseError<CompanionErrorData>(JsonRpcErrorNumber.InternalError, `${method} produced an invalid result`, {
        code: 'internal',
      });
    }
    sendProgress({ phase: 'done', percent: 100 });
    log.debug('request done', { method, ms: Date.now() - started });
    return checked.data;
  } catch (err) {
    return failureResponse(method, err, controller.signal.aborted, log);
  } finally {
    cancellation.dispose();
    open.delete(controller);
  }
}

export function startCompanionServer(options: CompanionServerOptions): CompanionServer {
  const { log } = options;
  const reader = new ResilientMessageReader(options.input, options.limits ?? DEFAULT_FRAMING_LIMITS);
  const writer = new StreamMessageWriter(options.output);
  const connection = createMessageConnection(reader, writer, {
    error: (m) => log.error(m),
    warn: (m) => log.warn(m),
    info: (m) => log.debug(m),
    log: (m) => log.debug(m),
  });
  const open = new Set<AbortController>();

  reader.onError((err) => {
    log.warn('bad input from client', { error: err.message });
    if (err instanceof FrameError && err.parseError) {
      const reply: ResponseMessage = { jsonrpc: '2.0', id: null, error: { code: JsonRpcErrorNumber.ParseError, message: err.message } };
      void writer.write(reply);
    }
  });

  const state: ConnectionState = { connection, handlers: options.handlers, log, open };
  connection.onRequest((method, rawParams, token) => serveRequest(state, method, rawParams, token));

  const closed = new Promise<void>((resolve) => {
    const finish = () => {
      for (const c of open) c.abort();
      resolve();
    };
    connection.onClose(finish);
    // LSP lifecycle, for clients such as vscode-languageclient.
    connection.onNotification('exit', finish);
  });
  connection.onNotification('initialized', () => log.debug('client initialized'));
  connection.listen();
  return {
    connection,
    closed,
    notify: (method, params) => connection.sendNotification(method, params),
    dispose: () => connection.dispose(),
  };
}

export { CompanionError };
