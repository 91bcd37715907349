// The kruntimes Run resource in session mode (spec §1): its schema, phases, the monotonic
// termination rule as a pure function, and the SDK's endpoint checks. Local Runs use the
// same shape, so one model covers both providers.
import { z } from 'zod';
import { Sha256DigestSchema } from '../digest';
import { SandboxSessionsError } from '../errors';

// The schemas are wrapped in z.lazy and built on first parse, as in gateway.ts (issue 25: zod 4 binds
// every method to every schema instance, which cost the CLI and the daemon start time and heap for
// schemas most processes never use).

export const RUN_API_VERSION = 'kruntimes.io/v1alpha1';
export const RUN_KIND = 'Run';
export const RUN_GROUP = 'kruntimes.io';
export const RUN_VERSION = 'v1alpha1';
export const RUN_PLURAL = 'runs';

export const RunPhaseSchema = z.lazy(() =>
  z.enum([
    'Pending',
    'Scheduled',
    'Running',
    'Ready',
    'Finalizing',
    'Succeeded',
    'Failed',
    'Timeout',
    'Cancelled',
  ]),
);
export type RunPhase = z.infer<typeof RunPhaseSchema>;

export const TERMINAL_PHASES: ReadonlySet<RunPhase> = new Set(['Succeeded', 'Failed', 'Timeout', 'Cancelled']);
export function isTerminalPhase(phase: RunPhase | undefined): boolean {
  return phase !== undefined && TERMINAL_PHASES.has(phase);
}

/** Reasons kruntimes writes on Runs (internal/retry/retry.go plus the session reasons). */
export const RunReasonSchema = z.lazy(() =>
  z.enum([
    'Assigned',
    'Claimed',
    'SessionRegistered',
    'Finalizing',
    'SessionCompleted',
    'Timeout',
    'PrepareSource',
    'RuntimeExecute',
    'SessionRegister',
    'RuntimeError',
    'ExecutionLost',
    'Cancelled',
    'PodGone',
    'PodTerminating',
    'PodUnhealthy',
    'ArtifactInvalid',
  ]),
);
export type RunReason = z.infer<typeof RunReasonSchema>;

/** Status messages kruntimes uses for session Runs (spec §1.4). */
export const RunMessages = {
  pending: 'waiting for available runtime pods',
  registered: 'session registered',
  finalizationRequested: 'session finalization requested',
  finalized: 'session finalized',
  cancelled: 'cancelled by user',
  idleTimeout: 'session idle timeout exceeded',
  leaseExpired: 'session lease expired',
  timeoutAfter: (duration: string) => `timeout after ${duration}`,
} as const;

export const TerminationModeSchema = z.lazy(() => z.enum(['Immediate', 'Drain']));
export type TerminationMode = z.infer<typeof TerminationModeSchema>;

const int32 = () => z.number().int().min(-2147483648).max(2147483647);

/** A Go metav1.Duration string such as "90s", "2m", "1h30m", "500ms". */
export const GoDurationSchema = z.lazy(() =>
  z.string().refine((s) => parseGoDuration(s) !== undefined, {
    message: 'must be a Go duration such as "30s", "2m" or "1h30m"',
  }),
);

export const SessionModeSchema = z.lazy(() =>
  z.looseObject({
    idleTimeoutSeconds: int32().min(1).optional(),
    leaseTimeoutSeconds: int32().min(1).optional(),
    queueSize: z.number().int().min(1).max(32).optional(),
    operationTimeout: GoDurationSchema.optional(),
  }),
);
export type SessionMode = z.infer<typeof SessionModeSchema>;

export const RunModeSchema = z.lazy(() =>
  z.looseObject({
    session: SessionModeSchema.optional(),
    task: z.record(z.string(), z.unknown()).optional(),
    function: z.record(z.string(), z.unknown()).optional(),
  }),
);

export const EnvVarSchema = z.lazy(() =>
  z.looseObject({
    name: z.string().min(1),
    value: z.string().optional(),
    valueFrom: z.unknown().optional(),
  }),
);
export type EnvVar = z.infer<typeof EnvVarSchema>;

export const ArtifactLocationSchema = z.lazy(() =>
  z.union([
    z.strictObject({ filesystem: z.looseObject({ path: z.string(), volumeClaimName: z.string().optional() }) }),
    z.strictObject({ s3: z.looseObject({ bucket: z.string(), key: z.string() }) }),
  ]),
);


export const ArtifactRefSchema = z.lazy(() =>
  z.looseObject({
    name: z.string().min(1).max(255),
    driver: z.enum(['filesystem', 's3']),
    type: z.enum(['file', 'directory', 'archive', 'blob']),
    location: ArtifactLocationSchema,
    sizeBytes: z.number().int().min(0),
    digest: Sha256DigestSchema,
    contentType: z.string().optional(),
    createdAt: z.string().optional(),
  }),
);
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;

export const RunSourceSchema = z.lazy(() =>
  z.looseObject({
    inline: z.string().optional(),
    repoURL: z.string().optional(),
    commitSHA: z.string().optional(),
  }),
);

/** spec.runtime: a Runtime name (the Run CRD's own rule). */
export const RunRuntimeNameSchema = z.lazy(() =>
  z
    .string()
    .min(1)
    .max(63)
    .regex(/^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/, 'must be a Runtime name (1-63 characters)'),
);

export const RunSpecSchema = z.lazy(() =>
  z.looseObject({
    runtime: RunRuntimeNameSchema,
    mode: RunModeSchema,
    env: z.array(EnvVarSchema).max(256).optional(),
    timeout: GoDurationSchema.optional(),
    source: RunSourceSchema.optional(),
    artifactInputs: z.array(z.looseObject({ ref: ArtifactRefSchema, path: z.string() })).max(32).optional(),
    termination: z.looseObject({ mode: TerminationModeSchema }).optional(),
    ttlSecondsAfterFinished: int32().min(0).optional(),
  }),
);
export type RunSpec = z.infer<typeof RunSpecSchema>;

export const RunEndpointSchema = z.lazy(() =>
  z.looseObject({
    protocol: z.enum(['HTTP', 'HTTPS']).optional(),
    url: z.string().max(2048),
    /** base64 of a PEM CA bundle (Go []byte in JSON). */
    caBundle: z.string().optional(),
  }),
);
export type RunEndpoint = z.infer<typeof RunEndpointSchema>;

export const ConditionSchema = z.lazy(() =>
  z.looseObject({
    type: z.string(),
    status: z.enum(['True', 'False', 'Unknown']),
    reason: z.string().optional(),
    message: z.string().optional(),
    lastTransitionTime: z.string().optional(),
  }),
);
export type Condition = z.infer<typeof ConditionSchema>;

export const RunStatusSchema = z.lazy(() =>
  z.looseObject({
    phase: RunPhaseSchema.optional(),
    message: z.string().max(4096).optional(),
    assignedPod: z.string().optional(),
    assignedPodUID: z.string().optional(),
    endpoint: RunEndpointSchema.optional(),
    startTime: z.string().optional(),
    completionTime: z.string().optional(),
    attempt: z.number().int().optional(),
    artifactRefs: z.array(ArtifactRefSchema).max(32).optional(),
    artifactStore: z.record(z.string(), z.unknown()).optional(),
    conditions: z.array(ConditionSchema).max(16).optional(),
  }),
);
export type RunStatus = z.infer<typeof RunStatusSchema>;

export const ObjectMetaSchema = z.lazy(() =>
  z.looseObject({
    name: z.string().optional(),
    generateName: z.string().optional(),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    creationTimestamp: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    finalizers: z.array(z.string()).optional(),
  }),
);

/** A JSON merge patch of a Run's labels and annotations (as `kubectl label` / `kubectl annotate` send): a string sets, null removes. */
export interface RunMetadataPatch {
  labels?: Record<string, string | null>;
  annotations?: Record<string, string | null>;
}

export const RunSchema = z.lazy(() =>
  z.looseObject({
    apiVersion: z.literal(RUN_API_VERSION),
    kind: z.literal(RUN_KIND),
    metadata: ObjectMetaSchema,
    spec: RunSpecSchema,
    status: RunStatusSchema.optional(),
  }),
);
export type Run = z.infer<typeof RunSchema>;

/** The only termination requests a Run may carry after `from` (CEL transition rule on spec). */
export const TERMINATION_MONOTONIC_MESSAGE =
  'termination may not be removed, downgraded, or changed except from Drain to Immediate';
export const DRAIN_SESSION_ONLY_MESSAGE = 'termination.mode Drain is only valid for session mode';
export const EXACTLY_ONE_MODE_MESSAGE = 'exactly one of task, function, or session must be set';
export const SESSION_WORKSPACE_MESSAGE = 'session mode does not support spec.workspace';
export const IMMUTABLE_FIELDS_MESSAGE =
  'runtime, source, mode, artifactInputs, env, timeout, retryPolicy, and resources are immutable after Run creation';

export type RuleCheck = { ok: true } | { ok: false; message: string };

/**
 * The monotonic termination rule: once set it cannot be removed, and it changes only from
 * Drain to Immediate. Setting the same mode again is allowed (an idempotent request).
 */
export function checkTerminationTransition(
  from: TerminationMode | undefined,
  to: TerminationMode | undefined,
): RuleCheck {
  if (from === undefined) return { ok: true };
  if (to === from) return { ok: true };
  if (from === 'Drain' && to === 'Immediate') return { ok: true };
  return { ok: false, message: TERMINATION_MONOTONIC_MESSAGE };
}

/** Create-time rules kruntimes' CRD enforces with CEL (the subset a session client can hit). */
export function checkRunSpecOnCreate(spec: RunSpec & { workspace?: unknown }): RuleCheck {
  const modes = ['task', 'function', 'session'].filter((k) => spec.mode[k] !== undefined);
  if (modes.length !== 1) return { ok: false, message: EXACTLY_ONE_MODE_MESSAGE };
  if (spec.mode.session !== undefined && spec.workspace !== undefined) {
    return { ok: false, message: SESSION_WORKSPACE_MESSAGE };
  }
  if (spec.termination?.mode === 'Drain' && spec.mode.session === undefined) {
    return { ok: false, message: DRAIN_SESSION_ONLY_MESSAGE };
  }
  return { ok: true };
}

/** The Kubernetes 422 message for a CEL rule on `spec` (standard apiserver wording). */
export function invalidRunMessage(name: string, message: string): string {
  return `Run.kruntimes.io "${name}" is invalid: spec: Invalid value: "object": ${message}`;
}

/** Why a Run cannot be used as a sandbox; the messages are the kruntimes SDKs'. */
export class RunStateError extends SandboxSessionsError<'run_state'> {
  override readonly name = 'RunStateError';
  readonly service = 'run';
  constructor(
    message: string,
    readonly run: { namespace?: string | undefined; name?: string | undefined; phase?: RunPhase | undefined },
  ) {
    super('run_state', message);
  }
}

export const RunStateMessages = {
  notSession: 'Run is not a Session Run',
  notReady: 'Session Run is not ready',
  invalidEndpoint: 'Session Run has an invalid endpoint',
  uidMismatch: 'Session Run endpoint does not match its UID',
  terminalBeforeReady: 'Session Run became terminal before it was ready',
  didNotClose: (phase: string) => `Session Run did not close successfully; phase is ${phase}`,
  didNotCancel: (phase: string) => `Session Run did not cancel successfully; phase is ${phase}`,
} as const;

export function isSessionRun(run: Run): boolean {
  return run.spec.mode.session !== undefined;
}

/**
 * The SDK's `endpoint()` checks, run before every data-plane call: a session Run, Ready,
 * an absolute URL whose path has ≥ 7 segments ending in `sessions/<metadata.uid>`.
 */
export function sessionEndpoint(run: Run): RunEndpoint {
  const ident = { namespace: run.metadata.namespace, name: run.metadata.name, phase: run.status?.phase };
  if (!isSessionRun(run)) throw new RunStateError(RunStateMessages.notSession, ident);
  const endpoint = run.status?.endpoint;
  if (run.status?.phase !== 'Ready' || !endpoint?.url) throw new RunStateError(RunStateMessages.notReady, ident);
  let url: URL;
  try {
    url = new URL(endpoint.url);
  } catch {
    throw new RunStateError(RunStateMessages.invalidEndpoint, ident);
  }
  if (!url.protocol || !url.host) throw new RunStateError(RunStateMessages.invalidEndpoint, ident);
  const segments = url.pathname.split('/').filter((s) => s !== '');
  const uid = run.metadata.uid;
  if (
    !uid ||
    segments.length < 7 ||
    segments[segments.length - 2] !== 'sessions' ||
    decodeURIComponent(segments[segments.length - 1] ?? '') !== uid
  ) {
    throw new RunStateError(RunStateMessages.uidMismatch, ident);
  }
  return endpoint;
}

/** `{baseURL}/v1/namespaces/{ns}/runtimes/{runtime}/sessions/{uid}` (spec §1.5). */
export function sessionEndpointPath(namespace: string, runtime: string, uid: string): string {
  return ['', 'v1', 'namespaces', namespace, 'runtimes', runtime, 'sessions', uid].map(encodeURIComponent).join('/');
}

const DURATION_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a Go duration string to milliseconds; undefined when it is not one. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    total += Number(m[1]) * (DURATION_UNITS[m[2] as string] ?? NaN);
    matched = re.lastIndex;
  }
  if (matched === 0 || matched !== text.length || !Number.isFinite(total)) return undefined;
  return total;
}

/** Formats milliseconds as the Go duration kruntimes prints in `timeout after <d>` (e.g. 1h30m0s). */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  let rest = ms / 1000;
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  const s = Number(rest.toFixed(3)).toString();
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
