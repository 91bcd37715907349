// `sandbox-sessions mcp --http`: MCP over Streamable HTTP for clients that connect to a URL rather
// than start a process. Loopback only (it binds a loopback address, answers only loopback peers, and
// checks Host and Origin so a web page cannot reach it through DNS rebinding), and every request
// carries `Authorization: Bearer <token>`, compared in constant time. The token comes from a 0600
// file or is generated and handed to the caller once; it is never logged. One MCP session (one
// SDK transport and server object) per client, all sharing the process's tool context.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../log';
import { createSandboxMcpServer } from './mcpServer';
import type { McpToolContext } from './toolContext';
import { SandboxSessionsError } from '../../protocol/errors';

export const MCP_HTTP_PATH = '/mcp';
/** A request body larger than this is refused (a write's contents are at most 2 MiB of text, escaped). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/** At most this many MCP sessions at once; a client past it is answered 503. */
const MAX_SESSIONS = 32;
const MIN_TOKEN_CHARS = 32;

export class McpHttpSetupError extends SandboxSessionsError<'mcp_http_setup'> {
  override readonly name = 'McpHttpSetupError';
  readonly service = 'mcp-http';
  constructor(message: string) {
    super('mcp_http_setup', message);
  }
}

/** Whether a literal address is a loopback one (127.0.0.0/8, ::1, or ::ffff:127.x). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const a = address.replace(/^::ffff:/i, '');
  if (net.isIPv4(a)) return a.startsWith('127.');
  return a === '::1';
}

/** Constant-time comparison of a presented token with the expected one (any lengths). */
export function tokenMatches(presented: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  // Equal-length digests: timingSafeEqual's time does not depend on where, or whether, they differ.
  return timingSafeEqual(digest(presented), digest(expected));
}

export function generateToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The token in `file`: an existing file must be a regular file of this user readable by no one
 * else (0600) holding at least 32 characters; a missing one is created 0600 with a new token.
 */
export function tokenFromFile(file: string): { token: string; created: boolean } {
  let stat: fs.Stats | undefined;
  try {
    stat = fs.lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (stat === undefined) {
    const token = generateToken();
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      fs.writeSync(fd, `${token}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    return { token, created: true };
  }
  if (!stat.isFile()) throw new McpHttpSetupError(`the token file ${file} is not a regular file`);
  if ((stat.mode & 0o077) !== 0) {
    throw new McpHttpSetupError(`the token file ${file} is readable by others (mode ${(stat.mode & 0o777).toString(8)}); run chmod 600 ${file}`);
  }
  if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) throw new McpHttpSetupError(`the token file ${file} belongs to another user`);
  const token = fs.readFileSync(file, 'utf8').trim();
  if (token.length < MIN_TOKEN_CHARS || /\s/.test(token)) {
    throw new McpHttpSetupError(`the token file ${file} must hold one token of at least ${MIN_TOKEN_CHARS} characters (no spaces)`);
  }
  return { token, created: false };
}

export interface McpHttpServerOptions {
  context: McpToolContext;
  /** A loopback address; anything else is refused. */
  host: string;
  /** 0 picks a free port. */
  port: number;
  token: string;
  log: Logger;
}

export interface McpHttpServer {
  /** The MCP endpoint, e.g. http://127.0.0.1:43121/mcp. */
  url: string;
  close(): Promise<void>;
}

function refuse(res: http.ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function readJsonBody(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw Object.assign(new Error(`the request body is larger than ${MAX_BODY_BYTES} bytes`), { status: 413 });
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw Object.assign(new Error('the request body is not JSON'), { status: 400 });
  }
}

interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/**
 * Who may talk to the endpoint: loopback peers only, through a loopback name (a rebound DNS name is refused), from
 * no foreign origin, on the MCP path, with the bearer token. The refusal to answer with, or undefined.
 */
function admissionRefusal(req: http.IncomingMessage, gate: { hosts: string[]; port: number; token: string; log: Logger }): Refusal | undefined {
  if (!isLoopbackAddress(req.socket.remoteAddress)) return { status: 403, message: 'only loopback clients may connect' };
  if (!gate.hosts.includes((req.headers.host ?? '').toLowerCase())) return { status: 403, message: `Host ${req.headers.host ?? '(none)'} is not allowed; connect to 127.0.0.1:${gate.port}` };
  const origin = req.headers.origin;
  if (origin !== undefined && !gate.hosts.some((h) => origin.toLowerCase() === `http://${h}`)) return { status: 403, message: `Origin ${origin} is not allowed` };
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname !== MCP_HTTP_PATH) return { status: 404, message: `the MCP endpoint is ${MCP_HTTP_PATH}` };
  const auth = req.headers.authorization ?? '';
  const presented = /^Bearer (\S+)$/i.exec(auth)?.[1];
  if (presented === undefined || !tokenMatches(presented, gate.token)) {
    gate.log.warn('MCP HTTP request refused: missing or wrong bearer token', { method: req.method, hasAuthorization: auth !== '' });
    return { status: 401, message: 'a valid bearer token is required (Authorization: Bearer <token>)', headers: { 'www-authenticate': 'Bearer realm="sandbox-sessions-mcp"' } };
  }
  return undefined;
}

type HttpSessions = Map<string, { transport: StreamableHTTPServerTransport; close(): Promise<void> }>;

/** A new MCP session for an initialize request: its own server over its own transport, kept until it closes. */
async function openSession(context: McpToolContext, sessions: HttpSessions, log: Logger, req: http.IncomingMessage, res: http.ServerResponse, body: unknown): Promise<void> {
  const server = createSandboxMcpServer(context);
  const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => {
      sessions.set(id, { transport, close: () => server.close() });
      log.info('MCP HTTP session started', { sessions: sessions.size });
    },
    onsessionclosed: (id) => {
      sessions.delete(id);
    },
  });
  transport.onclose = () => {
    if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
  };
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

export async function startMcpHttpServer(options: McpHttpServerOptions): Promise<McpHttpServer> {
  const { context, log, token } = options;
  if (!isLoopbackAddress(options.host)) {
    throw new McpHttpSetupError(`refusing to listen on ${options.host}: the MCP server listens on a loopback address only (127.0.0.1 or ::1)`);
  }
  if (token.length < MIN_TOKEN_CHARS) throw new McpHttpSetupError(`the bearer token must have at least ${MIN_TOKEN_CHARS} characters`);
  const sessions: HttpSessions = new Map();
  let port = 0;
  const allowedHosts = () => [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`];

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const refusal = admissionRefusal(req, { hosts: allowedHosts(), port, token, log });
    if (refusal) return refuse(res, refusal.status, refusal.message, refusal.headers);

    const sessionHeader = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(sessionHeader) ? sessionHeader[0] : sessionHeader;
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = await readJsonBody(req);
      } catch (err) {
        return refuse(res, (err as { status?: number }).status ?? 400, err instanceof Error ? err.message : String(err));
      }
    }
    if (sessionId !== undefined) {
      const session = sessions.get(sessionId);
      if (!session) return refuse(res, 404, 'unknown or closed MCP session; initialize a new one');
      return session.transport.handleRequest(req, res, body);
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) return refuse(res, 400, 'no MCP session: the first request must be initialize (POST)');
    if (sessions.size >= MAX_SESSIONS) return refuse(res, 503, `too many MCP sessions (at most ${MAX_SESSIONS}); close one and retry`);
    await openSession(context, sessions, log, req, res, body);
  };

  const httpServer = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error('MCP HTTP request failed', { error: err instanceof Error ? err.message : String(err) });
      refuse(res, 500, 'internal error');
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(options.port, options.host, () => {
      httpServer.off('error', reject);
      resolve();
    });
  });
  port = (httpServer.address() as AddressInfo).port;
  const hostInUrl = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${hostInUrl}:${port}${MCP_HTTP_PATH}`;
  log.info('MCP server listening on Streamable HTTP', { url, allowProcess: context.scope.allowProcess });
  return {
    url,
    close: async () => {
      await Promise.all([...sessions.values()].map((s) => s.close().catch(() => undefined)));
      sessions.clear();
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}
