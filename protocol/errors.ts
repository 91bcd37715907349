// The one base of every error the product throws on purpose (in the server and in the shared contracts), modelled
// on undici's `UndiciError`: a `service` naming who refused, a stable `code` from that service's own union, a
// message a person can act on, and optionally the underlying `cause` and bounded `details`. Callers branch on
// `service` + `code` (a string, or for the Runs API's Kubernetes-style Status the HTTP status number), never on the message; server/errorMapping.ts turns that pair into the JSON-RPC code, the HTTP
// status, the MCP tool error and the CLI exit code. Protocol imports nothing of ours, so the base lives here and the
// server's classes extend it.

export interface SandboxSessionsErrorOptions {
  cause?: unknown;
  /** Small, bounded facts (numbers, enum values) a caller may show or branch on; never secrets or raw paths. */
  details?: Readonly<Record<string, unknown>> | undefined;
}

export abstract class SandboxSessionsError<Code extends string | number = string | number> extends Error {
  /** Which service's code union `code` belongs to (a key of server/errorMapping.ts's table). */
  abstract readonly service: string;
  readonly code: Code;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: Code, message: string, options?: SandboxSessionsErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options?.details;
  }
}

export function isSandboxSessionsError(err: unknown): err is SandboxSessionsError {
  return err instanceof SandboxSessionsError;
}
