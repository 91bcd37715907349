// Errors of the OpenSandbox substrate: a stable gRPC-style code (as every other substrate
// reports), the upstream code and HTTP status when there was one, and a message that says what
// to do. Built from the SDK's exceptions without ever copying request headers (the API key).
import { SandboxApiException, SandboxException, SandboxReadyTimeoutException } from '@alibaba-group/opensandbox';
import type { GrpcCodeName } from '../../../protocol/kruntimes/gateway';
import { SandboxSessionsError } from '../../../protocol/errors';

export class OpenSandboxError extends SandboxSessionsError<GrpcCodeName> {
  override readonly name = 'OpenSandboxError';
  readonly service = 'opensandbox';
  constructor(
    code: GrpcCodeName,
    message: string,
    readonly upstream?: { status?: number; code?: string; requestId?: string },
  ) {
    super(code, message);
  }
}

function statusCode(status: number | undefined): GrpcCodeName {
  switch (status) {
    case 400:
    case 413:
    case 416:
    case 422:
      return 'InvalidArgument';
    case 401:
      return 'Unauthenticated';
    case 403:
      return 'PermissionDenied';
    case 404:
      return 'NotFound';
    case 409:
    case 412:
    case 426:
      return 'FailedPrecondition';
    case 429:
      return 'ResourceExhausted';
    case 502:
    case 503:
    case 504:
      return 'Unavailable';
    default:
      return 'Internal';
  }
}

/** Maps anything the SDK (or fetch) threw to an OpenSandboxError; `what` names the operation. */
export function toOpenSandboxError(err: unknown, what: string, domain: string): OpenSandboxError {
  if (err instanceof OpenSandboxError) return err;
  if (err instanceof SandboxApiException) {
    const upstreamCode = err.error.code;
    const detail = upstreamMessage(err);
    const upstream = { status: err.statusCode, code: upstreamCode, requestId: err.requestId };
    if (err.statusCode === 401) {
      const why = upstreamCode === 'MISSING_API_KEY' ? 'no API key was sent' : 'the API key was refused';
      return new OpenSandboxError('Unauthenticated', `${what}: OpenSandbox at ${domain} answered 401 (${why}). Set OPEN_SANDBOX_API_KEY (or the extension's "Set OpenSandbox API Key…") to a key of that server.`, upstream);
    }
    if (err.statusCode === 404) return new OpenSandboxError('NotFound', `${what}: not found${detail ? ` (${detail})` : ''}. The sandbox may have expired (its TTL) or been deleted.`, upstream);
    return new OpenSandboxError(statusCode(err.statusCode), `${what} failed: HTTP ${err.statusCode ?? '?'} ${upstreamCode}${detail ? `: ${detail}` : ''}`, upstream);
  }
  if (err instanceof SandboxReadyTimeoutException) {
    return new OpenSandboxError('DeadlineExceeded', `${what}: the sandbox's execd did not answer /ping in time (${err.message}). Check that the image starts and that ${domain} can reach the sandbox (try useServerProxy).`);
  }
  if (err instanceof SandboxException) return new OpenSandboxError('Internal', `${what} failed: ${err.message}`);
  const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
  const sys = e?.cause?.code ?? e?.code;
  if (sys === 'ECONNREFUSED' || sys === 'ENOTFOUND' || sys === 'ECONNRESET' || sys === 'UND_ERR_SOCKET' || (e instanceof TypeError && e.message === 'fetch failed')) {
    return new OpenSandboxError('Unavailable', `${what}: cannot reach OpenSandbox at ${domain} (${sys ?? e.message}). Is the server running, and is OPEN_SANDBOX_DOMAIN right?`);
  }
  return new OpenSandboxError('Internal', `${what} failed: ${e instanceof Error ? e.message : String(err)}`);
}

function upstreamMessage(err: SandboxApiException): string | undefined {
  const raw = err.rawBody;
  let body: unknown = raw;
  if (typeof raw === 'string') {
    try {
      body = JSON.parse(raw) as unknown;
    } catch {
      return raw.slice(0, 300) || err.error.message;
    }
  }
  if (body && typeof body === 'object') {
    const b = body as { message?: unknown; detail?: unknown; error?: unknown };
    if (typeof b.message === 'string') return b.message;
    if (Array.isArray(b.detail)) return b.detail.map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg ?? ''}`).join('; ');
    if (typeof b.error === 'string') return b.error;
  }
  return err.error.message;
}
