// The companion protocol's contract machinery: the protocol version, the stable error codes and their JSON-RPC
// numbers, `$/progress` values, and `defineMethod`/`defineNotification`, from which every feature file under
// protocol/companion/ declares its part of the method table (assembled in index.ts).
import { z } from 'zod';
import { SandboxSessionsError } from '../errors';

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
  /**
   * A batch of partial results, for a method that streams them (`sandboxes/search`: parse it with
   * `SearchPartialSchema` from protocol/search.ts).
   */
  partial: z.unknown().optional(),
});
export type ProgressValue = z.infer<typeof ProgressValueSchema>;

export const ProgressTokenSchema = z.union([z.string(), z.number().int()]);

/** Adds the optional client progress token to a progress-reporting method's params. */
export function withProgressToken<Shape extends z.ZodRawShape>(params: z.ZodObject<Shape>) {
  return params.extend({ progressToken: ProgressTokenSchema.optional() });
}

/** An application error with a stable code; the server sends it as JSON-RPC error -32000. */
export class CompanionError extends SandboxSessionsError<CompanionErrorCode> {
  override readonly name = 'CompanionError';
  readonly service = 'companion';
  constructor(
    code: CompanionErrorCode,
    message: string,
    /** The service's own code this was mapped from (JSON-RPC `error.data.cause`). */
    readonly causeCode?: string,
  ) {
    super(code, message);
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

/** Declares one method; the method table (index.ts) is built only from these. */
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

/** Formats zod issues as the `issues` of an InvalidParams error. */
export function zodIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.') || '(root)', message: issue.message }));
}
