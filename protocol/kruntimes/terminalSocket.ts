// The interactive terminal of a sandbox whose workspace has a PTY (a local or an OpenSandbox sandbox): a
// local-gateway extension of the access API, advertised as `capabilities.terminal`, that the
// editor speaks to instead of the substrate's own terminal socket — the gateway bridges it, so
// the substrate's credentials never leave the gateway. `GET P/pty` upgraded to a WebSocket:
//   query  `session` (reattach to a terminal this sandbox already has), `takeover=1` (evict the
//          connection that holds it; it is closed with 4001), `since` (replay output from this
//          byte offset), `cols`/`rows` (initial size), `cwd` (workspace-relative start directory)
//   client binary frames are keystrokes as bytes (Ctrl+C is 0x03, delivered to the program as a
//          byte); text frames are JSON `{"type":"resize","cols","rows"}` or `{"type":"signal","signal"}`
//   server binary frames are terminal output; text frames are JSON `connected` (the session id
//          and the output offset after any replay), `exit` (then close 1000) and `error`
//   close  the client's 1000 ends the terminal's program; any other close only detaches from it
// Refusals before the upgrade are plain HTTP errors with the access API's `{"error":…}` body.
import { WebSocket, type RawData } from 'ws';
import { z } from 'zod';
import { SandboxSessionsError } from '../errors';
import type { GatewayTlsOptions } from './gatewayTls';
import { TerminalCloseCode, TerminalServerFrameSchema, type TerminalClientFrame, type TerminalServerFrame, type TerminalSignal } from './terminalFrames';

export * from './terminalFrames';

export interface TerminalQuery {
  session?: string | undefined;
  takeover?: boolean | undefined;
  since?: number | undefined;
  cols?: number | undefined;
  rows?: number | undefined;
  cwd?: string | undefined;
}

/** `…/sessions/<uid>/pty` with its query, as a ws:// or wss:// URL. */
export function terminalSocketUrl(endpointUrl: string, q: TerminalQuery = {}): string {
  const url = new URL(endpointUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/pty`;
  url.search = '';
  url.hash = '';
  if (q.session) url.searchParams.set('session', q.session);
  if (q.takeover) url.searchParams.set('takeover', '1');
  if (q.since !== undefined) url.searchParams.set('since', String(q.since));
  if (q.cols !== undefined) url.searchParams.set('cols', String(q.cols));
  if (q.rows !== undefined) url.searchParams.set('rows', String(q.rows));
  if (q.cwd) url.searchParams.set('cwd', q.cwd);
  return url.toString();
}

/** The gateway refused the terminal before the upgrade (HTTP status and its `error` message). */
export class TerminalRefusedError extends SandboxSessionsError<'terminal_refused'> {
  override readonly name = 'TerminalRefusedError';
  readonly service = 'terminal';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super('terminal_refused', message);
  }
}

export interface TerminalSocketOptions extends TerminalQuery {
  endpointUrl: string;
  token?: string | undefined;
  tls?: GatewayTlsOptions | undefined;
  handshakeTimeoutMs?: number | undefined;
}

export interface TerminalSocketHandlers {
  output(bytes: Buffer): void;
  /** The program exited with this code (the socket closes next). */
  exit?(exitCode: number): void;
  /** An `error` frame (e.g. TAKEN_OVER, SESSION_GONE): what happened, in words. */
  error?(code: string, message: string): void;
  /** The socket closed (after `exit`, a takeover, a failure or `close()`). */
  closed?(code: number, reason: string): void;
}

function frameBytes(data: RawData): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

/** One editor-side connection to a sandbox's interactive terminal. */
export class TerminalSocket {
  /** The terminal's id (to reattach, or to take it over from another window). */
  session = '';
  /** Output bytes seen, as an absolute offset usable as `since`. */
  offset = 0;

  private constructor(private readonly ws: WebSocket) {}

  /** Connects (and authenticates with the gateway's bearer token); resolves once `connected` arrived. */
  static connect(o: TerminalSocketOptions, handlers: TerminalSocketHandlers): Promise<TerminalSocket> {
    const ws = new WebSocket(terminalSocketUrl(o.endpointUrl, o), {
      headers: o.token ? { Authorization: `Bearer ${o.token}` } : {},
      handshakeTimeout: o.handshakeTimeoutMs ?? 15_000,
      perMessageDeflate: false,
      ...(o.tls ?? {}),
    });
    const socket = new TerminalSocket(ws);
    return new Promise<TerminalSocket>((resolve, reject) => {
      let settled = false;
      const settle = (err?: Error): void => {
        if (settled) return;
        settled = true;
        if (err) reject(err);
        else resolve(socket);
      };
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let message = text.slice(0, 500);
          try {
            const parsed = z.object({ error: z.string() }).safeParse(JSON.parse(text));
            if (parsed.success) message = parsed.data.error;
          } catch {
            // not JSON: the text as it is
          }
          settle(new TerminalRefusedError(res.statusCode ?? 0, message || `HTTP ${res.statusCode ?? 0}`));
          ws.terminate();
        });
      });
      ws.on('error', (e) => settle(new Error(`terminal connection failed: ${e.message}`)));
      ws.on('message', (data: RawData, isBinary: boolean) => {
        const bytes = frameBytes(data);
        if (isBinary) {
          socket.offset += bytes.length;
          handlers.output(bytes);
          return;
        }
        let frame: TerminalServerFrame;
        try {
          frame = TerminalServerFrameSchema.parse(JSON.parse(bytes.toString('utf8')));
        } catch {
          return; // an unknown control frame from a newer gateway
        }
        if (frame.type === 'connected') {
          socket.session = frame.session;
          socket.offset = frame.offset;
          settle();
        } else if (frame.type === 'exit') handlers.exit?.(frame.exitCode);
        else handlers.error?.(frame.code, frame.message);
      });
      ws.on('close', (code, reason) => {
        settle(new Error(`the terminal closed before it was ready (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`));
        handlers.closed?.(code, reason.toString());
      });
    });
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** Keystrokes, as bytes. */
  write(data: string | Uint8Array): void {
    if (this.open) this.ws.send(typeof data === 'string' ? Buffer.from(data, 'utf8') : data, { binary: true });
  }

  resize(cols: number, rows: number): void {
    this.sendFrame({ type: 'resize', cols, rows });
  }

  signal(signal: TerminalSignal): void {
    this.sendFrame({ type: 'signal', signal });
  }

  private sendFrame(frame: TerminalClientFrame): void {
    if (this.open) this.ws.send(JSON.stringify(frame));
  }

  /** Ends the terminal's program (close 1000). */
  end(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(TerminalCloseCode.normal);
  }

  /** Lets go of the terminal and leaves its program running, to reattach with `session` later. */
  detach(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(4000, 'detach');
  }
}
