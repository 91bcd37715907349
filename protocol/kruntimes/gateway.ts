// The Runtime access (gateway) HTTP API of kruntimes session mode (spec §2): requests,
// responses, errors, limits and NDJSON stream events. The local gateway serves the same
// shapes, plus a few extensions it advertises under `capabilities` in the status response.
import { z } from 'zod';

// Every schema here is wrapped in z.lazy and built on first parse: zod 4 binds each method to each
// schema instance, and building them all at load cost the CLI's `sandbox exec` and the gateway
// daemon's start several milliseconds and ~0.9 MB of heap for schemas most processes never use
// (issue 25). The inferred types are those of the wrapped schemas.

/**
 * Standard base64 with `=` padding, as Go encodes []byte (URL-safe or unpadded is rejected).
 * Checked without a grouped regex: on a 1 MB body that regex costs ~9 ms, this ~0.6 ms.
 */
export function isPaddedBase64(s: string): boolean {
  if (s.length % 4 !== 0 || /[^A-Za-z0-9+/=]/.test(s)) return false;
  const eq = s.indexOf('=');
  return eq < 0 || eq === s.length - 1 || (eq === s.length - 2 && s[s.length - 1] === '=');
}
export const Base64Schema = z.lazy(() => z.string().refine(isPaddedBase64, 'must be padded standard base64'));

export const GatewayLimits = {
  /** Request JSON body cap (DefaultMaxRequestBodyBytes). */
  maxRequestBodyBytes: 1 << 20,
  /** Response JSON cap (era C). */
  maxResponseBodyBytes: 1 << 20,
  /** stdout / stderr cap of the built-in Runtime Servers, each. */
  maxOutputBytes: 1 << 20,
  /** File read and write cap of the Runtime Server. */
  maxFileBytes: 1 << 20,
  /** The largest raw read that fits a 1 MiB base64 response (spec §2.4: send maxBytes ≤ 786000). */
  maxReadBytes: 786_000,
  /** A raw write that still fits the 1 MiB request cap after base64 and JSON framing. */
  maxWriteBytes: 786_000,
  listDefaultLimit: 100,
  listMaxLimit: 1000,
  maxQueueSize: 32,
  maxOperationTimeoutMs: 5 * 60_000,
  maxConcurrentRequests: 128,
  terminationGraceMs: 2000,
  /** Bash streams output chunks of at most 32 KiB. */
  streamChunkBytes: 32 * 1024,
} as const;

export const OUTPUT_TRUNCATED_MARKER = '\n[output truncated]\n';

/** Gateway and Runtime Server error texts a client sees (spec §2.3, §2.7–2.10, §3). */
export const GatewayMessages = {
  endpointNotFound: 'endpoint not found',
  sessionRunNotFound: 'Session Run not found',
  notReady: (phase: string) => `Session Run is ${phase}, not Ready`,
  bearerRequired: 'bearer token is required unless a verified client certificate is presented',
  bearerNotAuthenticated: 'bearer token is not authenticated',
  notAuthorized: 'not authorized to access Session Run',
  methodNotAllowed: 'method not allowed',
  concurrencyLimit: 'gateway request concurrency limit reached',
  requestTooLarge: 'gateway request body exceeds configured limit',
  responseTooLarge: 'gateway response exceeds configured limit',
  unknownField: (name: string) => `decode request: json: unknown field "${name}"`,
  oneJsonValue: 'request must contain one JSON value',
  exactlyOneOperation: 'exactly one session operation is required',
  exactlyOneArgvOrShell: 'exactly one of argv or shell is required',
  limitPositive: 'limit must be a positive integer',
  limitRange: 'limit must be between 1 and 1000',
  maxBytesPositive: 'maxBytes must be a positive integer',
  pathRequired: 'file path is required',
  pathRelative: 'file path must be workspace-relative',
  pathEscape: 'file path must not escape the workspace',
  pathSymlinkEscape: 'file path must not escape the session workspace',
  pathRoot: 'file path must not be the workspace root',
  recursiveRequired: 'recursive must be true to delete a directory',
  destinationExists: 'destination already exists',
  queueFull: 'session operation queue is full',
  finalizing: 'session is finalizing',
  sessionNotFound: 'session not found',
  sessionClosed: 'session closed',
  deadlineExceeded: 'context deadline exceeded',
  contentsTooLarge: 'file contents exceed the Runtime Server transfer limit',
  cursorInvalid: 'session operation cursor must be a non-negative integer',
  idempotencyKeyTooLong: 'idempotency key exceeds 128 bytes',
  idempotencyKeyCharacters: 'idempotency key contains unsupported characters',
} as const;

/** gRPC status codes, as carried by `failed.code` and mapped to HTTP statuses. */
export const GrpcCode = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;
export type GrpcCodeName = keyof typeof GrpcCode;

/** writeGatewayError's gRPC → HTTP table (spec §2.3). */
export function httpStatusForGrpc(code: number): number {
  switch (code) {
    case GrpcCode.InvalidArgument:
      return 400;
    case GrpcCode.Unauthenticated:
      return 401;
    case GrpcCode.PermissionDenied:
      return 403;
    case GrpcCode.NotFound:
      return 404;
    case GrpcCode.FailedPrecondition:
      return 409;
    case GrpcCode.ResourceExhausted:
      return 429;
    case GrpcCode.DeadlineExceeded:
      return 504;
    case GrpcCode.Unavailable:
      return 503;
    default:
      return 500;
  }
}

export const ErrorBodySchema = z.lazy(() => z.object({ error: z.string() }));
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

// ---- status -------------------------------------------------------------------------------

export const SessionStateSchema = z.lazy(() =>
  z.enum([
    'SESSION_STATE_UNSPECIFIED',
    'SESSION_STATE_REGISTERING',
    'SESSION_STATE_READY',
    'SESSION_STATE_CLOSING',
    'SESSION_STATE_CLOSED',
    'SESSION_STATE_FAILED',
  ]),
);
export type SessionState = z.infer<typeof SessionStateSchema>;

/** Extensions the local gateway serves beyond kruntimes; absent on a cluster. */
export const GatewayCapabilitiesSchema = z.lazy(() =>
  z.looseObject({
    /** `GET files/{path}?offset=&length=` */
    rangedReads: z.boolean().optional(),
    /** `POST operations/{id}:cancel` */
    cancel: z.boolean().optional(),
    /** `command.isolateNetwork` */
    isolateNetwork: z.boolean().optional(),
    /** Which backend runs commands and what it isolates. */
    backend: z.string().optional(),
    /** `GET P/pty`: an interactive terminal (terminalSocket.ts), where the sandbox has a PTY. */
    terminal: z.boolean().optional(),
  }),
);
export type GatewayCapabilities = z.infer<typeof GatewayCapabilitiesSchema>;

export const SessionStatusSchema = z.lazy(() =>
  z.looseObject({
    state: SessionStateSchema,
    /** int64 nanoseconds; parsed as bigint because it exceeds Number.MAX_SAFE_INTEGER. */
    lastActivityUnixNano: z.bigint().optional(),
    fatalError: z.string().optional(),
    capabilities: GatewayCapabilitiesSchema.optional(),
  }),
);
export type SessionStatus = z.infer<typeof SessionStatusSchema>;
export const STATUS_BIGINT_FIELDS: ReadonlySet<string> = new Set(['lastActivityUnixNano']);

// ---- operations ---------------------------------------------------------------------------

export const SessionCommandSchema = z.lazy(() =>
  z.strictObject({
    argv: z.array(z.string()).optional(),
    shell: z.string().optional(),
    workingDirectory: z.string().optional(),
    env: z.record(z.string(), z.string()).optional(),
    stdin: Base64Schema.optional(),
    timeoutMillis: z.number().int().min(0).optional(),
    /** Local-gateway extension: run with only a loopback network (refused by backends that cannot). */
    isolateNetwork: z.boolean().optional(),
  }),
);
export type SessionCommand = z.infer<typeof SessionCommandSchema>;

export const WriteFileSchema = z.lazy(() =>
  z.strictObject({
    path: z.string(),
    contents: Base64Schema.nullable().optional(),
    createParents: z.boolean().optional(),
  }),
);
export const CreateDirectorySchema = z.lazy(() => z.strictObject({ path: z.string() }));
export const DeleteFileSchema = z.lazy(() => z.strictObject({ path: z.string(), recursive: z.boolean().optional() }));
export const RenameFileSchema = z.lazy(() =>
  z.strictObject({
    sourcePath: z.string(),
    destinationPath: z.string(),
    overwrite: z.boolean().optional(),
  }),
);

/** The execute/stream body: exactly one of these keys (checked by `operationKind`). */
export const SessionOperationSchema = z.lazy(() =>
  z.strictObject({
    command: SessionCommandSchema.optional(),
    writeFile: WriteFileSchema.optional(),
    createDirectory: CreateDirectorySchema.optional(),
    deleteFile: DeleteFileSchema.optional(),
    renameFile: RenameFileSchema.optional(),
  }),
);
export type SessionOperation = z.infer<typeof SessionOperationSchema>;
export const OPERATION_KINDS = ['command', 'writeFile', 'createDirectory', 'deleteFile', 'renameFile'] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

/** The single operation key of a body, or undefined when there is not exactly one. */
export function operationKind(op: SessionOperation): OperationKind | undefined {
  const present = OPERATION_KINDS.filter((k) => op[k] !== undefined && op[k] !== null);
  return present.length === 1 ? present[0] : undefined;
}

export const CommandResultSchema = z.lazy(() =>
  z.looseObject({
    exitCode: z.number().int(),
    stdout: Base64Schema.optional(),
    stderr: Base64Schema.optional(),
    timedOut: z.boolean().optional(),
  }),
);
export type CommandResult = z.infer<typeof CommandResultSchema>;

/** 200 body of `operations:execute`: `{command: …}` for a command, `{}` for a file mutation. */
export const ExecuteResponseSchema = z.lazy(() =>
  z.looseObject({
    command: CommandResultSchema.optional(),
  }),
);
export type ExecuteResponse = z.infer<typeof ExecuteResponseSchema>;

// ---- files --------------------------------------------------------------------------------

export const FileEntrySchema = z.lazy(() =>
  z.looseObject({
    /** The bare child name, not a relative path. */
    path: z.string(),
    directory: z.boolean().optional(),
    sizeBytes: z.number().int().min(0).optional(),
  }),
);
export type FileEntry = z.infer<typeof FileEntrySchema>;

export const ListResponseSchema = z.lazy(() =>
  z.looseObject({
    entries: z.array(FileEntrySchema),
    /** Always present; "" means last page. */
    nextPageToken: z.string(),
  }),
);
export type ListResponse = z.infer<typeof ListResponseSchema>;

export const ReadResponseSchema = z.lazy(() =>
  z.looseObject({
    /** null for an empty file (a proto3 empty bytes field arrives as nil). */
    contents: Base64Schema.nullable(),
    truncated: z.boolean(),
  }),
);
export type ReadResponse = z.infer<typeof ReadResponseSchema>;

/** Local-gateway extension: `POST P/operations/{id}:cancel`. */
export const CancelResponseSchema = z.lazy(() =>
  z.looseObject({
    result: z.enum(['cancelled', 'ended', 'unknown']),
  }),
);
export type CancelResponse = z.infer<typeof CancelResponseSchema>;

// ---- stream events (NDJSON, era C) ---------------------------------------------------------

/** Era D's gateway may also send `unspecified` (its default mapping, spec §10.5). */
export const ProgressKindSchema = z.lazy(() => z.enum(['status', 'text_delta', 'tool_call_started', 'tool_call_finished', 'unspecified']));

export const StreamEventSchema = z.lazy(() =>
  z.discriminatedUnion('type', [
    z.looseObject({
      sequence: z.number().int().min(1),
      type: z.literal('accepted'),
      accepted: z.looseObject({ operationID: z.string() }),
    }),
    z.looseObject({
      sequence: z.number().int().min(1),
      type: z.literal('output'),
      output: z.looseObject({ stream: z.enum(['stdout', 'stderr', 'unspecified']), data: Base64Schema.optional() }),
    }),
    z.looseObject({
      sequence: z.number().int().min(1),
      type: z.literal('progress'),
      progress: z.looseObject({
        kind: ProgressKindSchema,
        message: z.string().optional(),
        toolCallID: z.string().optional(),
        toolName: z.string().optional(),
        data: Base64Schema.optional(),
        contentType: z.string().optional(),
      }),
    }),
    z.looseObject({
      sequence: z.number().int().min(1),
      type: z.literal('completed'),
      completed: ExecuteResponseSchema,
    }),
    z.looseObject({
      sequence: z.number().int().min(1),
      type: z.literal('failed'),
      failed: z.looseObject({ code: z.number().int(), message: z.string().optional() }),
    }),
  ]),
);
export type StreamEvent = z.infer<typeof StreamEventSchema>;

export const NDJSON_CONTENT_TYPE = 'application/x-ndjson; charset=utf-8';
export const JSON_CONTENT_TYPE = 'application/json';

/** `Idempotency-Key`: ≤ 128 chars of [A-Za-z0-9._-]. */
export function checkIdempotencyKey(key: string): string | undefined {
  if (Buffer.byteLength(key) > 128) return GatewayMessages.idempotencyKeyTooLong;
  if (!/^[A-Za-z0-9._-]*$/.test(key)) return GatewayMessages.idempotencyKeyCharacters;
  return undefined;
}
