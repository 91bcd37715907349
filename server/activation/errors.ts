// The one error type activation and fork refusals throw, with stable codes (protocol/activation.ts)
// so the CLI and JSON-RPC can branch on `code` and show `message` to a person.
import type { ActivationErrorCode } from '../../protocol/activation';
import { SandboxSessionsError } from '../../protocol/errors';

export class ActivationError extends SandboxSessionsError<ActivationErrorCode> {
  override readonly name = 'ActivationError';
  readonly service = 'activation';
  constructor(code: ActivationErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }

  toPayload(): { name: 'ActivationError'; code: ActivationErrorCode; message: string } {
    return { name: 'ActivationError', code: this.code, message: this.message };
  }
}

export function isActivationError(err: unknown, code?: ActivationErrorCode): err is ActivationError {
  return err instanceof ActivationError && (code === undefined || err.code === code);
}
