// The daemon's bearer token: 32 random bytes, base64url. A request's token is compared in
// constant time (SHA-256 of both, then timingSafeEqual), so neither its content nor its length
// leaks through timing. The scheme is case-insensitive and the token trimmed, as kruntimes does.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayMessages } from '../../protocol/kruntimes/gateway';

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

export type AuthResult = { ok: true } | { ok: false; status: 401; message: string };

export class BearerAuth {
  private readonly expected: Buffer;
  constructor(token: string) {
    this.expected = createHash('sha256').update(token, 'utf8').digest();
  }

  check(headers: IncomingHttpHeaders): AuthResult {
    const header = headers.authorization;
    const m = header ? /^\s*bearer\s+(.*)$/i.exec(header) : null;
    const token = m?.[1]?.trim() ?? '';
    if (token === '') return { ok: false, status: 401, message: GatewayMessages.bearerRequired };
    const got = createHash('sha256').update(token, 'utf8').digest();
    if (!timingSafeEqual(got, this.expected)) return { ok: false, status: 401, message: GatewayMessages.bearerNotAuthenticated };
    return { ok: true };
  }
}
