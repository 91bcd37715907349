// Errors of the local Runs API, shaped like the Kubernetes API server's `Status` objects
// (kind Status, reason, code, details.causes) so kubectl-minded clients and the kruntimes
// provider handle local and cluster Runs alike.
import { RUN_GROUP } from '../../protocol/kruntimes/run';
import { SandboxSessionsError } from '../../protocol/errors';

/** Each Status reason's HTTP status, as the Kubernetes API server answers it (the Runs API's only status table). */
export const RUNS_API_STATUS = {
  BadRequest: 400,
  Unauthorized: 401,
  NotFound: 404,
  MethodNotAllowed: 405,
  AlreadyExists: 409,
  Conflict: 409,
  RequestEntityTooLarge: 413,
  UnsupportedMediaType: 415,
  Invalid: 422,
  InternalError: 500,
  ServiceUnavailable: 503,
} as const;
export type StatusReason = keyof typeof RUNS_API_STATUS;
/** The Runs API's codes: a Status `code`, which is the HTTP status (as the Kubernetes API server's). */
export type RunsApiStatusCode = (typeof RUNS_API_STATUS)[StatusReason];

/** `code` is the Status code (= HTTP status, as embedding callers and Kubernetes clients expect); `reason` names it. */
export class ApiStatusError extends SandboxSessionsError<RunsApiStatusCode> {
  override readonly name = 'ApiStatusError';
  readonly service = 'runs-api';
  constructor(
    readonly reason: StatusReason,
    message: string,
    readonly runName?: string,
    readonly causes?: Array<{ reason: string; message: string; field: string }>,
  ) {
    super(RUNS_API_STATUS[reason], message);
  }

  get status(): number {
    return this.code;
  }

  toStatus(): Record<string, unknown> {
    const details: Record<string, unknown> = {};
    if (this.runName !== undefined) {
      details.name = this.runName;
      details.group = RUN_GROUP;
      details.kind = 'runs';
    }
    if (this.causes) details.causes = this.causes;
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(Object.keys(details).length > 0 ? { details } : {}),
      code: this.code,
    };
  }
}

export function runNotFound(name: string): ApiStatusError {
  return new ApiStatusError('NotFound', `runs.${RUN_GROUP} "${name}" not found`, name);
}

/** 422 for a rule on `spec` (the CEL rules kruntimes' CRD has). */
export function invalidSpec(name: string, fullMessage: string, ruleMessage: string): ApiStatusError {
  return new ApiStatusError('Invalid', fullMessage, name, [
    { reason: 'FieldValueInvalid', message: `Invalid value: "object": ${ruleMessage}`, field: 'spec' },
  ]);
}
