// A small typed client of the local gateway for the CLI, the demo and the local provider: the
// local Runs API (its watch included), and the few access-API calls a person runs from a shell — those go through the one session
// client (protocol/kruntimes/gatewayClient.ts), so they work on a daemon of either era. Every
// call is bounded; mutations are never retried.
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import type { ExecuteResponse, SessionOperation, StreamEvent } from '../../protocol/kruntimes/gateway';
import { GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { GatewayError } from '../../protocol/kruntimes/gatewayErrors';
import { readText, sharedHttpTransport, type HttpRequest } from '../../protocol/kruntimes/httpTransport';
import { newIdempotencyKey } from '../../protocol/kruntimes/sessionFrames';
import { ndjsonLines } from '../../protocol/kruntimes/ndjsonLines';
import { RUN_GROUP, RunSchema, type Run, type RunMetadataPatch, type RunPhase, isTerminalPhase } from '../../protocol/kruntimes/run';
import { runLogSearchParams, type RunLogQuery } from '../../protocol/kruntimes/runtimedLog';
import { ExecRecordSchema, type ExecRecord } from '../local/execRecord';
import { SandboxSessionsError } from '../../protocol/errors';

export class LocalApiError extends SandboxSessionsError<'local_gateway_error'> {
  override readonly name = 'LocalApiError';
  readonly service = 'local-gateway';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super('local_gateway_error', message);
  }
}

const RunListSchema = z.looseObject({ items: z.array(RunSchema) });
const OperationsSchema = z.looseObject({ items: z.array(ExecRecordSchema) });
const RequestCountsSchema = z.object({ requests: z.record(z.string(), z.number().int().min(0)) });
/** `…/runs/{name}/endpoints/{port}`: where a remote sandbox's port is reached, and the headers it needs. */
const PortEndpointSchema = z.object({ url: z.url({ protocol: /^https?$/ }), headers: z.record(z.string(), z.string()) });
export type RunPortEndpoint = z.infer<typeof PortEndpointSchema>;
const WatchEventSchema = z.object({ type: z.enum(['ADDED', 'MODIFIED', 'DELETED']), object: RunSchema });
export type LocalRunEvent = z.infer<typeof WatchEventSchema>;
/** A watch line carries one Run; far below this. */
const MAX_WATCH_LINE_BYTES = 1 << 20;
/** undici's default headers timeout, which the watch had when it went through undici. */
const WATCH_HEADERS_TIMEOUT_MS = 300_000;

export class LocalGatewayClient {
  constructor(
    readonly url: string,
    private readonly token: string,
    private readonly timeoutMs = 30_000,
    /** For a short-lived process (the `sandbox` CLI): node:http, no undici to load (httpTransport.ts says why not always). */
    private readonly nodeHttp = false,
  ) {}

  /** One keep-alive pool per process (httpTransport.ts). */
  private get transport() {
    return sharedHttpTransport(this.url, { nodeHttpForLoopback: this.nodeHttp });
  }

  private async send(method: HttpRequest['method'], path: string, body?: unknown, opts: { contentType?: string; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<unknown> {
    const timeout = opts.timeoutMs ?? this.timeoutMs;
    const res = await this.transport.request(this.url + path, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body !== undefined ? { 'content-type': opts.contentType ?? 'application/json' } : {}),
        ...(opts.headers ?? {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeoutMs: timeout,
      bodyTimeoutMs: timeout,
      signal: AbortSignal.timeout(timeout),
    });
    const text = await readText(res);
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (res.statusCode >= 300) {
      const message =
        (parsed as { message?: string; error?: string } | undefined)?.message ??
        (parsed as { error?: string } | undefined)?.error ??
        (text || `HTTP ${res.statusCode}`);
      throw new LocalApiError(res.statusCode, message);
    }
    return parsed;
  }

  private runsPath(ns: string, name?: string): string {
    return `/local/v1/namespaces/${encodeURIComponent(ns)}/runs${name ? `/${encodeURIComponent(name)}` : ''}`;
  }

  async createRun(ns: string, run: unknown): Promise<Run> {
    return RunSchema.parse(await this.send('POST', this.runsPath(ns), run));
  }
  async getRun(ns: string, name: string): Promise<Run> {
    return RunSchema.parse(await this.send('GET', this.runsPath(ns, name)));
  }
  async listRuns(ns?: string): Promise<Run[]> {
    return RunListSchema.parse(await this.send('GET', ns === undefined ? '/local/v1/runs' : this.runsPath(ns))).items;
  }
  async terminate(ns: string, name: string, mode: 'Drain' | 'Immediate'): Promise<Run> {
    return RunSchema.parse(await this.send('PATCH', this.runsPath(ns, name), { spec: { termination: { mode } } }, { contentType: 'application/merge-patch+json' }));
  }
  /** Hands the daemon secret values its backends need (held in its memory only; secretsRoute.ts). */
  async putSecrets(values: Record<string, string | null>): Promise<void> {
    await this.send('PUT', '/local/v1/secrets', { values });
  }
  /** A merge patch of `metadata.labels` and `metadata.annotations`: a string sets one, null removes it. */
  async patchMetadata(ns: string, name: string, metadata: RunMetadataPatch): Promise<Run> {
    return RunSchema.parse(await this.send('PATCH', this.runsPath(ns, name), { metadata }, { contentType: 'application/merge-patch+json' }));
  }
  async deleteRun(ns: string, name: string): Promise<Run> {
    return RunSchema.parse(await this.send('DELETE', this.runsPath(ns, name), undefined, { timeoutMs: 30_000 }));
  }
  /** Access API requests the Run has served since the daemon started, by kind (a diagnostic). */
  async requests(ns: string, name: string): Promise<Record<string, number>> {
    return RequestCountsSchema.parse(await this.send('GET', `${this.runsPath(ns, name)}/requests`)).requests;
  }
  /** Where port `port` of a Ready remote (OpenSandbox) Run's sandbox is reached; 400 for a Run whose ports are this machine's. */
  async portEndpoint(ns: string, name: string, port: number): Promise<RunPortEndpoint> {
    return PortEndpointSchema.parse(await this.send('GET', `${this.runsPath(ns, name)}/endpoints/${port}`));
  }
  async operations(ns: string, name: string): Promise<ExecRecord[]> {
    return OperationsSchema.parse(await this.send('GET', `${this.runsPath(ns, name)}/operations`)).items;
  }

  /**
   * runtimed's log of the Run (`…/runs/{name}/log`, read like `kubectl logs`): calls `onLine` for
   * each line (without its newline) as it arrives. With `follow`, resolves when the Run's log ends
   * or `signal` aborts (then quietly); otherwise the whole answer is bounded by the client timeout.
   */
  async logs(ns: string, name: string, query: RunLogQuery, onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
    const qs = runLogSearchParams(query).toString();
    const timeout = query.follow ? undefined : AbortSignal.timeout(this.timeoutMs);
    const signals = [signal, timeout].filter((s): s is AbortSignal => s !== undefined);
    try {
      const res = await this.transport.request(`${this.url}${this.runsPath(ns, name)}/log${qs ? `?${qs}` : ''}`, {
        method: 'GET',
        headers: { authorization: `Bearer ${this.token}` },
        headersTimeoutMs: this.timeoutMs,
        bodyTimeoutMs: query.follow ? 0 : this.timeoutMs,
        ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}),
      });
      if (res.statusCode >= 300) {
        const text = await readText(res);
        let message = text || `HTTP ${res.statusCode}`;
        try {
          message = (JSON.parse(text) as { message?: string }).message ?? message;
        } catch {
          // not a Status body
        }
        throw new LocalApiError(res.statusCode, message);
      }
      let pending = '';
      const decoder = new StringDecoder('utf8'); // a character may span two chunks
      for await (const chunk of res.body) {
        pending += decoder.write(chunk);
        let i: number;
        while ((i = pending.indexOf('\n')) >= 0) {
          onLine(pending.slice(0, i));
          pending = pending.slice(i + 1);
        }
      }
      pending += decoder.end();
      if (pending !== '') onLine(pending);
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
  }

  /**
   * The Runs watch (`?watch=true`, NDJSON) of `namespace` (every namespace when undefined), only `name` when
   * given: every current Run as ADDED, then each change, until the daemon ends it after `timeoutSeconds` or
   * `signal` aborts. Resolves once the daemon answered 200 (it follows changes from then on); the events
   * are yielded as they come (lines that are not a Run event are skipped).
   */
  async watchRuns(query: { namespace?: string; name?: string; timeoutSeconds?: number }, signal: AbortSignal): Promise<AsyncGenerator<LocalRunEvent>> {
    const params = new URLSearchParams({ watch: 'true', timeoutSeconds: String(query.timeoutSeconds ?? 1800) });
    if (query.name !== undefined) params.set('fieldSelector', `metadata.name=${query.name}`);
    const base = query.namespace === undefined ? '/local/v1/runs' : this.runsPath(query.namespace);
    const res = await this.transport.request(`${this.url}${base}?${params.toString()}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${this.token}` },
      signal,
      headersTimeoutMs: WATCH_HEADERS_TIMEOUT_MS,
      bodyTimeoutMs: 0,
    });
    if (res.statusCode !== 200) {
      res.destroy();
      throw new LocalApiError(res.statusCode, `watch answered HTTP ${res.statusCode}`);
    }
    return (async function* () {
      for await (const line of ndjsonLines(res.body, MAX_WATCH_LINE_BYTES)) {
        const event = WatchEventSchema.safeParse(JSON.parse(line));
        if (event.success) yield event.data;
      }
    })();
  }

  /** Follows the Run's watch until it reaches one of `phases` or a terminal phase (bounded). */
  async waitPhase(ns: string, name: string, phases: RunPhase[], timeoutMs = 60_000): Promise<Run> {
    await this.getRun(ns, name); // a Run that is not there is a 404 now, not a timeout later
    const signal = AbortSignal.timeout(timeoutMs);
    let phase: RunPhase | undefined;
    try {
      for (;;) {
        // The daemon ends a watch after at most an hour; a longer wait opens the next one.
        const events = await this.watchRuns({ namespace: ns, name, timeoutSeconds: Math.min(Math.ceil(timeoutMs / 1000) + 1, 3600) }, signal);
        for await (const event of events) {
          if (event.type === 'DELETED') throw new LocalApiError(404, `runs.${RUN_GROUP} "${name}" not found`);
          phase = event.object.status?.phase;
          if (phase && (phases.includes(phase) || isTerminalPhase(phase))) return event.object;
        }
      }
    } catch (err) {
      if (signal.aborted) throw new LocalApiError(504, `run ${ns}/${name} is still ${phase ?? 'Pending'} after ${timeoutMs} ms`);
      throw err;
    }
  }

  /** The session client of one sandbox for one call (closed after it; the Session connection is shared per process). */
  private async withSession<T>(endpointPath: string, use: (client: GatewayClient) => Promise<T>): Promise<T> {
    const client = new GatewayClient({ endpoint: { url: this.url + endpointPath }, token: this.token, ...(this.nodeHttp ? { transport: this.transport } : {}) });
    try {
      return await use(client);
    } catch (err) {
      if (err instanceof GatewayError) throw new LocalApiError(err.status, err.message);
      throw err;
    } finally {
      await client.close();
    }
  }

  async execute(endpointPath: string, op: SessionOperation, opts: { operationId?: string; timeoutMs?: number } = {}): Promise<ExecuteResponse> {
    const signal = AbortSignal.timeout(opts.timeoutMs ?? 6 * 60_000);
    return this.withSession(endpointPath, (client) => client.execute(op, { signal, idempotencyKey: opts.operationId }));
  }

  /**
   * The operation's events (`operations:stream` or the Session connection): calls `onEvent` for
   * each and resolves with the terminal one. The operation id is chosen here (sent as the
   * idempotency key) so a caller can cancel it.
   */
  async stream(
    endpointPath: string,
    op: SessionOperation,
    onEvent: (event: StreamEvent) => void,
    opts: { operationId?: string; timeoutMs?: number } = {},
  ): Promise<StreamEvent> {
    const idempotencyKey = opts.operationId ?? newIdempotencyKey();
    const signal = AbortSignal.timeout(opts.timeoutMs ?? 6 * 60_000);
    return this.withSession(endpointPath, async (client) => {
      let terminal: StreamEvent | undefined;
      for await (const event of client.stream(op, { signal, idempotencyKey })) {
        onEvent(event);
        if (event.type === 'completed' || event.type === 'failed') terminal = event;
      }
      if (!terminal) throw new LocalApiError(502, 'the operation stream ended without a completed or failed event');
      return terminal;
    });
  }

  /** Cancels by id: the daemon's cancel route (era C), or this process's Session connection (era D). */
  async cancel(endpointPath: string, operationId: string): Promise<'cancelled' | 'ended' | 'unknown'> {
    return this.withSession(endpointPath, (client) => client.cancelOperation(operationId, { signal: AbortSignal.timeout(this.timeoutMs) }));
  }
}

/** The endpoint path of a Ready local Run (the URL's path; host and port may change on restart). */
export function endpointPathOf(run: Run): string {
  const url = run.status?.endpoint?.url;
  if (!url) throw new LocalApiError(409, `run ${run.metadata.name} has no endpoint (phase ${run.status?.phase ?? 'Pending'})`);
  return new URL(url).pathname;
}
