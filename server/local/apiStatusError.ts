// Errors of the local Runs API, shaped like the Kubernetes API server's `Status` objects
// (kind Status, reason, code, details.causes) so kubectl-minded clients and the kruntimes
// provider handle local and cluster Runs alike.
import { RUN_GROUP } from '../../protocol/kruntimes/run';

export type StatusReason = 'NotFound' | 'AlreadyExists' | 'Invalid' | 'BadRequest' | 'Unauthorized' | 'MethodNotAllowed' | 'InternalError' | 'UnsupportedMediaType' | 'RequestEntityTooLarge';

export class ApiStatusError extends Error {
  override readonly name = 'ApiStatusError';
  constructor(
    readonly code: number,
    readonly reason: StatusReason,
    message: string,
    readonly runName?: string,
    readonly causes?: Array<{ reason: string; message: string; field: string }>,
  ) {
    super(message);
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
  return new ApiStatusError(404, 'NotFound', `runs.${RUN_GROUP} "${name}" not found`, name);
}

/** 422 for a rule on `spec` (the CEL rules kruntimes' CRD has). */
export function invalidSpec(name: string, fullMessage: string, ruleMessage: string): ApiStatusError {
  return new ApiStatusError(422, 'Invalid', fullMessage, name, [
    { reason: 'FieldValueInvalid', message: `Invalid value: "object": ${ruleMessage}`, field: 'spec' },
  ]);
}
