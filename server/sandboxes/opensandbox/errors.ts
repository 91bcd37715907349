// Errors of the OpenSandbox substrate: a stable gRPC-style code (as every other substrate
// reports), the upstream code and HTTP status when there was one, and a message that says what
// to do. Built from the SDK's exceptions without ever copying request headers (the API key).
import { SandboxApiException, SandboxError, SandboxException, SandboxReadyTimeoutException } from '@alibaba-group/opensandbox';
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
    if (err.statusCode === 401) return unauthenticated(what, domain, upstreamCode, detail, upstream);
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

/** Codes of the server's own key check (middleware/auth.py), which a right key fixes. */
const API_KEY_CODES = new Set(['MISSING_API_KEY', 'INVALID_API_KEY']);

/**
 * A 401. The server's key check says which of its two answers it gave; any other code is a server (or a proxy in
 * front of it) that wants more than the key — newer OpenSandbox servers can also require a trusted identity — and
 * its own words are said, not a key's refusal that a new key would not fix.
 */
function unauthenticated(what: string, domain: string, upstreamCode: string, detail: string | undefined, upstream: OpenSandboxError['upstream']): OpenSandboxError {
  const setKey = `Set OPEN_SANDBOX_API_KEY (or the extension's "Set OpenSandbox API Key…") to a key of that server.`;
  const uncoded = upstreamCode === SandboxError.UNEXPECTED_RESPONSE; // a body without a code: not the key check's
  const said = detail?.replace(/\.$/, ''); // ends a sentence of ours
  if (API_KEY_CODES.has(upstreamCode) || uncoded) {
    const why = upstreamCode === 'MISSING_API_KEY' ? 'no API key was sent' : 'the API key was refused';
    return new OpenSandboxError('Unauthenticated', `${what}: OpenSandbox at ${domain} answered 401 (${why}${uncoded && said ? `: ${said}` : ''}). ${setKey}`, upstream);
  }
  return new OpenSandboxError(
    'Unauthenticated',
    `${what}: OpenSandbox at ${domain} answered 401 ${upstreamCode}${said ? `: ${said}` : ''}. The server wants more than an API key (an identity that a proxy in front of it adds, say): ask its operator how clients authenticate.`,
    upstream,
  );
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
