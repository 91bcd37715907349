// The local Runs API, `/local/v1/namespaces/{ns}/runs[/{name}[/operations]]` (and
// `/local/v1/runs` across namespaces): create, get, list, watch (NDJSON `{type, object}`),
// JSON merge-patch (the termination rule answered with 422 in the Kubernetes Status shape),
// delete, and — extensions — the Run's command records, runtimed's log of the Run, read like
// a Pod's (`…/runs/{name}/log`, server/gateway/runLogRoute.ts), and where a port of a remote
// (OpenSandbox) Run's sandbox is reached (`…/runs/{name}/endpoints/{port}`: a URL and the headers
// it needs — the OpenSandbox API key stays in this daemon). Bearer token required.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RUN_API_VERSION } from '../../protocol/kruntimes/run';
import { ApiStatusError } from '../local/apiStatusError';
import type { LocalRuntime, RunEvent } from '../local/localRuntime';
import type { BearerAuth } from './auth';
import { BodyTooLargeError, goJsonBytes, readBody } from './httpBodies';
import type { AccessRequestCounters } from './requestCounters';
import { serveRunLog } from './runLogRoute';

export type RunsRoute =
  | { kind: 'collection'; ns: string | undefined }
  | { kind: 'item'; ns: string; name: string }
  | { kind: 'operations'; ns: string; name: string }
  | { kind: 'requests'; ns: string; name: string }
  | { kind: 'log'; ns: string; name: string }
  | { kind: 'endpoint'; ns: string; name: string; port: string };

export function matchRunsRoute(pathname: string): RunsRoute | undefined {
  const seg = pathname.split('/').slice(1);
  if (seg[0] !== 'local' || seg[1] !== 'v1') return undefined;
  let d: string[];
  try {
    d = seg.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
  if (d.length === 3 && d[2] === 'runs') return { kind: 'collection', ns: undefined };
  if (d[2] !== 'namespaces' || d[4] !== 'runs' || !d[3]) return undefined;
  const ns = d[3];
  if (d.length === 5) return { kind: 'collection', ns };
  if (d.length === 6 && d[5]) return { kind: 'item', ns, name: d[5] };
  if (d.length === 7 && d[5] && d[6] === 'operations') return { kind: 'operations', ns, name: d[5] };
  if (d.length === 7 && d[5] && d[6] === 'requests') return { kind: 'requests', ns, name: d[5] };
  if (d.length === 7 && d[5] && d[6] === 'log') return { kind: 'log', ns, name: d[5] };
  if (d.length === 8 && d[5] && d[6] === 'endpoints' && d[7]) return { kind: 'endpoint', ns, name: d[5], port: d[7] };
  return undefined;
}

function sendObject(res: ServerResponse, status: number, value: unknown): void {
  const body = goJsonBytes(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
  res.end(body);
}

function sendStatus(res: ServerResponse, err: ApiStatusError): void {
  sendObject(res, err.status, err.toStatus());
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const body = await readBody(req, limit);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ApiStatusError('BadRequest', `the request body is not JSON: ${(err as Error).message}`);
  }
}

export class RunsApi {
  constructor(
    private readonly runtime: LocalRuntime,
    private readonly auth: BearerAuth,
    private readonly maxRequestBodyBytes: number,
    private readonly counters?: AccessRequestCounters,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse, route: RunsRoute, url: URL): Promise<void> {
    try {
      const auth = this.auth.check(req.headers);
      if (!auth.ok) throw new ApiStatusError('Unauthorized', auth.message);
      const method = req.method ?? 'GET';
      if (route.kind === 'collection') {
        if (method === 'GET') {
          const watch = url.searchParams.get('watch');
          if (watch === 'true' || watch === '1') return this.watch(req, res, route.ns, url);
          return sendObject(res, 200, {
            apiVersion: RUN_API_VERSION,
            kind: 'RunList',
            metadata: { resourceVersion: this.runtime.listResourceVersion },
            items: this.filter(this.runtime.list(route.ns), url),
          });
        }
        if (method === 'POST' && route.ns !== undefined) {
          const body = await readJson(req, this.maxRequestBodyBytes);
          return sendObject(res, 201, await this.runtime.create(route.ns, body));
        }
      } else if (route.kind === 'item') {
        if (method === 'GET') return sendObject(res, 200, this.runtime.get(route.ns, route.name));
        if (method === 'PATCH') {
          const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
          if (type !== 'application/merge-patch+json' && type !== 'application/json') {
            throw new ApiStatusError('UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json`);
          }
          const patch = await readJson(req, this.maxRequestBodyBytes);
          return sendObject(res, 200, await this.runtime.patch(route.ns, route.name, patch));
        }
        if (method === 'DELETE') return sendObject(res, 200, await this.runtime.delete(route.ns, route.name));
      } else if (method === 'GET' && route.kind === 'log') {
        return serveRunLog(req, res, () => this.runtime.runLog(route.ns, route.name), url, route.name);
      } else if (method === 'GET' && route.kind === 'endpoint') {
        if (!/^\d{1,5}$/.test(route.port) || Number(route.port) < 1 || Number(route.port) > 65535) {
          throw new ApiStatusError('BadRequest', `port must be a number from 1 to 65535, not "${route.port}"`);
        }
        return sendObject(res, 200, await this.runtime.portEndpoint(route.ns, route.name, Number(route.port)));
      } else if (method === 'GET' && route.kind === 'requests') {
        const uid = this.runtime.get(route.ns, route.name).metadata.uid ?? '';
        return sendObject(res, 200, { requests: this.counters?.get(uid) ?? {} });
      } else if (method === 'GET') {
        return sendObject(res, 200, { items: await this.runtime.operations(route.ns, route.name) });
      }
      throw new ApiStatusError('MethodNotAllowed', `the server does not allow this method on the requested resource`);
    } catch (err) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof ApiStatusError) return sendStatus(res, err);
      if (err instanceof BodyTooLargeError) return sendStatus(res, new ApiStatusError('RequestEntityTooLarge', err.message));
      sendStatus(res, new ApiStatusError('InternalError', (err as Error).message));
    }
  }

  private filter<T extends { metadata: { name?: string } }>(items: T[], url: URL): T[] {
    const selector = url.searchParams.get('fieldSelector');
    const m = selector ? /^metadata\.name=(.+)$/.exec(selector) : null;
    return m ? items.filter((r) => r.metadata.name === m[1]) : items;
  }

  /** NDJSON watch: ADDED for every current Run, then live events; ends after `timeoutSeconds` (default 1800). */
  private watch(req: IncomingMessage, res: ServerResponse, ns: string | undefined, url: URL): void {
    const timeoutSeconds = Math.min(Math.max(Number(url.searchParams.get('timeoutSeconds') ?? '1800') || 1800, 1), 3600);
    const selector = url.searchParams.get('fieldSelector');
    const m = selector ? /^metadata\.name=(.+)$/.exec(selector) : null;
    const wanted = (e: RunEvent): boolean => (ns === undefined || e.object.metadata.namespace === ns) && (!m || e.object.metadata.name === m[1]);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache', 'Transfer-Encoding': 'chunked' });
    const write = (e: RunEvent): void => {
      if (wanted(e)) res.write(goJsonBytes(e));
    };
    for (const object of this.runtime.list(ns)) write({ type: 'ADDED', object });
    this.runtime.on('event', write);
    const end = (): void => {
      clearTimeout(timer);
      this.runtime.off('event', write);
      if (!res.writableEnded) res.end();
    };
    const timer = setTimeout(end, timeoutSeconds * 1000);
    res.on('close', end);
    req.on('error', end);
  }
}
