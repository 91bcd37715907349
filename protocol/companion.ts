// The companion server's JSON-RPC contract: every method's name, params and result as zod
// schemas, notifications, and one error-code enum. The server validates each request against
// this table and any editor (VS Code or a script) can drive the server from it alone.
import { z } from 'zod';

export const COMPANION_PROTOCOL_VERSION = 1;

/** Stable error codes carried in JSON-RPC `error.data.code`. */
export const CompanionErrorCodeSchema = z.enum([
  'invalid_params',
  'not_found',
  'conflict',
  'not_ready',
  'unavailable',
  'cancelled',
  'refused',
  'internal',
]);
export type CompanionErrorCode = z.infer<typeof CompanionErrorCodeSchema>;

/** JSON-RPC numeric codes: the reserved ones, and one application range for our stable codes. */
export const JsonRpcErrorNumber = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  RequestCancelled: -32800,
  /** Every application error; `data.code` says which. */
  ApplicationError: -32000,
} as const;

export const CompanionErrorDataSchema = z.object({
  code: CompanionErrorCodeSchema,
  /** For invalid params: where (zod issue paths) and why. */
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  /** A lower-level stable code, e.g. a bundle error code or a gateway status. */
  cause: z.string().optional(),
});
export type CompanionErrorData = z.infer<typeof CompanionErrorDataSchema>;

/** `$/progress` value: a phase name and, where known, bytes done of a total. */
export const ProgressValueSchema = z.object({
  phase: z.string(),
  message: z.string().optional(),
  bytesDone: z.number().int().min(0).optional(),
  bytesTotal: z.number().int().min(0).optional(),
  /** 0..100; the last notification of a successful request is 100. */
  percent: z.number().min(0).max(100).optional(),
});
export type ProgressValue = z.infer<typeof ProgressValueSchema>;

export const ProgressTokenSchema = z.union([z.string(), z.number().int()]);

/** Adds the optional client progress token to a progress-reporting method's params. */
export function withProgressToken<S extends z.ZodObject>(params: S) {
  return params.extend({ progressToken: ProgressTokenSchema.optional() });
}

/** An application error with a stable code; the server sends it as JSON-RPC error -32000. */
export class CompanionError extends Error {
  override readonly name = 'CompanionError';
  constructor(
    readonly code: CompanionErrorCode,
    message: string,
    readonly causeCode?: string,
  ) {
    super(message);
  }
}

export interface MethodExample {
  params: unknown;
  result: unknown;
}

export interface MethodDefinition<P extends z.ZodType, R extends z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly params: P;
  readonly result: R;
  /** Whether the method reports `$/progress` when the caller passes a progress token. */
  readonly progress: boolean;
  /** A request and response for docs/protocol.md (checked against the schemas by a test). */
  readonly example: MethodExample;
}

/** Declares one method; the table below is built only from these. */
export function defineMethod<P extends z.ZodType, R extends z.ZodType>(
  name: string,
  definition: { description: string; params: P; result: R; progress?: boolean; example: MethodExample },
): MethodDefinition<P, R> {
  return { name, progress: false, ...definition };
}

export interface NotificationDefinition<P extends z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly params: P;
  readonly example: unknown;
}

export function defineNotification<P extends z.ZodType>(
  name: string,
  definition: { description: string; params: P; example: unknown },
): NotificationDefinition<P> {
  return { name, ...definition };
}


/**
 * `initialize` takes our own fields, or the Language Server Protocol's (`clientInfo`, `processId`,
 * `capabilities`…) so that vscode-languageclient can start and supervise the server unchanged.
 */
export const InitializeParamsSchema = z
  .looseObject({
    clientName: z.string().min(1).optional(),
    clientVersion: z.string().optional(),
    protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION).optional(),
    clientInfo: z.looseObject({ name: z.string().min(1), version: z.string().optional() }).optional(),
    processId: z.number().int().nullable().optional(),
  })
  .refine((p) => p.clientName !== undefined || p.clientInfo !== undefined, {
    message: 'clientName (or LSP clientInfo.name) is required',
    path: ['clientName'],
  });

export const InitializeResultSchema = z.object({
  serverVersion: z.string(),
  protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION),
  nodeVersion: z.string(),
  methods: z.array(z.string()),
  /** LSP fields, for clients that speak the LSP lifecycle. */
  serverInfo: z.object({ name: z.string(), version: z.string() }),
  capabilities: z.object({}),
});

/**
 * The method table. Later features add their methods here; the server must implement every
 * entry, and `docs/protocol.md` is checked against it.
 */
export const companionMethods = {
  initialize: defineMethod('initialize', {
    description: 'Handshake: versions and the methods this server implements.',
    params: InitializeParamsSchema,
    result: InitializeResultSchema,
    example: {
      params: { clientName: 'example-client', clientVersion: '1.0.0', protocolVersion: 1 },
      result: {
        serverVersion: '0.1.0',
        protocolVersion: 1,
        nodeVersion: 'v24.18.1',
        methods: ['initialize', 'shutdown'],
        serverInfo: { name: 'sandbox-sessions', version: '0.1.0' },
        capabilities: {},
      },
    },
  }),
  shutdown: defineMethod('shutdown', {
    description:
      'LSP lifecycle: the client is about to send the `exit` notification. Running requests are cancelled; the ' +
      'local gateway daemon and its sandboxes keep running.',
    params: z.union([z.object({}), z.null()]).optional(),
    result: z.null(),
    example: { params: null, result: null },
  }),
} as const;

export type CompanionMethods = typeof companionMethods;
export type CompanionMethodName = keyof CompanionMethods;
export type ParamsOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['params']>;
export type ResultOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['result']>;

export const companionNotifications = {} as const;

/** Formats zod issues as the `issues` of an InvalidParams error. */
export function zodIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.') || '(root)', message: issue.message }));
}
