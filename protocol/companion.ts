// The companion server's JSON-RPC contract: every method's name, params and result as zod
// schemas, notifications, and one error-code enum. The server validates each request against
// this table and any editor (VS Code or a script) can drive the server from it alone.
import { z } from 'zod';
import { RunSchema, TerminationModeSchema } from './kruntimes/run';
import {
  SessionBundleArtifactSchema,
  SessionBundleHydrationSchema,
  SessionBundleInspectionSchema,
  Sha256DigestSchema,
  WorkspaceSnapshotReportSchema,
} from './bundle';
import { ActivationEventSchema, ActivationResultSchema, ActivationRunRequestSchema, ForkRequestSchema, ForkResultSchema } from './activation';
import {
  CommittedSessionRevisionSchema,
  IdentifierSchema,
  RevisionSchema,
  RevisionSummarySchema,
  SessionSummarySchema,
} from './repository';
import {
  DownloadedArtifactSchema,
  ProviderInfoSchema,
  ProviderKindSchema,
  SandboxChangedSchema,
  SandboxConnectionSchema,
  SandboxCreateSpecSchema,
  SandboxRefSchema,
  SandboxSummarySchema,
} from './sandboxes';
import { RunLogQueryFields, SINCE_EXCLUSIVE_MESSAGE, sinceExclusive } from './kruntimes/runtimedLog';

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
export function withProgressToken<Shape extends z.ZodRawShape>(params: z.ZodObject<Shape>) {
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
 * `capabilities`…) so that vscode-languageclient — or any LSP client — can start and supervise the
 * server unchanged. Every field is optional, as in LSP's InitializeParams (where `clientInfo` is
 * optional too); a client that names itself neither way is called DEFAULT_CLIENT_NAME.
 */
export const InitializeParamsSchema = z.looseObject({
  clientName: z.string().min(1).optional(),
  clientVersion: z.string().optional(),
  protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION).optional(),
  clientInfo: z.looseObject({ name: z.string().min(1), version: z.string().optional() }).optional(),
  processId: z.number().int().nullable().optional(),
});
export type InitializeParams = z.infer<typeof InitializeParamsSchema>;

/** The name of a client whose `initialize` has neither `clientName` nor LSP `clientInfo.name`. */
export const DEFAULT_CLIENT_NAME = 'unknown client';

/** Who is connecting, for logs: our `clientName`, else LSP `clientInfo.name`, else DEFAULT_CLIENT_NAME. */
export function initializeClient(params: InitializeParams): { name: string; version?: string } {
  const name = params.clientName ?? params.clientInfo?.name ?? DEFAULT_CLIENT_NAME;
  const version = params.clientName !== undefined ? params.clientVersion : params.clientInfo?.version;
  return version !== undefined ? { name, version } : { name };
}

export const InitializeResultSchema = z.object({
  serverVersion: z.string(),
  protocolVersion: z.literal(COMPANION_PROTOCOL_VERSION),
  nodeVersion: z.string(),
  methods: z.array(z.string()),
  /** LSP fields, for clients that speak the LSP lifecycle. */
  serverInfo: z.object({ name: z.string(), version: z.string() }),
  capabilities: z.object({}),
});

/** The checkpoint of the examples below: Maka's golden fixture bundle, as the file repository stores it. */
const EXAMPLE_CHECKPOINT = {
  manifest: {
    objectRef: 'maka-local-object://v1/9f2c',
    digest: 'sha256:0cd8b83b480b1566b63210484b536ccd9710d9c69cdc8552ebeb04c4f245e30c',
    bytes: 321,
    mediaType: 'application/vnd.maka.session-checkpoint-manifest+json;version=1',
  },
  value: {
    schemaVersion: 1,
    compatibilityBundle: {
      objectRef: 'maka-local-object://v1/56aadf143fb7072bfbba169941c43f397948f3a7569524aeee5109aeb20fbecd',
      digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
      bytes: 676,
      mediaType: 'application/vnd.maka.session-bundle+tar;version=1;compression=zstd',
    },
  },
};

/**
 * The method table. Later features add their methods here; the server must implement every
 * entry, and `docs/protocol.md` is checked against it.
 */
export const companionMethods = {
  initialize: defineMethod('initialize', {
    description:
      'Handshake: versions and the methods this server implements. Params are our own fields or LSP ' +
      '`InitializeParams` (`processId`, `clientInfo`, `rootUri`, `capabilities`…); every field is optional, and a ' +
      `client that gives neither \`clientName\` nor \`clientInfo.name\` is logged as "${DEFAULT_CLIENT_NAME}".`,
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
  'providers/list': defineMethod('providers/list', {
    description: 'The sandbox providers, whether each works here (and why not), their contexts, namespaces and runtimes.',
    params: z.object({}),
    result: z.object({ providers: z.array(ProviderInfoSchema) }),
    example: {
      params: {},
      result: {
        providers: [
          {
            kind: 'local',
            label: 'Local',
            available: true,
            contexts: [{ name: 'local', namespaces: ['default'] }],
            runtimes: [
              { name: 'process', isolation: 'no isolation: a new process group per command', available: true },
              { name: 'bubblewrap', isolation: 'Linux namespaces through bwrap', available: false, reason: 'bwrap is not installed' },
            ],
          },
        ],
      },
    },
  }),
  'sandboxes/list': defineMethod('sandboxes/list', {
    description: 'Session Runs of one provider (optionally one context and namespace), with phase, reason and timeouts.',
    params: z.object({ provider: ProviderKindSchema, context: z.string().optional(), namespace: z.string().optional() }),
    result: z.object({ sandboxes: z.array(SandboxSummarySchema) }),
    example: {
      params: { provider: 'local' },
      result: {
        sandboxes: [
          {
            ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
            key: 'local.local.default.sbx-7k2p9',
            uid: '0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10',
            runtime: 'process',
            phase: 'Ready',
            reason: 'SessionRegistered',
            message: 'session registered',
            idleTimeoutSeconds: 1800,
          },
        ],
      },
    },
  }),
  'sandboxes/create': defineMethod('sandboxes/create', {
    description: 'Creates a session Run and, unless `waitForReady` is false, waits until it is Ready (or fails with its reason).',
    params: withProgressToken(
      z.object({ spec: SandboxCreateSpecSchema, waitForReady: z.boolean().default(true), timeoutSeconds: z.number().int().min(1).max(3600).optional() }),
    ),
    result: z.object({ sandbox: SandboxSummarySchema }),
    progress: true,
    example: {
      params: { spec: { provider: 'local', namespace: 'default', runtime: 'process', idleTimeoutSeconds: 1800 } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Ready',
        },
      },
    },
  }),
  'sandboxes/get': defineMethod('sandboxes/get', {
    description: 'One sandbox: its summary and the full Run object.',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({ sandbox: SandboxSummarySchema, run: RunSchema }),
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Ready',
        },
        run: {
          apiVersion: 'kruntimes.io/v1alpha1',
          kind: 'Run',
          metadata: { name: 'sbx-7k2p9', namespace: 'default', uid: '0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10' },
          spec: { runtime: 'process', mode: { session: {} } },
          status: { phase: 'Ready', message: 'session registered' },
        },
      },
    },
  }),
  'sandboxes/open': defineMethod('sandboxes/open', {
    description:
      'What the data plane needs to use a Ready sandbox: its gateway endpoint (and CA bundle), a bearer token, and the ' +
      "gateway's extension capabilities. Refused with the kruntimes SDK messages for a non-session, non-Ready or mismatched Run.",
    params: z.object({ ref: SandboxRefSchema }),
    result: SandboxConnectionSchema,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } },
      result: {
        endpoint: { url: 'http://127.0.0.1:41235/v1/namespaces/default/runtimes/process/sessions/0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10' },
        token: '<bearer token>',
        capabilities: { rangedReads: true, cancel: true, isolateNetwork: false, backend: 'process' },
      },
    },
  }),
  'sandboxes/release': defineMethod('sandboxes/release', {
    description:
      "Ends this server's hold on a sandbox it opened: the session lease heartbeats stop, so a sandbox created with " +
      '`leaseTimeoutSeconds` expires once no other client holds its lease. The sandbox itself keeps running; `sandboxes/open` ' +
      'holds it again. `released` is false when this server held no lease for it.',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({ released: z.boolean() }),
    example: { params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } }, result: { released: true } },
  }),
  'sandboxes/terminate': defineMethod('sandboxes/terminate', {
    description:
      'Closes a sandbox: `Drain` finishes accepted work and exports its artifacts (ends Succeeded), `Immediate` cancels ' +
      'everything (ends Cancelled). With `wait`, returns when the Run is terminal. A downgrade (Immediate → Drain) is refused.',
    params: withProgressToken(
      z.object({ ref: SandboxRefSchema, mode: TerminationModeSchema, wait: z.boolean().default(true), timeoutSeconds: z.number().int().min(1).max(3600).optional() }),
    ),
    result: z.object({ sandbox: SandboxSummarySchema }),
    progress: true,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, mode: 'Drain' },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
          key: 'local.local.default.sbx-7k2p9',
          runtime: 'process',
          phase: 'Succeeded',
          reason: 'SessionCompleted',
          message: 'session finalized',
          terminationMode: 'Drain',
        },
      },
    },
  }),
  'sandboxes/delete': defineMethod('sandboxes/delete', {
    description: 'Deletes a sandbox Run and its records (a running one is cancelled first).',
    params: z.object({ ref: SandboxRefSchema }),
    result: z.object({}),
    example: { params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' } }, result: {} },
  }),
  'sandboxes/artifacts/download': defineMethod('sandboxes/artifacts/download', {
    description:
      "Downloads a finished sandbox's exported artifacts into a local folder, verifying each against its sha256 digest; " +
      'directory artifacts arrive as `<name>.tar.gz` and are unpacked when `unpack` is true.',
    params: withProgressToken(
      z.object({ ref: SandboxRefSchema, destination: z.string().min(1), names: z.array(z.string()).optional(), unpack: z.boolean().default(false) }),
    ),
    result: z.object({ artifacts: z.array(DownloadedArtifactSchema) }),
    progress: true,
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, destination: '/home/me/artifacts' },
      result: {
        artifacts: [
          {
            name: 'report.txt',
            path: '/home/me/artifacts/report.txt',
            type: 'file',
            sizeBytes: 14,
            digest: 'sha256:1f2ec52b774368781bed1d1fb140a92e0eb6348090619c9291f9a5a3c8e8d151',
          },
        ],
      },
    },
  }),
  'sandboxes/logs': defineMethod('sandboxes/logs', {
    description:
      "runtimed's log of the sandbox's Run, read like `kubectl logs`: one JSON line per command output line " +
      '(`stream` stdout|stderr) and one `stream: "audit"` line per mutation (operation, outcome, exit code, duration; ' +
      'never command text, stdin or file contents); `tailLines` applies before `sinceTime`/`sinceSeconds`; ' +
      '`timestamps` prefixes `<RFC3339Nano> `. Without `follow` the result holds the lines. With `follow` (and a ' +
      '`followId`) every line arrives as a `sandboxes/log` notification carrying that id, and the request answers ' +
      '(with no lines) once the Run has ended; `$/cancelRequest` stops following. Local sandboxes only for now.',
    params: RunLogQueryFields.extend({ ref: SandboxRefSchema, followId: z.string().min(1).max(128).optional() })
      .refine(sinceExclusive, { message: SINCE_EXCLUSIVE_MESSAGE, path: ['sinceSeconds'] })
      .refine((p) => !p.follow || p.followId !== undefined, { message: 'follow needs a followId (it tags the sandboxes/log notifications)', path: ['followId'] }),
    result: z.object({ lines: z.array(z.string()) }),
    example: {
      params: { ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, tailLines: 1 },
      result: {
        lines: [
          '{"run_uid":"0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10","assigned_pod_uid":"5c1e0f3a-8d7b-4e2a-9f61-2b3c4d5e6f70","run_name":"sbx-7k2p9",' +
            '"namespace":"default","runtime":"process","pod":"local-process","stream":"audit","message":"session operation completed",' +
            '"operation":"command","outcome":"failed","exit_code":2,"duration_milliseconds":41}',
        ],
      },
    },
  }),
  'bundles/pack': defineMethod('bundles/pack', {
    description:
      'Packs a state directory and a workspace into a Session Bundle (Maka bundle v1). The workspace is snapshotted ' +
      'first under the V1 policy: `.git`, `node_modules`, caches and logs are left out and listed; a known secret file ' +
      'refuses the pack (`policy_rejected`, naming the file). The destination must not exist. Cancellable; a cancelled ' +
      'pack leaves no temp files and publishes nothing.',
    params: withProgressToken(
      z.object({
        stateRoot: z.string().min(1),
        workspaceRoot: z.string().min(1),
        destination: z.string().min(1),
        sessionId: IdentifierSchema,
        lastCommittedActivationId: IdentifierSchema.optional(),
      }),
    ),
    result: z.object({ artifact: SessionBundleArtifactSchema, workspace: WorkspaceSnapshotReportSchema }),
    progress: true,
    example: {
      params: { stateRoot: '/home/me/s/state', workspaceRoot: '/home/me/s/workspace', destination: '/home/me/s.tar.zst', sessionId: 'cloud-session-1' },
      result: {
        artifact: {
          path: '/home/me/s.tar.zst',
          archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
          compressedBytes: 676,
          decompressedTarBytes: 8704,
          payloadBytes: 71,
          entryCount: 8,
        },
        workspace: {
          policyVersion: 1,
          includedEntries: 3,
          excludedEntries: [{ path: 'node_modules', category: 'dependency_tree' }],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 1, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 21,
        },
      },
    },
  }),
  'bundles/inspect': defineMethod('bundles/inspect', {
    description: 'Reads and checks every byte of a bundle; returns its manifest and counts, or the codec error code that rejects it.',
    params: withProgressToken(z.object({ path: z.string().min(1), expectedArchiveDigest: Sha256DigestSchema.optional() })),
    result: SessionBundleInspectionSchema,
    progress: true,
    example: {
      params: { path: '/home/me/s.tar.zst' },
      result: {
        manifest: {
          schemaVersion: 1,
          codec: { name: 'maka-session-bundle', version: 1, canonicalizationVersion: 1, archive: 'ustar', compression: 'zstd', compressionLevel: 3 },
          envelope: { sessionId: 'cloud-session-1', lastCommittedActivationId: 'activation-9' },
          stateIdentity: { path: 'state-identity.json', mediaType: 'application/vnd.maka.session-state-identity+json;version=1' },
          payload: { statePath: 'state/', workspacePath: 'workspace/', treeDigest: 'sha256:f6811d6c3a99eeaaa4ab4f7e7a0f34c9a385ddc2c02b4f11fae56debde0e6d20', payloadBytes: 71, entryCount: 8 },
        },
        archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        compressedBytes: 676,
        decompressedTarBytes: 8704,
        payloadBytes: 71,
        entryCount: 8,
      },
    },
  }),
  'bundles/hydrate': defineMethod('bundles/hydrate', {
    description:
      'Unpacks a bundle into a destination that must not exist (through a private staging directory and one atomic ' +
      "rename), after checking it belongs to `sessionId`.",
    params: withProgressToken(z.object({ path: z.string().min(1), sessionId: IdentifierSchema, destination: z.string().min(1) })),
    result: SessionBundleHydrationSchema,
    progress: true,
    example: {
      params: { path: '/home/me/s.tar.zst', sessionId: 'cloud-session-1', destination: '/home/me/restored' },
      result: {
        manifest: {
          schemaVersion: 1,
          codec: { name: 'maka-session-bundle', version: 1, canonicalizationVersion: 1, archive: 'ustar', compression: 'zstd', compressionLevel: 3 },
          envelope: { sessionId: 'cloud-session-1' },
          stateIdentity: { path: 'state-identity.json', mediaType: 'application/vnd.maka.session-state-identity+json;version=1' },
          payload: { statePath: 'state/', workspacePath: 'workspace/', treeDigest: 'sha256:f6811d6c3a99eeaaa4ab4f7e7a0f34c9a385ddc2c02b4f11fae56debde0e6d20', payloadBytes: 71, entryCount: 8 },
        },
        archiveDigest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        compressedBytes: 676,
        decompressedTarBytes: 8704,
        payloadBytes: 71,
        entryCount: 8,
        destinationRoot: '/home/me/restored',
        stateRoot: '/home/me/restored/state',
        workspaceRoot: '/home/me/restored/workspace',
      },
    },
  }),
  'sessions/list': defineMethod('sessions/list', {
    description: 'The sessions of the configured repository (the embedded file repository, or PostgreSQL), and where it is.',
    params: z.object({}),
    result: z.object({
      repository: z.object({ kind: z.enum(['file', 'postgres']), location: z.string() }),
      sessions: z.array(SessionSummarySchema),
    }),
    example: {
      params: {},
      result: {
        repository: { kind: 'file', location: '/home/me/.local/share/sandbox-sessions/repository' },
        sessions: [
          {
            sessionId: 'demo',
            agentId: 'sandbox-sessions',
            head: { sessionId: 'demo', revision: 'r2' },
            oldestRetained: 'r1',
            createdAt: '2026-11-29T10:00:00.000Z',
            updatedAt: '2026-11-29T10:05:00.000Z',
          },
        ],
      },
    },
  }),
  'sessions/revisions': defineMethod('sessions/revisions', {
    description: "A session's retained revisions, newest first.",
    params: z.object({ sessionId: IdentifierSchema }),
    result: z.object({ revisions: z.array(RevisionSummarySchema) }),
    example: {
      params: { sessionId: 'demo' },
      result: {
        revisions: [
          {
            ref: { sessionId: 'demo', revision: 'r1' },
            checkpoint: EXAMPLE_CHECKPOINT,
            committedAt: '2026-11-29T10:00:00.000Z',
            isHead: true,
          },
        ],
      },
    },
  }),
  'sessions/export': defineMethod('sessions/export', {
    description: "Writes a retained revision's bundle (default: the head) to a new file, verified while it is copied.",
    params: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema.optional(), destination: z.string().min(1) }),
    result: z.object({
      revision: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema }),
      path: z.string(),
      digest: Sha256DigestSchema,
      bytes: z.number().int(),
    }),
    example: {
      params: { sessionId: 'demo', revision: 'r1', destination: '/home/me/demo-r1.tar.zst' },
      result: {
        revision: { sessionId: 'demo', revision: 'r1' },
        path: '/home/me/demo-r1.tar.zst',
        digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1',
        bytes: 676,
      },
    },
  }),
  'revisions/list': defineMethod('revisions/list', {
    description:
      "One folder of a retained revision, read straight from its bundle: the first call decompresses the bundle once " +
      'and indexes it (`indexBuilds` counts these in this server); later listings and reads come from the index. ' +
      'The root holds `state/`, `workspace/` and `state-identity.json`.',
    params: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema, path: z.string().default('') }),
    result: z.object({
      entries: z.array(z.object({ name: z.string(), directory: z.boolean(), size: z.number().int().min(0) })),
      indexBuilds: z.number().int().min(0),
    }),
    example: {
      params: { sessionId: 'demo', revision: 'r1', path: 'workspace' },
      result: { entries: [{ name: 'README.md', directory: false, size: 6 }], indexBuilds: 1 },
    },
  }),
  'revisions/read': defineMethod('revisions/read', {
    description: 'Bytes of one file of a retained revision (at most 786,000 per call; `offset`/`length` for more).',
    params: z.object({
      sessionId: IdentifierSchema,
      revision: RevisionSchema,
      path: z.string().min(1),
      offset: z.number().int().min(0).default(0),
      length: z.number().int().min(1).max(786_000).default(786_000),
    }),
    result: z.object({ contents: z.string(), size: z.number().int().min(0), truncated: z.boolean() }),
    example: {
      params: { sessionId: 'demo', revision: 'r1', path: 'workspace/README.md' },
      result: { contents: 'Zmlyc3QK', size: 6, truncated: false },
    },
  }),
  'sessions/saveSandbox': defineMethod('sessions/saveSandbox', {
    description:
      "Saves a sandbox's workspace as a session revision: snapshotted in place from a local sandbox's directory " +
      '(else copied out through the gateway) under the V1 policy (exclusions listed; a secret file refuses the save, ' +
      'named), packed and published, then `r1` of a new ' +
      'session (no `expectedRevision`) or a compare-and-set commit on `expectedRevision` (`revision_conflict` if the ' +
      'head moved). `commitId` makes a retry return the same revision.',
    params: withProgressToken(
      z.object({
        sandbox: SandboxRefSchema,
        sessionId: IdentifierSchema,
        expectedRevision: RevisionSchema.optional(),
        agentId: IdentifierSchema.optional(),
        commitId: IdentifierSchema.optional(),
      }),
    ),
    result: z.object({
      revision: CommittedSessionRevisionSchema,
      bundle: z.object({ digest: Sha256DigestSchema, bytes: z.number().int(), entryCount: z.number().int() }),
      workspace: WorkspaceSnapshotReportSchema,
    }),
    progress: true,
    example: {
      params: { sandbox: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' }, sessionId: 'demo' },
      result: {
        revision: {
          ref: { sessionId: 'demo', revision: 'r1' },
          agentId: 'sandbox-sessions',
          checkpoint: EXAMPLE_CHECKPOINT,
        },
        bundle: { digest: 'sha256:c7c9efbe9fc8a1c84f22ec016985457d82070001c4579d5cecb1304459fed5e1', bytes: 676, entryCount: 8 },
        workspace: {
          policyVersion: 1,
          includedEntries: 3,
          excludedEntries: [],
          excludedEntriesByCategory: { source_control: 0, dependency_tree: 0, cache: 0, log: 0, runtime_scratch: 0 },
          payloadBytes: 21,
        },
      },
    },
  }),
  'sessions/openInSandbox': defineMethod('sessions/openInSandbox', {
    description: 'Opens a retained revision (default: the head) in a new sandbox: checkout (verified), hydrate, create, upload the workspace.',
    params: withProgressToken(z.object({ sessionId: IdentifierSchema, revision: RevisionSchema.optional(), sandbox: SandboxCreateSpecSchema })),
    result: z.object({ sandbox: SandboxSummarySchema, revision: z.object({ sessionId: IdentifierSchema, revision: RevisionSchema }) }),
    progress: true,
    example: {
      params: { sessionId: 'demo', revision: 'r1', sandbox: { provider: 'local', namespace: 'default', runtime: 'process' } },
      result: {
        sandbox: {
          ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-q4m8z' },
          key: 'local.local.default.sbx-q4m8z',
          runtime: 'process',
          phase: 'Ready',
        },
        revision: { sessionId: 'demo', revision: 'r1' },
      },
    },
  }),
  'activations/run': defineMethod('activations/run', {
    description:
      'Runs one activation (one agent turn) of a session in a fresh, throw-away sandbox, exactly as seed 000 orders it: ' +
      'claim the activation id (a committed id returns its stored outcome and runs nothing), take the session lease, ' +
      'check out (a new session starts empty), hydrate into a fresh sandbox, run the activation command (default ' +
      '`maka activate`) with the request as a file, stream its events as `activations/event` notifications ' +
      '(provisional), pack, compare-and-set commit, and only then return the committed outcome. A CAS loser returns ' +
      '`not_committed` with `revision_conflict` and never its output. Refusals (`session_busy`, ' +
      '`activation_in_progress`, …) are errors.',
    params: withProgressToken(ActivationRunRequestSchema),
    result: ActivationResultSchema,
    progress: true,
    example: {
      params: {
        sessionId: 'demo',
        activationId: 'activation-1',
        stimulus: { type: 'message', payload: { text: 'Add a README' } },
        sandbox: { provider: 'local', namespace: 'default', runtime: 'process' },
      },
      result: {
        sessionId: 'demo',
        activationId: 'activation-1',
        commit: 'committed',
        revision: 'r3',
        outcome: {
          protocol: 'maka.activation',
          schemaVersion: 1,
          type: 'outcome',
          activationId: 'activation-1',
          cloudSessionId: 'demo',
          status: 'completed',
          response: 'Added README.md',
        },
        deduplicated: false,
        attempt: 1,
      },
    },
  }),
  'sessions/fork': defineMethod('sessions/fork', {
    description:
      'Forks a session at a named, retained revision (never "latest"): a new session with its own r1, the same ' +
      'agent, `forkedFrom` lineage, no activation records, leases or credentials; the bundle is repacked for the ' +
      'target and its state identity re-keyed. The same `forkId` always yields the same target.',
    params: ForkRequestSchema,
    result: ForkResultSchema,
    example: {
      params: { forkId: 'fork-1', source: { sessionId: 'demo', revision: 'r2' }, targetSessionId: 'demo-experiment' },
      result: {
        forkId: 'fork-1',
        target: { sessionId: 'demo-experiment', revision: 'r1' },
        forkedFrom: { sessionId: 'demo', revision: 'r2' },
        rekey: {
          mediaType: 'application/vnd.maka.session-state-identity+json;version=1',
          changed: true,
          note: 'rewrote makaSessionId',
        },
        deduplicated: false,
      },
    },
  }),
} as const;

export type CompanionMethods = typeof companionMethods;
export type CompanionMethodName = keyof CompanionMethods;
export type ParamsOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['params']>;
export type ResultOf<M extends CompanionMethodName> = z.infer<CompanionMethods[M]['result']>;

/** `gateway/changed`: whether a provider's gateway (the local daemon) answers. */
export const GatewayChangedSchema = z.object({
  provider: z.enum(['local', 'kruntimes']),
  reachable: z.boolean(),
  /** Why it is unreachable, in words. */
  message: z.string().optional(),
});
export type GatewayChanged = z.infer<typeof GatewayChangedSchema>;

export const companionNotifications = {
  'activations/event': defineNotification('activations/event', {
    description: 'One JSONL event of a running activation, as the agent wrote it. Provisional: only the result of `activations/run` says what was committed.',
    params: z.object({ sessionId: z.string(), activationId: z.string(), provisional: z.literal(true), event: ActivationEventSchema }),
    example: {
      sessionId: 'demo',
      activationId: 'activation-1',
      provisional: true,
      event: {
        protocol: 'maka.activation',
        schemaVersion: 1,
        type: 'start',
        activationId: 'activation-1',
        cloudSessionId: 'demo',
        workspaceRoot: '/workspace/8d0c/workspace',
      },
    },
  }),
  'sandboxes/log': defineNotification('sandboxes/log', {
    description: 'New lines of a followed sandbox log (`sandboxes/logs` with `follow`), in order, tagged with its `followId`.',
    params: z.object({ followId: z.string(), lines: z.array(z.string()) }),
    example: {
      followId: 'log-1',
      lines: [
        '{"run_uid":"0b6f6a8e-2f0e-4c3b-9d51-5d1c7f1e2a10","assigned_pod_uid":"5c1e0f3a-8d7b-4e2a-9f61-2b3c4d5e6f70","run_name":"sbx-7k2p9",' +
          '"namespace":"default","runtime":"process","pod":"local-process","stream":"stdout","message":"hello","operation":"command",' +
          '"outcome":"succeeded","exit_code":0,"duration_milliseconds":12}',
      ],
    },
  }),
  'gateway/changed': defineNotification('gateway/changed', {
    description:
      "A provider's gateway stopped answering — the local gateway daemon exited, so its sandboxes are unreachable until " +
      'it is started again (the next request that needs it starts it) — or answers again.',
    params: GatewayChangedSchema,
    example: { provider: 'local', reachable: false, message: 'the local gateway daemon stopped' },
  }),
  'sandboxes/changed': defineNotification('sandboxes/changed', {
    description: 'A sandbox was created, changed phase, or was removed.',
    params: SandboxChangedSchema,
    example: {
      sandbox: {
        ref: { provider: 'local', context: 'local', namespace: 'default', name: 'sbx-7k2p9' },
        key: 'local.local.default.sbx-7k2p9',
        runtime: 'process',
        phase: 'Finalizing',
        reason: 'Finalizing',
        message: 'session finalization requested',
      },
    },
  }),
} as const;

/** Formats zod issues as the `issues` of an InvalidParams error. */
export function zodIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.') || '(root)', message: issue.message }));
}
