// execd's interactive terminal (spec §5): `POST /pty` makes a session, a WebSocket attaches to
// it. Output arrives as binary frames (channel byte + bytes; 0x03 = replay with an offset),
// control as JSON (connected, exit, error, pong). SDK 0.1.11 does not wrap this, so it is
// spoken here over the endpoint (and its headers) that the SDK resolved.
import { EventEmitter } from 'node:events';
import WebSocket, { type RawData } from 'ws';
import { z } from 'zod';
import { OpenSandboxError } from './errors';

const ControlFrame = z.discriminatedUnion('type', [
  z.object({ type: z.literal('connected'), session_id: z.string().optional(), mode: z.enum(['pty', 'pipe']) }),
  z.object({ type: z.literal('exit'), exit_code: z.number().int() }),
  z.object({ type: z.literal('error'), code: z.string(), error: z.string().optional() }),
  z.object({ type: z.literal('pong') }),
]);
const Created = z.object({ session_id: z.string().min(1) });

export interface PtyEndpoint {
  /** execd base without scheme, as the SDK's endpoint lookup returns it. */
  endpoint: string;
  headers: Record<string, string>;
  protocol: 'http' | 'https';
}

export interface PtyOpenOptions {
  cwd?: string;
  command?: string;
  /** `pipe`: no terminal, stderr on its own channel. Default `pty`. */
  mode?: 'pty' | 'pipe';
  /** Replay output from this byte offset (reconnect). */
  since?: number;
  takeover?: boolean;
}

export interface PtyEvents {
  /** execd's `connected` frame: any replay has arrived, live output follows. */
  connected: [];
  data: [chunk: Buffer, channel: 'stdout' | 'stderr' | 'replay'];
  exit: [code: number];
  error: [err: OpenSandboxError];
  close: [code: number];
}

export class PtyConnection extends EventEmitter<PtyEvents> {
  mode: 'pty' | 'pipe' | undefined;
  /** Bytes of output seen, as an absolute offset usable with `since` on reconnect. */
  offset = 0;
  private constructor(
    readonly sessionId: string,
    private readonly ws: WebSocket,
  ) {
    super();
  }

  static async create(ep: PtyEndpoint, opts: { cwd?: string; command?: string } = {}): Promise<string> {
    const res = await fetch(`${ep.protocol}://${ep.endpoint}/pty`, {
      method: 'POST',
      headers: { ...ep.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ ...(opts.cwd ? { cwd: opts.cwd } : {}), ...(opts.command ? { command: opts.command } : {}) }),
    });
    const text = await res.text();
    if (res.status !== 201 && res.status !== 200) {
      throw new OpenSandboxError(res.status === 400 ? 'InvalidArgument' : res.status === 501 ? 'Unimplemented' : 'Internal', `open terminal failed: HTTP ${res.status} ${text.slice(0, 300)}`, { status: res.status });
    }
    return Created.parse(JSON.parse(text)).session_id;
  }

  /** Ends a terminal session (its program); false when execd no longer has it. */
  static async remove(ep: PtyEndpoint, sessionId: string): Promise<boolean> {
    const res = await fetch(`${ep.protocol}://${ep.endpoint}/pty/${encodeURIComponent(sessionId)}`, { method: 'DELETE', headers: ep.headers });
    const text = await res.text();
    if (res.status === 404) return false;
    if (res.status !== 200 && res.status !== 204) throw new OpenSandboxError('Internal', `end terminal failed: HTTP ${res.status} ${text.slice(0, 300)}`, { status: res.status });
    return true;
  }

  /** `listen` is called with the connection before any frame can arrive (replay frames follow the handshake at once). */
  static async attach(ep: PtyEndpoint, sessionId: string, opts: PtyOpenOptions = {}, listen?: (conn: PtyConnection) => void): Promise<PtyConnection> {
    const q = new URLSearchParams();
    if (opts.mode === 'pipe') q.set('pty', '0');
    if (opts.since !== undefined) q.set('since', String(opts.since));
    if (opts.takeover) q.set('takeover', '1');
    const scheme = ep.protocol === 'https' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${ep.endpoint}/pty/${encodeURIComponent(sessionId)}/ws${q.size ? `?${q}` : ''}`, { headers: ep.headers });
    const conn = new PtyConnection(sessionId, ws);
    listen?.(conn);
    // Listen before the handshake settles: `connected` and replay frames follow it at once.
    ws.on('message', (data: RawData, isBinary: boolean) => conn.onFrame(Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer), isBinary));
    let opened = false;
    ws.on('close', (code) => opened && conn.emit('close', code));
    ws.on('error', (e) => opened && conn.emit('error', new OpenSandboxError('Unavailable', `terminal connection failed: ${e.message}`)));
    await new Promise<void>((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8').slice(0, 300);
          const status = res.statusCode ?? 0;
          const code = status === 409 ? 'FailedPrecondition' : status === 404 ? 'NotFound' : status === 401 ? 'Unauthenticated' : 'Internal';
          const hint = status === 409 ? ' Another client holds this terminal; attach with takeover to move it here.' : '';
          reject(new OpenSandboxError(code, `attach terminal failed: HTTP ${status} ${body}.${hint}`, { status }));
        });
      });
      ws.once('open', () => {
        opened = true;
        resolve();
      });
      ws.once('error', (e) => reject(new OpenSandboxError('Unavailable', `attach terminal failed: ${e.message}`)));
    });
    return conn;
  }

  private onFrame(buf: Buffer, isBinary: boolean): void {
    if (isBinary) {
      const channel = buf[0];
      if (channel === 0x03 && buf.length >= 9) {
        const from = Number(buf.readBigInt64BE(1));
        const bytes = buf.subarray(9);
        this.offset = from + bytes.length;
        this.emit('data', bytes, 'replay');
      } else if (channel === 0x01 || channel === 0x02) {
        const bytes = buf.subarray(1);
        this.offset += bytes.length;
        this.emit('data', bytes, channel === 0x01 ? 'stdout' : 'stderr');
      }
      return;
    }
    let frame: z.infer<typeof ControlFrame>;
    try {
      frame = ControlFrame.parse(JSON.parse(buf.toString('utf8')));
    } catch {
      return; // unknown control frames are ignored, as newer execd versions may add some
    }
    if (frame.type === 'connected') {
      this.mode = frame.mode;
      this.emit('connected');
    }
    else if (frame.type === 'exit') this.emit('exit', frame.exit_code);
    else if (frame.type === 'error') this.emit('error', new OpenSandboxError(frame.code === 'TAKEN_OVER' ? 'Aborted' : 'Internal', `terminal: ${frame.code}${frame.error ? `: ${frame.error}` : ''}`, { code: frame.code }));
  }

  /** Keystrokes as bytes (Ctrl+C is 0x03). */
  write(bytes: Uint8Array | string): void {
    this.ws.send(Buffer.concat([Buffer.of(0x00), Buffer.from(bytes)]));
  }
  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }
  signal(signal: 'SIGINT' | 'SIGTERM' | 'SIGKILL' | 'SIGHUP' | 'SIGQUIT'): void {
    this.ws.send(JSON.stringify({ type: 'signal', signal }));
  }
  close(): void {
    this.ws.close(1000);
  }
}
