// The error every session operation throws: a gRPC code (as kruntimes' Runtime Server would
// return it) and the exact message. The gateway maps the code to HTTP with the kruntimes
// table, so local and cluster sandboxes fail the same way.
import { GrpcCode, type GrpcCodeName, httpStatusForGrpc } from '../../protocol/kruntimes/gateway';

export class SessionError extends Error {
  override readonly name = 'SessionError';
  constructor(
    readonly grpc: GrpcCodeName,
    message: string,
  ) {
    super(message);
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
