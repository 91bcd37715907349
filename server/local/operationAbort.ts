// Why an operation was stopped before it finished. The reason decides what the caller sees:
// an explicit cancel is a command result with exit code −1, the operation deadline is 504
// `context deadline exceeded`, a closing session is 500 `session closed`, and a caller that
// went away sees nothing.
import { SandboxSessionsError } from '../../protocol/errors';
export type AbortKind = 'cancel' | 'deadline' | 'session' | 'client';

export class OperationAbort extends SandboxSessionsError<AbortKind> {
  override readonly name = 'OperationAbort';
  readonly service = 'operation';
  constructor(readonly kind: AbortKind) {
    super(
      kind,
      kind === 'deadline' ? 'context deadline exceeded' : kind === 'session' ? 'session closed' : 'context canceled',
    );
  }
}

export function abortKindOf(reason: unknown): AbortKind | undefined {
  return reason instanceof OperationAbort ? reason.kind : undefined;
}
