// The product's typed client for OpenSandbox, over the official SDK: sandboxes created with
// label-safe product metadata and deny-by-default egress, listed, renewed and deleted by it;
// commands with streamed output, the exit code and interrupt; file operations (large files
// streamed, every upload re-checked with files/info); the PTY terminal. Everything the SDK
// returns is zod-parsed; every failure is an OpenSandboxError with a stable code.
import { Sandbox, SandboxManager, type ConnectionConfig, type CredentialVaultCreateRequest } from '@alibaba-group/opensandbox';
import { z } from 'zod';
import type { OpenSandboxConnection } from './connection';
import { OpenSandboxError, toOpenSandboxError } from './errors';
import { toStat, type FileStat } from './fileStat';
import { LABEL_PRODUCT, LABEL_RUN, LABEL_SESSION, PRODUCT, labelValue, productMetadata } from './labels';
import { PtyConnection, type PtyEndpoint, type PtyOpenOptions } from './ptyConnection';

export type { FileStat } from './fileStat';

export const EXECD_PORT = 44772;

/** `GET /sandboxes/{id}/endpoints/{port}` (spec §2.3): host[:port][/path] without a scheme, and headers to send on every call. */
const EndpointSchema = z.object({ endpoint: z.string().min(1), headers: z.record(z.string(), z.string()).nullish() });

const SandboxInfoSchema = z.object({
  id: z.string().min(1),
  status: z.object({ state: z.string(), reason: z.string().optional().nullable(), message: z.string().optional().nullable() }),
  metadata: z.record(z.string(), z.string()).optional().nullable(),
  createdAt: z.date(),
  expiresAt: z.date().nullable().optional(),
});
export interface SandboxSummary {
  id: string;
  state: string;
  metadata: Record<string, string>;
  createdAt: Date;
  expiresAt: Date | null;
}

const ExecutionSchema = z.object({
  id: z.string().optional().nullable(),
  exitCode: z.number().int().nullable().optional(),
  error: z.object({ name: z.string().optional(), value: z.string().optional(), traceback: z.array(z.string()).optional() }).optional().nullable(),
});

export interface CreateSandboxOptions {
  image: string;
  /** Session and activation ids, carried as label-safe metadata. */
  session?: string;
  activation?: string;
  /** The local Run the sandbox serves (its UID). */
  run?: string;
  cpu?: string;
  memory?: string;
  /** Seconds until OpenSandbox deletes the sandbox by itself (≥ 60); null: no expiry. */
  ttlSeconds: number | null;
  /** Domains the sandbox may reach (`*.example.com` allowed); everything else is denied. */
  allowedEgress?: string[];
  /** Turns on the credential proxy (needed for a Credential Vault; OpenSandbox then requires the network policy we always send). */
  credentialProxy?: boolean;
  env?: Record<string, string>;
  readyTimeoutSeconds?: number;
}

/** The vault as OpenSandbox reports it: names, revisions and bindings — never a secret value. */
const VaultStateSchema = z.object({
  revision: z.number().int(),
  credentials: z.array(z.object({ name: z.string(), sourceType: z.string(), revision: z.number().int() })),
  bindings: z.array(
    z.object({
      name: z.string(),
      revision: z.number().int(),
      match: z.object({ hosts: z.array(z.string()) }).loose().optional(),
      auth: z.object({ type: z.string(), name: z.string().optional() }).optional(),
    }),
  ),
});
export type VaultState = z.infer<typeof VaultStateSchema>;

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string>;
  timeoutSeconds?: number;
  onStdout?: (line: string) => void;
  onStderr?: (line: string) => void;
  /** Aborting interrupts the command in the sandbox (execd keeps running it otherwise). */
  signal?: AbortSignal;
  /** Called once execd started the command, with its id (what `interrupt` takes). */
  onStarted?: (commandId: string) => void;
}
export interface ExecResult {
  commandId: string;
  /** The command's exit code; -1 when it was interrupted or timed out; null when unknown. */
  exitCode: number | null;
}

function toSummary(raw: unknown): SandboxSummary {
  const s = SandboxInfoSchema.parse(raw);
  return { id: s.id, state: s.status.state, metadata: s.metadata ?? {}, createdAt: s.createdAt, expiresAt: s.expiresAt ?? null };
}

export class OpenSandboxClient {
  constructor(readonly connection: OpenSandboxConnection) {}

  private async guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toOpenSandboxError(err, what, this.connection.domain);
    }
  }

  private async withManager<T>(what: string, fn: (m: SandboxManager) => Promise<T>): Promise<T> {
    const mgr = SandboxManager.create({ connectionConfig: this.connection.config() });
    try {
      return await this.guard(what, () => fn(mgr));
    } finally {
      await mgr.close().catch(() => undefined);
    }
  }

  async create(o: CreateSandboxOptions): Promise<OpenSandboxSandbox> {
    if (o.ttlSeconds !== null && !(Number.isInteger(o.ttlSeconds) && o.ttlSeconds >= 60)) {
      throw new OpenSandboxError('InvalidArgument', `the sandbox TTL must be a whole number of seconds ≥ 60 (got ${o.ttlSeconds})`);
    }
    const config = this.connection.config();
    const sbx = await this.guard(`create sandbox (image ${o.image})`, () =>
      Sandbox.create({
        connectionConfig: config,
        image: o.image,
        resource: { cpu: o.cpu ?? '1', memory: o.memory ?? '2Gi' },
        timeoutSeconds: o.ttlSeconds,
        metadata: productMetadata({ session: o.session, activation: o.activation, run: o.run }),
        env: o.env ?? {},
        networkPolicy: { defaultAction: 'deny', egress: (o.allowedEgress ?? []).map((target) => ({ action: 'allow' as const, target })) },
        ...(o.credentialProxy ? { credentialProxy: { enabled: true } } : {}),
        readyTimeoutSeconds: o.readyTimeoutSeconds ?? 60,
      }),
    );
    return new OpenSandboxSandbox(sbx, config, this.connection.domain);
  }

  async connect(id: string): Promise<OpenSandboxSandbox> {
    const config = this.connection.config();
    const sbx = await this.guard(`connect to sandbox ${id}`, () => Sandbox.connect({ sandboxId: id, connectionConfig: config }));
    return new OpenSandboxSandbox(sbx, config, this.connection.domain);
  }

  /** The sandboxes this product created (optionally of one session), newest first, all pages. */
  async listOurs(filter: { session?: string; run?: string } = {}): Promise<SandboxSummary[]> {
    const metadata: Record<string, string> = { [LABEL_PRODUCT]: PRODUCT };
    if (filter.session !== undefined) metadata[LABEL_SESSION] = labelValue(filter.session);
    if (filter.run !== undefined) metadata[LABEL_RUN] = labelValue(filter.run);
    return this.withManager('list sandboxes', async (m) => {
      const out: SandboxSummary[] = [];
      for (let page = 1; ; page++) {
        const res = await m.listSandboxInfos({ metadata, page, pageSize: 100 });
        out.push(...res.items.map(toSummary));
        if (!res.pagination?.hasNextPage) return out;
      }
    });
  }

  async get(id: string): Promise<SandboxSummary> {
    return this.withManager(`get sandbox ${id}`, async (m) => toSummary(await m.getSandboxInfo(id)));
  }

  /** Pushes the sandbox's expiry to `seconds` from now; returns the new expiry. */
  async renew(id: string, seconds: number): Promise<Date> {
    return this.withManager(`renew sandbox ${id}`, async (m) => {
      await m.renewSandbox(id, seconds);
      const info = toSummary(await m.getSandboxInfo(id));
      if (!info.expiresAt) throw new OpenSandboxError('FailedPrecondition', `sandbox ${id} has no expiry to renew`);
      return info.expiresAt;
    });
  }

  /** Deletes the sandbox; false when it was already gone. */
  async kill(id: string): Promise<boolean> {
    try {
      await this.withManager(`delete sandbox ${id}`, (m) => m.killSandbox(id));
      return true;
    } catch (err) {
      if (err instanceof OpenSandboxError && err.code === 'NotFound') return false;
      throw err;
    }
  }
}

export class OpenSandboxSandbox {
  constructor(
    private readonly sbx: Sandbox,
    private readonly config: ConnectionConfig,
    private readonly domain: string,
  ) {}

  get id(): string {
    return this.sbx.id;
  }

  private async guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toOpenSandboxError(err, what, this.domain);
    }
  }

  async info(): Promise<SandboxSummary> {
    return this.guard(`get sandbox ${this.id}`, async () => toSummary(await this.sbx.getInfo()));
  }

  async renew(seconds: number): Promise<Date> {
    return this.guard(`renew sandbox ${this.id}`, async () => {
      await this.sbx.renew(seconds);
      return (await this.info()).expiresAt ?? new Date(Date.now() + seconds * 1000);
    });
  }

  /** Deletes the sandbox and releases the connection. */
  async kill(): Promise<void> {
    try {
      await this.guard(`delete sandbox ${this.id}`, () => this.sbx.kill());
    } catch (err) {
      if (!(err instanceof OpenSandboxError && err.code === 'NotFound')) throw err;
    } finally {
      await this.sbx.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.sbx.close().catch(() => undefined);
  }

  /** Creates the sandbox's Credential Vault (egress sidecar, spec §4); the answer never holds a value. */
  async createVault(request: CredentialVaultCreateRequest): Promise<VaultState> {
    return this.guard(`create the credential vault of sandbox ${this.id}`, async () => VaultStateSchema.parse(await this.sbx.credentialVault.create(request)));
  }

  async vault(): Promise<VaultState> {
    return this.guard(`get the credential vault of sandbox ${this.id}`, async () => VaultStateSchema.parse(await this.sbx.credentialVault.get()));
  }

  async exec(command: string, o: ExecOptions = {}): Promise<ExecResult> {
    if (command.trim() === '') throw new OpenSandboxError('InvalidArgument', 'the command is empty');
    let commandId: string | undefined;
    let interrupted: Promise<void> | undefined;
    const interrupt = () => {
      if (commandId && !interrupted) interrupted = this.interrupt(commandId).catch(() => undefined);
    };
    o.signal?.addEventListener('abort', interrupt, { once: true });
    try {
      const ex = await this.guard(`run command in sandbox ${this.id}`, () =>
        this.sbx.commands.run(
          command,
          { workingDirectory: o.cwd, envs: o.env, timeoutSeconds: o.timeoutSeconds },
          {
            skipAccumulation: true,
            onInit: (init) => {
              commandId = init.id;
              o.onStarted?.(init.id);
              if (o.signal?.aborted) interrupt();
            },
            onStdout: (m) => o.onStdout?.(m.text),
            onStderr: (m) => o.onStderr?.(m.text),
          },
        ),
      );
      const parsed = ExecutionSchema.parse(ex);
      await interrupted;
      const id = commandId ?? parsed.id ?? '';
      return { commandId: id, exitCode: parsed.exitCode ?? null };
    } finally {
      o.signal?.removeEventListener('abort', interrupt);
    }
  }

  async interrupt(commandId: string): Promise<void> {
    await this.guard(`interrupt command ${commandId}`, () => this.sbx.commands.interrupt(commandId));
  }

  async stat(path: string): Promise<FileStat> {
    return this.guard(`stat ${path}`, async () => {
      const map = await this.sbx.files.getFileInfo([path]);
      const raw = (map as Record<string, unknown>)[path];
      if (raw === undefined) throw new OpenSandboxError('Internal', `stat ${path}: the server answered without that path`);
      return toStat(raw);
    });
  }

  async list(path: string, depth = 1): Promise<FileStat[]> {
    return this.guard(`list ${path}`, async () => (await this.sbx.files.listDirectory({ path, depth })).map(toStat));
  }

  async readFile(path: string, range?: { start: number; end?: number }): Promise<Buffer> {
    const opts = range ? { range: `bytes=${range.start}-${range.end ?? ''}` } : undefined;
    return this.guard(`read ${path}`, async () => Buffer.from(await this.sbx.files.readBytes(path, opts)));
  }

  /** Streams a file of any size without holding it in memory. */
  async *readStream(path: string): AsyncIterable<Uint8Array> {
    try {
      yield* this.sbx.files.readBytesStream(path);
    } catch (err) {
      throw toOpenSandboxError(err, `read ${path}`, this.domain);
    }
  }

  /**
   * Writes a file (parents created); `mode` as a number (0o644). Large data may be an async
   * iterable (streamed, chunked). The size is re-checked afterwards: an upload that reported
   * success but wrote nothing (upstream issue #1016) fails here.
   */
  async writeFile(path: string, data: Uint8Array | string | AsyncIterable<Uint8Array>, mode?: number): Promise<void> {
    let expected: number | undefined;
    let body: Uint8Array | string | AsyncIterable<Uint8Array> = data;
    if (typeof data === 'string') expected = Buffer.byteLength(data);
    else if (data instanceof Uint8Array) expected = data.length;
    else {
      let counted = 0;
      const source = data;
      body = (async function* () {
        for await (const chunk of source) {
          counted += chunk.length;
          yield chunk;
        }
        expected = counted;
      })();
    }
    await this.guard(`write ${path}`, () => this.sbx.files.writeFiles([{ path, data: body, ...(mode !== undefined ? { mode: Number(mode.toString(8)) } : {}) }]));
    const st = await this.stat(path);
    if (expected !== undefined && st.size !== expected) {
      throw new OpenSandboxError('DataLoss', `write ${path}: the server reported success but the file has ${st.size} bytes instead of ${expected}`);
    }
  }

  async mkdir(path: string, mode = 0o755): Promise<void> {
    await this.guard(`mkdir ${path}`, () => this.sbx.files.createDirectories([{ path, mode: Number(mode.toString(8)) }]));
  }

  async rename(src: string, dest: string): Promise<void> {
    await this.guard(`rename ${src} to ${dest}`, () => this.sbx.files.moveFiles([{ src, dest }]));
  }

  /** Deletes a file, a symlink or a whole directory; a missing path is not an error. */
  async delete(path: string): Promise<void> {
    let st: FileStat;
    try {
      st = await this.stat(path);
    } catch (err) {
      if (err instanceof OpenSandboxError && err.code === 'NotFound') return;
      throw err;
    }
    if (st.type === 'directory') await this.guard(`delete ${path}`, () => this.sbx.files.deleteDirectories([path]));
    else await this.guard(`delete ${path}`, () => this.sbx.files.deleteFiles([path]));
  }

  /**
   * Where sandbox port `port` is reached from outside (spec §2.5): a URL and the endpoint's own headers (an execd
   * access token, OpenSandbox-Secure-Access, …). Never the connection's headers: they hold the API key, and
   * execd's proxy hands every header it gets to the server in the sandbox.
   */
  async portEndpoint(port: number): Promise<{ url: string; headers: Record<string, string> }> {
    const ep = await this.guard(`resolve the endpoint of port ${port} of sandbox ${this.id}`, async () => EndpointSchema.parse(await this.sbx.getEndpoint(port)));
    const scheme = /^https?:\/\//i.test(ep.endpoint) ? '' : `${this.config.protocol}://`;
    return { url: `${scheme}${ep.endpoint}`, headers: { ...(ep.headers ?? {}) } };
  }

  private async ptyEndpoint(): Promise<PtyEndpoint> {
    const ep = await this.guard('resolve the execd endpoint', () => this.sbx.getEndpoint(EXECD_PORT));
    return { endpoint: ep.endpoint, headers: { ...this.config.headers, ...(ep.headers ?? {}) }, protocol: this.config.protocol };
  }

  /** Starts a terminal session and attaches to it. */
  async openPty(o: PtyOpenOptions = {}, listen?: (conn: PtyConnection) => void): Promise<PtyConnection> {
    const endpoint = await this.ptyEndpoint();
    const id = await PtyConnection.create(endpoint, { cwd: o.cwd, command: o.command });
    return PtyConnection.attach(endpoint, id, o, listen);
  }

  /** Attaches to a terminal session this sandbox already has (404 NotFound, 409 FailedPrecondition without takeover). */
  async attachPty(sessionId: string, o: PtyOpenOptions = {}, listen?: (conn: PtyConnection) => void): Promise<PtyConnection> {
    return PtyConnection.attach(await this.ptyEndpoint(), sessionId, o, listen);
  }

  /** Ends a terminal session; false when it was already gone. */
  async deletePty(sessionId: string): Promise<boolean> {
    return PtyConnection.remove(await this.ptyEndpoint(), sessionId);
  }
}
