// The one error table (server/errorMapping.ts): every code of every service's union has a row (checked by the
// compiler through `satisfies` and the `covers` checks below, and again at run time), every product error reaches a
// real JSON-RPC client with its row's code and its own code as `cause`, and the codes clients, agents and scripts
// branch on stay what they were: the JSON-RPC data, the MCP tool error text and the CLI exit code.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { createMessageConnection, type MessageConnection, ResponseError, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import { ActivationErrorCodeSchema } from '../../../protocol/activation';
import { SessionBundleErrorCodeSchema, SessionSnapshotErrorCodeSchema } from '../../../protocol/bundle';
import { CompanionError, CompanionErrorCodeSchema, companionMethods, JsonRpcErrorNumber } from '../../../protocol/companion';
import { SandboxSessionsError } from '../../../protocol/errors';
import { GatewayError, GatewayTransportError } from '../../../protocol/kruntimes/gatewayErrors';
import { GrpcCode, httpStatusForGrpc } from '../../../protocol/kruntimes/gateway';
import { RunStateError } from '../../../protocol/kruntimes/run';
import { TerminalRefusedError } from '../../../protocol/kruntimes/terminalSocket';
import { SessionRepositoryErrorCodeSchema } from '../../../protocol/repository';
import { ActivationError } from '../../../server/activation/errors';
import { SessionBundleError, SessionSnapshotError } from '../../../server/bundle/errors';
import { UsageError } from '../../../server/cli/args';
import { ERROR_ROUTES, type ErrorService, exitCodeFor, httpStatusFor, routeError, type ServiceCodes } from '../../../server/errorMapping';
import { GatewayStartError } from '../../../server/gateway/daemonClient';
import { BodyTooLargeError } from '../../../server/gateway/httpBodies';
import { LocalApiError } from '../../../server/gateway/localClient';
import { ApiStatusError } from '../../../server/local/apiStatusError';
import { ArtifactStoreError } from '../../../server/local/artifactStore';
import { ArtifactInvalidError } from '../../../server/local/artifactExport';
import { RecordError } from '../../../server/local/atomicFile';
import { CommandLostError } from '../../../server/local/commandLost';
import { TarError } from '../../../server/local/deterministicTar';
import { OperationAbort } from '../../../server/local/operationAbort';
import { SessionError } from '../../../server/local/sessionError';
import type { Logger } from '../../../server/log';
import { McpHttpSetupError } from '../../../server/mcp/httpTransport';
import { McpToolError, toolErrorResult } from '../../../server/mcp/toolErrors';
import { SessionRepositoryError } from '../../../server/repository/errors';
import { type MethodHandlers, startCompanionServer } from '../../../server/rpc/companionServer';
import { FrameError } from '../../../server/rpc/framing';
import { KubeConfigError } from '../../../server/sandboxes/kruntimes/kubeconfig';
import { LeaseKeeperUsageError, LeaseLostError } from '../../../server/sandboxes/leaseKeeper';
import { OpenSandboxError } from '../../../server/sandboxes/opensandbox/errors';
import { SandboxError } from '../../../server/sandboxes/provider';
import { TransferError } from '../../../server/sandboxes/transfer';
import { CommandSearchFailed, CommandSearchUnavailable } from '../../../server/search/commandSearch';
import { SearchPathError } from '../../../server/search/hostTree';
import { SearchQueryError } from '../../../server/search/textMatcher';
import { RevisionBrowseError } from '../../../server/sessions/revisionIndex';
import { SessionExportError } from '../../../server/sessions/sandboxSessions';
import { everyProductError, PRODUCT_ERRORS } from '../../fixtures/productErrors';

/**
 * Compile-time: a class's `service` must be a key of the table and every code its union allows must be in that
 * service's union (and so, through `satisfies`, have a row). Adding a code to a class without a row fails `tsc`.
 */
function covers<E extends { readonly service: ErrorService; readonly code: string | number }>(_: E['code'] extends ServiceCodes[E['service']] ? true : never): true {
  return true;
}
const EVERY_CLASS_COVERED: true[] = [
  covers<CompanionError>(true),
  covers<GatewayError>(true) && covers<GatewayTransportError>(true),
  covers<RunStateError>(true),
  covers<TerminalRefusedError>(true),
  covers<SessionRepositoryError>(true),
  covers<ActivationError>(true),
  covers<SessionBundleError>(true),
  covers<SessionSnapshotError>(true),
  covers<SandboxError>(true),
  covers<TransferError>(true),
  covers<LeaseLostError>(true) && covers<LeaseKeeperUsageError>(true),
  covers<KubeConfigError>(true),
  covers<OpenSandboxError>(true),
  covers<LocalApiError>(true) && covers<BodyTooLargeError>(true) && covers<GatewayStartError>(true),
  covers<SessionError>(true) && covers<CommandLostError>(true),
  covers<ApiStatusError>(true),
  covers<RecordError>(true),
  covers<TarError>(true) && covers<ArtifactStoreError>(true) && covers<ArtifactInvalidError>(true),
  covers<OperationAbort>(true),
  covers<SearchQueryError>(true) && covers<SearchPathError>(true) && covers<CommandSearchUnavailable>(true) && covers<CommandSearchFailed>(true),
  covers<SessionExportError>(true) && covers<RevisionBrowseError>(true),
  covers<FrameError>(true),
  covers<UsageError>(true),
  covers<McpToolError>(true),
  covers<McpHttpSetupError>(true),
];

const quietLog: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** A real companion server over in-memory pipes whose every method throws `next` (what a service threw). */
function serverThatThrows(): { client: MessageConnection; throwNext(err: unknown): void; dispose(): void } {
  const toServer = new PassThrough();
  const toClient = new PassThrough();
  let next: unknown = new Error('nothing queued');
  const handlers = Object.fromEntries(
    Object.keys(companionMethods).map((name) => [
      name,
      () => {
        throw next;
      },
    ]),
  ) as unknown as MethodHandlers;
  const server = startCompanionServer({ input: toServer, output: toClient, handlers, log: quietLog });
  const client = createMessageConnection(new StreamMessageReader(toClient), new StreamMessageWriter(toServer));
  client.listen();
  return {
    client,
    throwNext: (err) => {
      next = err;
    },
    dispose: () => {
      client.dispose();
      server.dispose();
      toServer.end();
      toClient.end();
    },
  };
}

async function rpcErrorOf(rpc: ReturnType<typeof serverThatThrows>, err: unknown): Promise<{ number: number; data: unknown; message: string }> {
  rpc.throwNext(err);
  try {
    await rpc.client.sendRequest('sandboxes/list', { provider: 'local' });
  } catch (e) {
    assert.ok(e instanceof ResponseError, `not a JSON-RPC error: ${String(e)}`);
    return { number: e.code, data: e.data, message: e.message };
  }
  assert.fail('the request succeeded');
}

describe('error mapping: one table from (service, code) to JSON-RPC, MCP, exit and HTTP', function () {
  this.timeout(30_000);

  it('has a row for every code of the unions the wire contracts enumerate', () => {
    assert.equal(EVERY_CLASS_COVERED.length, 25);
    const enumerated: [ErrorService, readonly string[]][] = [
      ['companion', CompanionErrorCodeSchema.options],
      ['repository', SessionRepositoryErrorCodeSchema.options],
      ['activation', ActivationErrorCodeSchema.options],
      ['bundle', SessionBundleErrorCodeSchema.options],
      ['snapshot', SessionSnapshotErrorCodeSchema.options],
      ['opensandbox', Object.keys(GrpcCode)],
      ['session', [...Object.keys(GrpcCode), 'CommandLost', 'ParentUnresolved']],
    ];
    for (const [service, codes] of enumerated) {
      assert.deepEqual(Object.keys(ERROR_ROUTES[service]).sort(), [...codes].sort(), `${service}: rows differ from its code union`);
    }
  });

  it('builds every (service, code) with the class that throws it, and routes it by its own row', () => {
    const all = everyProductError();
    assert.ok(all.length > 150, `only ${all.length} rows`);
    for (const { service, code, error } of all) {
      assert.ok(error instanceof SandboxSessionsError);
      assert.equal(error.service, service);
      assert.equal(String(error.code), code);
      assert.equal(routeError(error).route, (ERROR_ROUTES[service] as Record<string, unknown>)[code], `${service}.${code}`);
    }
  });

  it('answers a JSON-RPC client with each row’s code and the service’s code as cause, for every row', async () => {
    const rpc = serverThatThrows();
    try {
      for (const { service, code, error } of everyProductError()) {
        const route = routeError(error).route;
        const got = await rpcErrorOf(rpc, error);
        const cause = error instanceof CompanionError ? error.causeCode : error instanceof GatewayError ? `http_${error.status}` : code;
        assert.deepEqual(got.data, { code: route.rpc, cause }, `${service}.${code}`);
        assert.equal(got.number, route.rpc === 'internal' ? JsonRpcErrorNumber.InternalError : JsonRpcErrorNumber.ApplicationError);
        assert.equal(got.message, error.message);
      }
    } finally {
      rpc.dispose();
    }
  });

  it('keeps the stable JSON-RPC codes clients branch on', async () => {
    const pinned: [unknown, number, unknown][] = [
      [new SessionRepositoryError('revision_conflict', 'r2 is not the head'), -32000, { code: 'conflict', cause: 'revision_conflict' }],
      [new SessionRepositoryError('session_not_found', 'no such session'), -32000, { code: 'not_found', cause: 'session_not_found' }],
      [new SessionRepositoryError('io_failure', 'disk'), -32000, { code: 'unavailable', cause: 'io_failure' }],
      [new ActivationError('session_busy', 'busy'), -32000, { code: 'refused', cause: 'session_busy' }],
      [new ActivationError('source_revision_not_available', 'gone'), -32000, { code: 'not_found', cause: 'source_revision_not_available' }],
      [new SessionBundleError('destination_exists', 'exists'), -32000, { code: 'conflict', cause: 'destination_exists' }],
      [new SessionSnapshotError('source_changed', 'changed'), -32000, { code: 'conflict', cause: 'source_changed' }],
      [new SandboxError('sandbox_not_found', 'no sandbox'), -32000, { code: 'not_found', cause: 'sandbox_not_found' }],
      [new SandboxError('provider_unavailable', 'down'), -32000, { code: 'unavailable', cause: 'provider_unavailable' }],
      [new SandboxError('cluster_conflict', 'conflict'), -32000, { code: 'conflict', cause: 'cluster_conflict' }],
      [new SandboxError('invalid_spec', 'bad spec'), -32000, { code: 'refused', cause: 'invalid_spec' }],
      [new RunStateError('Session Run is not ready', {}), -32000, { code: 'not_ready', cause: 'run_state' }],
      [new GatewayError(404, 'file not found'), -32000, { code: 'not_found', cause: 'http_404' }],
      [new GatewayError(409, 'Session Run is Finalizing, not Ready'), -32000, { code: 'not_ready', cause: 'http_409' }],
      [new GatewayError(429, 'queue full'), -32000, { code: 'unavailable', cause: 'http_429' }],
      [new GatewayError(400, 'bad path'), -32000, { code: 'refused', cause: 'http_400' }],
      [new GatewayTransportError('reset', true), -32000, { code: 'unavailable', cause: 'outcome_unknown' }],
      [new SearchQueryError('bad regex'), -32000, { code: 'invalid_params', cause: 'search_query' }],
      [new SearchPathError('no folder /x'), -32000, { code: 'not_found', cause: 'search_path' }],
      [new SessionExportError('exists'), -32000, { code: 'conflict', cause: 'destination_exists' }],
      [new OpenSandboxError('Unavailable', 'down'), -32000, { code: 'refused', cause: 'Unavailable' }],
      [new UsageError('bad flag'), -32000, { code: 'refused', cause: 'usage' }],
      [new CompanionError('not_ready', 'wait', 'local_port_fixed'), -32000, { code: 'not_ready', cause: 'local_port_fixed' }],
      [new KubeConfigError('no kubeconfig'), -32603, { code: 'internal', cause: 'kubeconfig_invalid' }],
      [Object.assign(new Error('no such file'), { code: 'ENOENT' }), -32603, { code: 'internal', cause: 'ENOENT' }],
      [Object.assign(new Error('library refused'), { code: 'UND_ERR_ABORTED' }), -32000, { code: 'refused', cause: 'UND_ERR_ABORTED' }],
      [new Error('a bug'), -32603, { code: 'internal' }],
    ];
    const rpc = serverThatThrows();
    try {
      for (const [err, number, data] of pinned) {
        const got = await rpcErrorOf(rpc, err);
        assert.deepEqual([got.number, got.data], [number, data], (err as Error).message);
      }
    } finally {
      rpc.dispose();
    }
  });

  it('keeps the MCP tool error texts agents read', () => {
    const text = (err: unknown) => (toolErrorResult(err).content[0] as { text: string }).text;
    assert.equal(text(new ActivationError('session_busy', 'an activation holds the session')), 'busy: an activation holds the session (session_busy); try again when the running activation has finished');
    assert.equal(text(new SandboxError('sandbox_not_found', 'no sandbox s1')), 'not_found: no sandbox s1; sandbox_list shows the sandboxes this server may use');
    assert.equal(text(new GatewayError(404, 'open /x: no such file')), 'not_found: open /x: no such file (check the path with sandbox_list_files)');
    assert.equal(text(new RunStateError('Session Run is not ready', {})), 'not_ready: Session Run is not ready; only a Ready sandbox takes commands and file changes');
    assert.equal(text(new SessionRepositoryError('revision_conflict', 'head moved')), 'conflict: head moved (revision_conflict)');
    assert.equal(text(new SearchQueryError('bad regex')), 'invalid_argument: bad regex');
    assert.equal(text(new SessionBundleError('quota_exceeded', 'too big')), 'failed: too big (quota_exceeded)');
    assert.equal(text(Object.assign(new Error('gone'), { code: 'ENOENT' })), 'failed: gone');
  });

  it('gives the CLI its exit codes: 2 for usage, 3 for a refusal by someone else’s state, 1 otherwise', () => {
    assert.equal(exitCodeFor(new UsageError('bad flag')), 2);
    assert.equal(exitCodeFor(new ActivationError('invalid_request', 'bad request')), 2);
    for (const code of ['session_busy', 'activation_in_progress', 'idempotency_conflict', 'revision_conflict'] as const) assert.equal(exitCodeFor(new ActivationError(code, code)), 3, code);
    for (const code of ['revision_conflict', 'session_already_exists', 'idempotency_conflict', 'invalid_fork_target'] as const) assert.equal(exitCodeFor(new SessionRepositoryError(code, code)), 3, code);
    assert.equal(exitCodeFor(new SessionRepositoryError('session_not_found', 'x')), 1);
    assert.equal(exitCodeFor(new SessionBundleError('io_failure', 'x')), 1);
    assert.equal(exitCodeFor(new Error('a bug')), 1);
  });

  it('gives the local gateway and Runs API the HTTP status of the errors they answer', () => {
    for (const name of Object.keys(GrpcCode) as (keyof typeof GrpcCode)[]) {
      assert.equal(httpStatusFor(PRODUCT_ERRORS.session(name)), httpStatusForGrpc(GrpcCode[name]), name);
      assert.equal(httpStatusFor(PRODUCT_ERRORS.session(name)), new SessionError(name, 'x').httpStatus, name);
    }
    assert.equal(httpStatusFor(new CommandLostError(1, [2], 1000)), 500);
    assert.equal(httpStatusFor(new ApiStatusError('AlreadyExists', 'x')), 409);
    assert.equal(new ApiStatusError('Invalid', 'x').toStatus().code, 422);
    assert.equal(httpStatusFor(new BodyTooLargeError('x')), 413);
  });
});
