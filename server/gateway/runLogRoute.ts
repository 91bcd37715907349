// `GET /local/v1/namespaces/{ns}/runs/{name}/log`: runtimed's log of a local Run, answered as
// the Kubernetes API answers `pods/{name}/log` — `text/plain`, one line per log line, the query
// `tailLines`, `sinceTime`, `sinceSeconds`, `timestamps`, `follow` with Kubernetes' checks (a
// value that does not parse is 400 BadRequest, one out of range 422 Invalid), tail before since
// as the kubelet applies them, `timestamps` as `<RFC3339 with nine fractional digits> <line>`,
// and `follow` streaming until the Run's log ends (the Run is terminal and its session closed,
// or it is deleted) or the caller goes away.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiStatusError } from '../local/apiStatusError';
import { formatTimestampOut, parseRfc3339Ns, type ContainerLog, type LogEntry, type LogReadOptions } from '../local/containerLog';

export interface ParsedLogQuery extends LogReadOptions {
  timestamps: boolean;
  follow: boolean;
}

/** Go's strconv.ParseBool, which Kubernetes' query conversion uses. */
function parseBool(name: string, v: string): boolean {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  throw new ApiStatusError('BadRequest', `${name}: strconv.ParseBool: parsing "${v}": invalid syntax`);
}

function parseInteger(name: string, v: string): number {
  if (!/^[+-]?\d+$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw new ApiStatusError('BadRequest', `${name}: strconv.ParseInt: parsing "${v}": invalid syntax`);
  }
  return Number(v);
}

/** The query of a log request, checked as the Kubernetes API checks PodLogOptions (`kind` names the options in messages). */
export function parseLogQuery(url: URL, name: string, nowNs: bigint = BigInt(Date.now()) * 1_000_000n, kind = 'RunLogOptions'): ParsedLogQuery {
  const q = url.searchParams;
  const get = (k: string): string | undefined => q.get(k) ?? undefined;
  const invalid = (field: string, value: string, why: string): ApiStatusError =>
    new ApiStatusError('Invalid', `${kind} "${name}" is invalid: ${field}: Invalid value: ${value}: ${why}`, name, [
      { reason: 'FieldValueInvalid', message: `Invalid value: ${value}: ${why}`, field },
    ]);
  const out: ParsedLogQuery = {
    timestamps: get('timestamps') !== undefined ? parseBool('timestamps', get('timestamps') as string) : false,
    follow: get('follow') !== undefined ? parseBool('follow', get('follow') as string) : false,
  };
  const tail = get('tailLines');
  if (tail !== undefined) {
    const n = parseInteger('tailLines', tail);
    if (n < 0) throw invalid('tailLines', String(n), 'must be greater than or equal to 0');
    out.tailLines = n;
  }
  const sinceTime = get('sinceTime');
  const sinceSeconds = get('sinceSeconds');
  if (sinceTime !== undefined && sinceSeconds !== undefined) {
    throw new ApiStatusError('Invalid', `${kind} "${name}" is invalid: [] : Forbidden: at most one of \`sinceTime\` or \`sinceSeconds\` may be specified`, name);
  }
  if (sinceTime !== undefined) {
    const ns = parseRfc3339Ns(sinceTime);
    if (ns === undefined) throw new ApiStatusError('BadRequest', `sinceTime: parsing time "${sinceTime}" as RFC 3339: cannot parse`);
    out.sinceNs = ns;
  }
  if (sinceSeconds !== undefined) {
    const n = parseInteger('sinceSeconds', sinceSeconds);
    if (n < 1) throw invalid('sinceSeconds', String(n), 'must be greater than 0');
    out.sinceNs = nowNs - BigInt(n) * 1_000_000_000n;
  }
  return out;
}

function render(e: LogEntry, timestamps: boolean): string {
  return `${timestamps ? `${formatTimestampOut(e.timeNs)} ` : ''}${e.content}\n`;
}

/** Checks the query, then finds the Run's log (`findLog` throws 404), then answers. */
export function serveRunLog(req: IncomingMessage, res: ServerResponse, findLog: () => ContainerLog, url: URL, name: string): void {
  const query = parseLogQuery(url, name);
  const log = findLog();
  if (!query.follow) {
    const body = Buffer.from(log.read(query).map((e) => render(e, query.timestamps)).join(''), 'utf8');
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': String(body.length) });
    res.end(body);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders();
  const finish = (): void => {
    if (!res.writableEnded) res.end();
  };
  // The log's end unsubscribes by itself; a caller that leaves unsubscribes here.
  const stop = log.follow(query, (e) => res.write(render(e, query.timestamps)), finish);
  const abandon = (): void => {
    stop();
    finish();
  };
  res.on('close', abandon);
  req.on('error', abandon);
}
