// Who may use a Session Run's access API. `AccessAuthorizer` is the seam: the local daemon's
// `BearerAuth` (one random token per daemon) implements it, and an embedding caller — the
// cluster simulator — can plug in Kubernetes-style checks (TokenReview/SubjectAccessReview
// answers: 401, 403 or 503) without changing the access API's era-C check order.
// The daemon's bearer token is 32 random bytes, base64url; a request's token is compared in
// constant time (SHA-256 of both, then timingSafeEqual), so neither its content nor its length
// leaks through timing. The scheme is case-insensitive and the token trimmed, as kruntimes does.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayMessages } from '../../protocol/kruntimes/gateway';

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** An authorization decision; the message becomes the `{"error":…}` body. */
export type AuthResult = { ok: true } | { ok: false; status: 401 | 403 | 503; message: string };

/** The Run a request resolved to (authorized against its name, as a SubjectAccessReview would). */
export interface AccessRunIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/** Decides whether a request may access one resolved Session Run. */
export interface AccessAuthorizer {
  authorize(headers: IncomingHttpHeaders, run: AccessRunIdentity): AuthResult | Promise<AuthResult>;
}

/** The bearer token from an `Authorization` header (scheme case-insensitive, token trimmed), or ''. */
export function bearerToken(headers: IncomingHttpHeaders): string {
  const header = headers.authorization;
  const m = header ? /^\s*bearer\s+(.*)$/i.exec(header) : null;
  return m?.[1]?.trim() ?? '';
}

export class BearerAuth implements AccessAuthorizer {
  private readonly expected: Buffer;
  constructor(token: string) {
    this.expected = createHash('sha256').update(token, 'utf8').digest();
  }

  /** The daemon token check (also used by the local Runs API, which has no Run to authorize against). */
  check(headers: IncomingHttpHeaders): AuthResult {
    const token = bearerToken(headers);
    if (token === '') return { ok: false, status: 401, message: GatewayMessages.bearerRequired };
    const got = createHash('sha256').update(token, 'utf8').digest();
    if (!timingSafeEqual(got, this.expected)) return { ok: false, status: 401, message: GatewayMessages.bearerNotAuthenticated };
    return { ok: true };
  }

  /** The daemon token grants every local Run. */
  authorize(headers: IncomingHttpHeaders, _run: AccessRunIdentity): AuthResult {
    return this.check(headers);
  }
}
