// Typed errors of the Runtime access API client, each with a stable `code` so callers (the
// file system provider, the terminal, the CLI) can map them without parsing messages.
import { SandboxSessionsError } from '../errors';

/** The `gateway` service's codes (server/errorMapping.ts maps each one). */
export type GatewayErrorCode = 'gateway_http' | 'gateway_unreachable' | 'outcome_unknown' | 'gateway_protocol' | 'invalid_argument';

/** A non-2xx answer from a gateway: the status and the `{"error"}` text, verbatim. */
export class GatewayError extends SandboxSessionsError<'gateway_http'> {
  override readonly name = 'GatewayError';
  readonly service = 'gateway';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super('gateway_http', message);
  }
  /** The SDK's wording, for logs and error popups. */
  describe(): string {
    return `Runtime access API returned HTTP ${this.status}: ${this.message}`;
  }
}

/**
 * The gateway could not be reached, or the connection broke. For a mutation that may have been
 * sent, `outcomeUnknown` is true: the operation may or may not have run, and it is never retried.
 */
export class GatewayTransportError extends SandboxSessionsError<'gateway_unreachable' | 'outcome_unknown'> {
  override readonly name = 'GatewayTransportError';
  readonly service = 'gateway';
  constructor(
    message: string,
    readonly outcomeUnknown: boolean,
    options?: { cause?: unknown },
  ) {
    super(outcomeUnknown ? 'outcome_unknown' : 'gateway_unreachable', message, options);
  }
}

/** The gateway answered 2xx with bytes that are not the documented shape (or are too large). */
export class GatewayProtocolError extends SandboxSessionsError<'gateway_protocol'> {
  override readonly name = 'GatewayProtocolError';
  readonly service = 'gateway';
  constructor(message: string) {
    super('gateway_protocol', message);
  }
}

/** The caller asked for something the API cannot express (an absolute path, `..`, maxBytes > 786000). */
export class GatewayUsageError extends SandboxSessionsError<'invalid_argument'> {
  override readonly name = 'GatewayUsageError';
  readonly service = 'gateway';
  constructor(message: string) {
    super('invalid_argument', message);
  }
}
