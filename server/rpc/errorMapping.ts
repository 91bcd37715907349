// Maps the services' typed errors (bundle, repository, gateway, Run state) onto the companion
// protocol's stable codes, keeping the service's own code as `cause`. Services never import rpc;
// this is the one place that knows both sides.
import { CompanionError, type CompanionErrorCode } from '../../protocol/companion';

const NOT_FOUND = new Set(['session_not_found', 'revision_not_available', 'source_revision_not_available', 'object_not_found', 'sandbox_not_found']);
const CONFLICT = new Set([
  'revision_conflict',
  'session_already_exists',
  'idempotency_conflict',
  'destination_exists',
  'invalid_fork_target',
  'fork_agent_mismatch',
  'source_changed',
  'cluster_conflict',
]);
const UNAVAILABLE = new Set(['gateway_unreachable', 'outcome_unknown', 'io_failure', 'provider_unavailable', 'port_forward_failed']);
const NOT_READY = new Set(['run_state']);

function gatewayCode(status: number): CompanionErrorCode {
  if (status === 404) return 'not_found';
  if (status === 409) return 'not_ready';
  if (status === 429 || status === 503 || status === 504) return 'unavailable';
  return 'refused';
}

/** The companion error for any thrown value; unknown errors become `internal`. */
export function toCompanionError(err: unknown): CompanionError {
  if (err instanceof CompanionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return new CompanionError('internal', message);
  if (code === 'gateway_http') {
    const status = (err as { status?: unknown }).status;
    return new CompanionError(gatewayCode(typeof status === 'number' ? status : 500), message, `http_${String(status)}`);
  }
  if (NOT_FOUND.has(code)) return new CompanionError('not_found', message, code);
  if (CONFLICT.has(code)) return new CompanionError('conflict', message, code);
  if (UNAVAILABLE.has(code)) return new CompanionError('unavailable', message, code);
  if (NOT_READY.has(code)) return new CompanionError('not_ready', message, code);
  // Node system errors (ENOENT, EACCES…) carry a code too; they are unexpected here.
  if (/^E[A-Z]+$/.test(code)) return new CompanionError('internal', message, code);
  return new CompanionError('refused', message, code);
}
