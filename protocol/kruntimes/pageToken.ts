// The list-page cursor of kruntimes Runtime Servers: unpadded base64url of
// {"v":1,"path":"<requested dir>","after":"<last returned name>"} (spec §2.8).
// Clients treat it as opaque; the local gateway issues and checks it exactly as Bash does.
import { z } from 'zod';
import { escapeGoHtml } from './goJson';

export const PAGE_TOKEN_INVALID = 'page token is invalid';
export const PAGE_TOKEN_MISMATCH = 'page token does not match the requested directory';

const PageTokenSchema = z.strictObject({
  v: z.number(),
  path: z.string(),
  after: z.string(),
});
export type PageToken = z.infer<typeof PageTokenSchema>;

/** Encodes the cursor the way the Bash runtime does (Go JSON, HTML-escaped, RawURLEncoding). */
export function encodePageToken(path: string, after: string): string {
  const json = escapeGoHtml(JSON.stringify({ v: 1, path, after }));
  return Buffer.from(json, 'utf8').toString('base64url');
}

export type PageTokenCheck = { ok: true; after: string } | { ok: false; message: string };

/** Decodes and validates a cursor for `path`; the messages are the runtime's 400 texts. */
export function decodePageToken(token: string, path: string): PageTokenCheck {
  if (!/^[A-Za-z0-9_-]*$/.test(token) || token.length % 4 === 1) return { ok: false, message: PAGE_TOKEN_INVALID };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, message: PAGE_TOKEN_INVALID };
  }
  const result = PageTokenSchema.safeParse(parsed);
  if (!result.success) return { ok: false, message: PAGE_TOKEN_INVALID };
  const t = result.data;
  if (t.v !== 1 || t.path !== path || t.after === '') return { ok: false, message: PAGE_TOKEN_MISMATCH };
  return { ok: true, after: t.after };
}
