// How a directory listing is paged, as the kruntimes gateway pages it (limit range, page token bound to the
// directory, names in byte order, the last name of a page as the next token): one module, so the host workspace
// (fileOperations.ts) and OpenSandbox's (opensandboxWorkspace.ts) page alike.
import { GatewayLimits, GatewayMessages } from '../../protocol/kruntimes/gateway';
import { decodePageToken, encodePageToken } from '../../protocol/kruntimes/pageToken';
import { invalidArgument } from './sessionError';

/** Byte-wise UTF-8 order (é after z), the order of a listing. */
export function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The name a page starts after ('' for the first page); InvalidArgument for a limit out of range or a bad token. */
export function pageStart(dir: string, limit: number, pageToken: string): string {
  if (limit < 1 || limit > GatewayLimits.listMaxLimit) throw invalidArgument(GatewayMessages.limitRange);
  if (pageToken === '') return '';
  const check = decodePageToken(pageToken, dir);
  if (!check.ok) throw invalidArgument(check.message);
  return check.after;
}

/** The page of `items` (sorted here by name) after `after`, and the next page's token ('' on the last page). */
export function takePage<T>(items: T[], nameOf: (item: T) => string, dir: string, after: string, limit: number): { page: T[]; nextPageToken: string } {
  items.sort((a, b) => byteCompare(nameOf(a), nameOf(b)));
  const remaining = after === '' ? items : items.filter((item) => byteCompare(nameOf(item), after) > 0);
  const page = remaining.slice(0, limit);
  const last = page[page.length - 1];
  return { page, nextPageToken: remaining.length > page.length && last !== undefined ? encodePageToken(dir, nameOf(last)) : '' };
}
