// The error every session operation throws: a gRPC code (as kruntimes' Runtime Server would
// return it) and the exact message. The gateway maps the code to HTTP with the kruntimes
// table, so local and cluster sandboxes fail the same way.
import { GrpcCode, type GrpcCodeName, httpStatusForGrpc } from '../../protocol/kruntimes/gateway';
import { SandboxSessionsError } from '../../protocol/errors';

/**
 * The local runtime's codes: the gRPC code names, `CommandLost` (gRPC Internal on the wire) and `ParentUnresolved`
 * (a path's parent folder cannot be resolved; gRPC InvalidArgument, and a write with createParents makes it).
 */
export type SessionErrorCode = GrpcCodeName | 'CommandLost' | 'ParentUnresolved';

export class SessionError extends SandboxSessionsError<SessionErrorCode> {
  override readonly name = 'SessionError';
  readonly service = 'session';
  constructor(
    readonly grpc: GrpcCodeName,
    message: string,
    code: SessionErrorCode = grpc,
  ) {
    super(code, message);
  }
  get httpStatus(): number {
    return httpStatusForGrpc(GrpcCode[this.grpc]);
  }
  get grpcCode(): number {
    return GrpcCode[this.grpc];
  }
}

export const invalidArgument = (message: string): SessionError => new SessionError('InvalidArgument', message);
export const failedPrecondition = (message: string): SessionError => new SessionError('FailedPrecondition', message);
export const notFound = (message: string): SessionError => new SessionError('NotFound', message);
export const internal = (message: string): SessionError => new SessionError('Internal', message);

/** Go's os.PathError text for a Node errno error: `<op> <path>: <strerror>`. */
export function goPathError(op: string, file: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const text: Record<string, string> = {
    ENOENT: 'no such file or directory',
    ENOTDIR: 'not a directory',
    EISDIR: 'is a directory',
    EEXIST: 'file exists',
    EACCES: 'permission denied',
    ENOTEMPTY: 'directory not empty',
    ELOOP: 'too many levels of symbolic links',
  };
  return `${op} ${file}: ${(code && text[code]) ?? (err as Error).message}`;
}
