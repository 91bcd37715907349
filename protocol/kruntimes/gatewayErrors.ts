// Typed errors of the Runtime access API client, each with a stable `code` so callers (the
// file system provider, the terminal, the CLI) can map them without parsing messages.

/** A non-2xx answer from a gateway: the status and the `{"error"}` text, verbatim. */
export class GatewayError extends Error {
  override readonly name = 'GatewayError';
  readonly code = 'gateway_http';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
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
export class GatewayTransportError extends Error {
  override readonly name = 'GatewayTransportError';
  readonly code: 'gateway_unreachable' | 'outcome_unknown';
  constructor(
    message: string,
    readonly outcomeUnknown: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = outcomeUnknown ? 'outcome_unknown' : 'gateway_unreachable';
  }
}

/** The gateway answered 2xx with bytes that are not the documented shape (or are too large). */
export class GatewayProtocolError extends Error {
  override readonly name = 'GatewayProtocolError';
  readonly code = 'gateway_protocol';
}

/** The caller asked for something the API cannot express (an absolute path, `..`, maxBytes > 786000). */
export class GatewayUsageError extends Error {
  override readonly name = 'GatewayUsageError';
  readonly code = 'invalid_argument';
}
