// The one table from a product error (its service and its stable code, protocol/errors.ts) to what each face of
// the server answers: the JSON-RPC `error.data.code` (and number), the MCP tool error code, the CLI exit code and,
// where the local gateway / Runs API answers, the HTTP status. Written once so the faces cannot drift; nothing
// here (or in its callers) looks at message text. Services never import this file; rpc, mcp and the CLI do.
import { CompanionError, type CompanionErrorCode, JsonRpcErrorNumber } from '../protocol/companion';
import { SandboxSessionsError } from '../protocol/errors';
import type { ActivationErrorCode } from '../protocol/activation';
import type { SessionBundleErrorCode, SessionSnapshotErrorCode } from '../protocol/bundle';
import { GrpcCode, type GrpcCodeName, httpStatusForGrpc } from '../protocol/kruntimes/gateway';
import type { GatewayErrorCode } from '../protocol/kruntimes/gatewayErrors';
import type { SessionRepositoryErrorCode } from '../protocol/repository';
import type { GatewayStartErrorCode } from './gateway/daemonClient';
import { RUNS_API_STATUS, type RunsApiStatusCode } from './local/apiStatusError';
import type { AbortKind } from './local/operationAbort';
import type { SessionErrorCode } from './local/sessionError';
import type { LeaseLostCode } from './sandboxes/leaseKeeper';
import type { SandboxErrorCode } from './sandboxes/provider';
import type { TransferErrorCode } from './sandboxes/transfer';

/** What an MCP tool error starts with (server/mcp/toolErrors.ts); the agent branches on it. */
export type McpToolErrorCode =
  | 'invalid_argument'
  | 'not_found'
  | 'not_granted'
  | 'isolation_refused'
  | 'not_ready'
  | 'conflict'
  | 'busy'
  | 'too_large'
  | 'unavailable'
  | 'outcome_unknown'
  | 'failed';

/** The CLI's exit codes: 1 failed, 2 a wrong command line (or request), 3 refused because of someone else's state. */
export const CliExit = { failed: 1, usage: 2, refused: 3 } as const;
export type CliExitCode = (typeof CliExit)[keyof typeof CliExit];

/** Every service's code union, by the `service` its error classes declare. */
export interface ServiceCodes {
  companion: CompanionErrorCode;
  gateway: GatewayErrorCode;
  run: 'run_state';
  ndjson: 'ndjson_line_too_long' | 'ndjson_truncated';
  terminal: 'terminal_refused';
  repository: SessionRepositoryErrorCode;
  activation: ActivationErrorCode;
  bundle: SessionBundleErrorCode;
  snapshot: SessionSnapshotErrorCode;
  sandbox: SandboxErrorCode;
  transfer: TransferErrorCode;
  lease: LeaseLostCode | 'invalid_argument';
  cluster: 'kubeconfig_invalid';
  opensandbox: GrpcCodeName;
  'local-gateway': 'local_gateway_error' | 'body_too_large' | GatewayStartErrorCode;
  session: SessionErrorCode;
  'runs-api': RunsApiStatusCode;
  'local-store': 'record_invalid' | 'record_unreadable';
  artifact: 'artifact_invalid' | 'artifact_not_local' | 'artifact_outside_store';
  operation: AbortKind;
  search: 'search_query' | 'search_path' | 'search_unavailable';
  sessions: 'destination_exists' | 'object_not_found' | 'integrity_mismatch';
  rpc: 'parse_error' | 'invalid_frame';
  cli: 'usage';
  mcp: McpToolErrorCode;
  'mcp-http': 'mcp_http_setup';
}
export type ErrorService = keyof ServiceCodes;

export interface ErrorRoute {
  /** JSON-RPC `error.data.code` (`internal` is sent as -32603, every other code as -32000); `data.cause` is the service's code. */
  readonly rpc: CompanionErrorCode;
  readonly mcp: McpToolErrorCode;
  /** The MCP text names the service's code after the message: `… (session_busy)`. */
  readonly mcpShowsCode?: boolean;
  /** Appended to the MCP text: what the agent can do next. */
  readonly mcpNote?: string;
  readonly exit: CliExitCode;
  /** The HTTP status the local gateway / Runs API answers with, for the services that answer HTTP. */
  readonly http?: number;
}

const { failed, usage, refused: busyExit } = CliExit;
/** The common case: the service refused; JSON-RPC `refused`, MCP `failed (code)`, exit 1. */
const REFUSED: ErrorRoute = { rpc: 'refused', mcp: 'failed', mcpShowsCode: true, exit: failed };
/** A bug or an unexpected state: JSON-RPC `internal` (logged with its stack), MCP `failed`. */
const INTERNAL: ErrorRoute = { rpc: 'internal', mcp: 'failed', exit: failed };
const NOT_FOUND: ErrorRoute = { rpc: 'not_found', mcp: 'not_found', mcpShowsCode: true, exit: failed };
const CONFLICT: ErrorRoute = { rpc: 'conflict', mcp: 'conflict', mcpShowsCode: true, exit: failed };
const CONFLICT_EXIT_3: ErrorRoute = { ...CONFLICT, exit: busyExit };
const IO_FAILURE: ErrorRoute = { rpc: 'unavailable', mcp: 'failed', mcpShowsCode: true, exit: failed };
const BUSY: ErrorRoute = { rpc: 'refused', mcp: 'busy', mcpShowsCode: true, mcpNote: '; try again when the running activation has finished', exit: busyExit };

function everyGrpcCode(route: (code: GrpcCodeName) => ErrorRoute): Record<GrpcCodeName, ErrorRoute> {
  return Object.fromEntries((Object.keys(GrpcCode) as GrpcCodeName[]).map((code) => [code, route(code)])) as Record<GrpcCodeName, ErrorRoute>;
}

/**
 * A gateway's non-2xx answer (`GatewayError`, code `gateway_http`) is routed by its HTTP status; `data.cause` is
 * `http_<status>`. Statuses not listed take `otherwise`.
 */
export const GATEWAY_STATUS_ROUTES: { readonly [status: number]: ErrorRoute; readonly otherwise: ErrorRoute } = {
  400: { rpc: 'refused', mcp: 'invalid_argument', exit: failed },
  404: { rpc: 'not_found', mcp: 'not_found', mcpNote: ' (check the path with sandbox_list_files)', exit: failed },
  409: { rpc: 'not_ready', mcp: 'not_ready', mcpNote: ' — the sandbox is closing or closed; create a new one with sandbox_create', exit: failed },
  413: { rpc: 'refused', mcp: 'too_large', exit: failed },
  429: {
    rpc: 'unavailable',
    mcp: 'busy',
    mcpNote: " — the sandbox's command queue is full; wait for running commands to finish and try again",
    exit: failed,
  },
  503: { rpc: 'unavailable', mcp: 'unavailable', mcpNote: " — the sandbox's gateway is not answering; try again shortly", exit: failed },
  504: { rpc: 'unavailable', mcp: 'unavailable', mcpNote: " — the sandbox's gateway is not answering; try again shortly", exit: failed },
  otherwise: { rpc: 'refused', mcp: 'failed', exit: failed },
};

/** (service, code) → route. `satisfies` makes a code added to any union without a row a compile error. */
export const ERROR_ROUTES = {
  companion: {
    invalid_params: { rpc: 'invalid_params', mcp: 'invalid_argument', exit: failed },
    not_found: { rpc: 'not_found', mcp: 'not_found', mcpShowsCode: true, exit: failed },
    conflict: { rpc: 'conflict', mcp: 'conflict', exit: failed },
    not_ready: { rpc: 'not_ready', mcp: 'not_ready', exit: failed },
    unavailable: { rpc: 'unavailable', mcp: 'unavailable', exit: failed },
    cancelled: { rpc: 'cancelled', mcp: 'failed', mcpShowsCode: true, exit: failed },
    refused: { rpc: 'refused', mcp: 'failed', mcpShowsCode: true, exit: failed },
    internal: { rpc: 'internal', mcp: 'failed', mcpShowsCode: true, exit: failed },
  },
  gateway: {
    /** Routed by its HTTP status (GATEWAY_STATUS_ROUTES); this row is the one for a status not listed there. */
    gateway_http: GATEWAY_STATUS_ROUTES.otherwise,
    gateway_unreachable: {
      rpc: 'unavailable',
      mcp: 'unavailable',
      mcpNote: "; the sandbox's gateway cannot be reached — try again, or check the sandbox with sandbox_list",
      exit: failed,
    },
    outcome_unknown: {
      rpc: 'unavailable',
      mcp: 'outcome_unknown',
      mcpNote: '; check the sandbox (sandbox_list_files, sandbox_read_file) before repeating a change',
      exit: failed,
    },
    gateway_protocol: REFUSED,
    invalid_argument: { rpc: 'refused', mcp: 'invalid_argument', exit: failed },
  },
  run: {
    run_state: { rpc: 'not_ready', mcp: 'not_ready', mcpNote: '; only a Ready sandbox takes commands and file changes', exit: failed },
  },
  ndjson: { ndjson_line_too_long: REFUSED, ndjson_truncated: REFUSED },
  terminal: { terminal_refused: REFUSED },
  repository: {
    session_not_found: NOT_FOUND,
    source_revision_not_available: NOT_FOUND,
    revision_not_available: NOT_FOUND,
    object_not_found: NOT_FOUND,
    revision_conflict: CONFLICT_EXIT_3,
    session_already_exists: CONFLICT_EXIT_3,
    idempotency_conflict: CONFLICT_EXIT_3,
    invalid_fork_target: CONFLICT_EXIT_3,
    fork_agent_mismatch: CONFLICT,
    integrity_mismatch: REFUSED,
    quota_exceeded: REFUSED,
    io_failure: IO_FAILURE,
    identity_mismatch: REFUSED,
    repository_not_found: NOT_FOUND,
  },
  activation: {
    invalid_request: { rpc: 'refused', mcp: 'invalid_argument', exit: usage },
    idempotency_conflict: CONFLICT_EXIT_3,
    revision_conflict: CONFLICT_EXIT_3,
    activation_in_progress: BUSY,
    session_busy: BUSY,
    source_revision_not_available: NOT_FOUND,
    ownership_lost: REFUSED,
    sandbox_failed: REFUSED,
    sandbox_lost: REFUSED,
    agent_failed: REFUSED,
    agent_protocol_error: REFUSED,
    activation_timeout: REFUSED,
    activation_cancelled: REFUSED,
    policy_rejected: REFUSED,
    bundle_failed: REFUSED,
    repository_failed: REFUSED,
    fork_failed: REFUSED,
  },
  bundle: {
    destination_exists: CONFLICT,
    source_changed: CONFLICT,
    io_failure: IO_FAILURE,
    invalid_manifest: REFUSED,
    unsupported_schema: REFUSED,
    unsupported_codec: REFUSED,
    identity_mismatch: REFUSED,
    integrity_mismatch: REFUSED,
    quota_exceeded: REFUSED,
    unsafe_path: REFUSED,
    unsupported_entry: REFUSED,
  },
  snapshot: {
    source_changed: CONFLICT,
    io_failure: IO_FAILURE,
    invalid_input: REFUSED,
    snapshot_busy: REFUSED,
    snapshot_cancelled: REFUSED,
    session_not_quiescent: REFUSED,
    unsafe_source: REFUSED,
    policy_rejected: REFUSED,
    quota_exceeded: REFUSED,
    cleanup_failed: REFUSED,
  },
  sandbox: {
    sandbox_not_found: { rpc: 'not_found', mcp: 'not_found', mcpNote: '; sandbox_list shows the sandboxes this server may use', exit: failed },
    provider_unavailable: { rpc: 'unavailable', mcp: 'unavailable', exit: failed },
    port_forward_failed: { rpc: 'unavailable', mcp: 'unavailable', exit: failed },
    sandbox_wait_timeout: { rpc: 'refused', mcp: 'not_ready', exit: failed },
    run_state: { rpc: 'not_ready', mcp: 'not_ready', exit: failed },
    invalid_spec: { rpc: 'refused', mcp: 'invalid_argument', exit: failed },
    cluster_conflict: { rpc: 'conflict', mcp: 'failed', exit: failed },
    artifact_invalid: { rpc: 'refused', mcp: 'failed', exit: failed },
    invalid_destination: { rpc: 'refused', mcp: 'failed', exit: failed },
    cluster_unauthorized: { rpc: 'refused', mcp: 'failed', exit: failed },
    cluster_forbidden: { rpc: 'refused', mcp: 'failed', exit: failed },
  },
  transfer: { transfer_failed: REFUSED, unsupported_entry: REFUSED, unsafe_path: REFUSED },
  lease: {
    unauthenticated: REFUSED,
    forbidden: REFUSED,
    not_found: REFUSED,
    not_ready: REFUSED,
    invalid_argument: { rpc: 'refused', mcp: 'invalid_argument', exit: failed },
  },
  cluster: { kubeconfig_invalid: INTERNAL },
  opensandbox: everyGrpcCode(() => REFUSED),
  'local-gateway': {
    local_gateway_error: REFUSED,
    body_too_large: { ...INTERNAL, http: RUNS_API_STATUS.RequestEntityTooLarge },
    gateway_start_failed: REFUSED,
    gateway_start_timeout: REFUSED,
    gateway_not_running: REFUSED,
    gateway_api_mismatch: REFUSED,
  },
  session: {
    ...everyGrpcCode((code) => ({ ...INTERNAL, http: httpStatusForGrpc(GrpcCode[code]) })),
    CommandLost: { ...REFUSED, http: httpStatusForGrpc(GrpcCode.Internal) },
    ParentUnresolved: { ...INTERNAL, http: httpStatusForGrpc(GrpcCode.InvalidArgument) },
  },
  'runs-api': Object.fromEntries(Object.values(RUNS_API_STATUS).map((status) => [status, { ...INTERNAL, http: status }])) as Record<RunsApiStatusCode, ErrorRoute>,
  'local-store': { record_invalid: REFUSED, record_unreadable: REFUSED },
  artifact: { artifact_invalid: REFUSED, artifact_not_local: REFUSED, artifact_outside_store: REFUSED },
  operation: { cancel: INTERNAL, deadline: INTERNAL, session: INTERNAL, client: INTERNAL },
  search: {
    search_query: { rpc: 'invalid_params', mcp: 'invalid_argument', exit: failed },
    search_path: NOT_FOUND,
    search_unavailable: INTERNAL,
  },
  sessions: { destination_exists: CONFLICT, object_not_found: NOT_FOUND, integrity_mismatch: REFUSED },
  rpc: { parse_error: INTERNAL, invalid_frame: INTERNAL },
  cli: { usage: { ...REFUSED, exit: usage } },
  mcp: {
    invalid_argument: { rpc: 'invalid_params', mcp: 'invalid_argument', exit: failed },
    not_found: { rpc: 'not_found', mcp: 'not_found', exit: failed },
    not_granted: { rpc: 'refused', mcp: 'not_granted', exit: failed },
    isolation_refused: { rpc: 'refused', mcp: 'isolation_refused', exit: failed },
    not_ready: { rpc: 'not_ready', mcp: 'not_ready', exit: failed },
    conflict: { rpc: 'conflict', mcp: 'conflict', exit: failed },
    busy: { rpc: 'refused', mcp: 'busy', exit: failed },
    too_large: { rpc: 'refused', mcp: 'too_large', exit: failed },
    unavailable: { rpc: 'unavailable', mcp: 'unavailable', exit: failed },
    outcome_unknown: { rpc: 'unavailable', mcp: 'outcome_unknown', exit: failed },
    failed: { rpc: 'refused', mcp: 'failed', exit: failed },
  },
  'mcp-http': { mcp_http_setup: INTERNAL },
} as const satisfies { readonly [S in ErrorService]: Readonly<Record<ServiceCodes[S], ErrorRoute>> };

/** Where an error goes, and the code it carries there (`cause` for JSON-RPC, the name shown in MCP texts). */
export interface RoutedError {
  route: ErrorRoute;
  /** The service's code (`http_<status>` for a gateway answer, the cause for a CompanionError); absent for an error of no service. */
  cause: string | undefined;
}

function isGatewayHttp(err: SandboxSessionsError): err is SandboxSessionsError<'gateway_http'> & { status: number } {
  return err.service === 'gateway' && err.code === 'gateway_http' && typeof (err as { status?: unknown }).status === 'number';
}

/**
 * The route of any thrown value. A product error goes by (service, code). Anything else (a Node system error, a
 * library's error, a bug) is `internal`, except that a library error carrying a string code other than a Node
 * errno name (`ENOENT`…) is `refused` with that code as cause, as before this table.
 */
export function routeError(err: unknown): RoutedError {
  if (err instanceof SandboxSessionsError) {
    if (isGatewayHttp(err)) return { route: GATEWAY_STATUS_ROUTES[err.status] ?? GATEWAY_STATUS_ROUTES.otherwise, cause: `http_${err.status}` };
    const routes = (ERROR_ROUTES as unknown as Partial<Record<string, Partial<Record<string, ErrorRoute>>>>)[err.service];
    const code = String(err.code);
    const route = routes !== undefined && Object.hasOwn(routes, code) ? routes[code] : undefined;
    const cause = err.service === 'companion' ? (err as { causeCode?: string }).causeCode : code;
    return { route: route ?? INTERNAL, cause };
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return { route: INTERNAL, cause: undefined };
  return { route: /^E[A-Z]+$/.test(code) ? INTERNAL : REFUSED, cause: code };
}

/** The JSON-RPC error number for a companion code: application errors share -32000, `internal` is -32603. */
export function jsonRpcNumber(code: CompanionErrorCode): number {
  return code === 'internal' ? JsonRpcErrorNumber.InternalError : JsonRpcErrorNumber.ApplicationError;
}

/** The CLI exit code for an error a command threw (1 for an error of no service). */
export function exitCodeFor(err: unknown): CliExitCode {
  return routeError(err).route.exit;
}

/** The HTTP status the local gateway / Runs API answers for a product error it maps, or undefined if none is mapped. */
export function httpStatusFor(err: unknown): number | undefined {
  return routeError(err).route.http;
}

/** The companion protocol's error for any thrown value (a CompanionError passes through). */
export function toCompanionError(err: unknown): CompanionError {
  if (err instanceof CompanionError) return err;
  const { route, cause } = routeError(err);
  return new CompanionError(route.rpc, err instanceof Error ? err.message : String(err), cause);
}
