// `GET P/pty` (a local extension of the access API, advertised as `capabilities.terminal`; the
// wire contract is protocol/kruntimes/terminalSocket.ts): the editor's WebSocket bridged to the
// Run's workspace terminal (a local sandbox's pty; an OpenSandbox sandbox's execd PTY over the connection the daemon
// holds, so the substrate's API key and execd token never reach the editor). The terminal is
// opened before the upgrade, so "no such terminal" (404), "held by another window" (409) and
// "no PTY here" (412) are plain HTTP errors; after it, bytes go both ways unchanged (Ctrl+C is
// the byte 0x03 the program's terminal turns into SIGINT), resize and signal frames are
// forwarded, the exit code arrives as an `exit` frame, and a takeover closes the evicted
// connection with 4001. The client's close 1000 ends the program; any other close detaches.
import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import { TerminalClientFrameSchema, TerminalCloseCode, TerminalSessionIdSchema, type TerminalServerFrame } from '../../protocol/kruntimes/terminalFrames';
import type { LocalSession } from '../local/localSession';
import { invalidArgument } from '../local/sessionError';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSink } from '../local/workspaceTerminal';

export type TerminalRequest = WorkspaceTerminalOptions;

const DimensionText = z
  .string()
  .regex(/^\d{1,5}$/)
  .transform(Number)
  .pipe(z.number().int().min(1).max(10_000));

/** The `GET P/pty` query, or InvalidArgument naming the bad parameter. */
export function parseTerminalRequest(q: URLSearchParams): TerminalRequest {
  const out: TerminalRequest = {};
  const session = q.get('session');
  if (session !== null) {
    if (!TerminalSessionIdSchema.safeParse(session).success) throw invalidArgument('session must be a terminal session id');
    out.sessionId = session;
  }
  const takeover = q.get('takeover');
  if (takeover !== null) {
    if (takeover !== '1' && takeover !== 'true') throw invalidArgument('takeover must be 1');
    out.takeover = true;
  }
  const since = q.get('since');
  if (since !== null) {
    if (!/^\d{1,15}$/.test(since)) throw invalidArgument('since must be a non-negative byte offset');
    out.since = Number(since);
  }
  for (const key of ['cols', 'rows'] as const) {
    const raw = q.get(key);
    if (raw === null) continue;
    const parsed = DimensionText.safeParse(raw);
    if (!parsed.success) throw invalidArgument(`${key} must be an integer from 1 to 10000`);
    out[key] = parsed.data;
  }
  const cwd = q.get('cwd');
  if (cwd !== null && cwd !== '') out.cwd = cwd;
  if (out.sessionId && out.cwd) throw invalidArgument('cwd applies to a new terminal, not to session');
  return out;
}

/**
 * What the workspace terminal says before the editor's socket exists (replayed output, an exit
 * that raced the upgrade) is kept, then sent in order once the socket is there.
 */
export class TerminalBridge implements WorkspaceTerminalSink {
  private ws: WebSocket | undefined;
  private readonly pending: Array<Buffer | TerminalServerFrame | { closed: number }> = [];
  private terminal: WorkspaceTerminal | undefined;
  private exited = false;
  private takenOver = false;
  private sizeApplied = false;

  constructor(
    private readonly session: LocalSession,
    private readonly request: TerminalRequest,
    private readonly log?: (line: string) => void,
  ) {}

  /** Opens the workspace terminal (before the upgrade: failures become HTTP errors). */
  async open(): Promise<void> {
    this.terminal = await this.session.openTerminal(this.request, this);
    // A reattached program is already running: its size applies now. A new one sets its own
    // size as it starts (the shell's terminal comes up 80×24), so the editor's size is applied
    // with the program's first output, once that start-up is past.
    if (this.request.sessionId) this.applySize();
  }

  /** Once upgraded: flushes what arrived meanwhile, says `connected`, and relays from now on. */
  attach(ws: WebSocket): void {
    const terminal = this.terminal;
    if (!terminal) throw new Error('TerminalBridge.attach before open');
    this.ws = ws;
    const queued = this.pending.splice(0);
    const closedEarly = queued.find((q): q is { closed: number } => !Buffer.isBuffer(q) && 'closed' in q);
    for (const item of queued) if (Buffer.isBuffer(item)) this.output(item);
    this.send({ type: 'connected', session: terminal.sessionId, offset: terminal.offset });
    for (const item of queued) if (!Buffer.isBuffer(item) && !('closed' in item)) this.send(item);
    if (closedEarly) this.closed(closedEarly.closed);
    ws.on('message', (data: RawData, isBinary: boolean) => this.fromEditor(data, isBinary));
    ws.on('close', (code) => {
      if (this.exited || this.takenOver) return;
      if (code === TerminalCloseCode.normal) {
        void terminal.end().catch((err: unknown) => this.log?.(`ending terminal ${terminal.sessionId}: ${(err as Error).message}`));
      } else {
        terminal.detach();
      }
    });
    ws.on('error', () => undefined);
  }

  /** The upgrade failed after the terminal was opened: a new terminal is ended, a reattached one let go. */
  closeUnattached(): void {
    const terminal = this.terminal;
    if (this.ws || !terminal) return;
    if (this.request.sessionId) terminal.detach();
    else void terminal.end().catch(() => undefined);
  }

  private fromEditor(data: RawData, isBinary: boolean): void {
    const terminal = this.terminal;
    if (!terminal) return;
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (isBinary) {
      this.session.terminalInput();
      terminal.write(bytes);
      return;
    }
    let frame: z.infer<typeof TerminalClientFrameSchema>;
    try {
      frame = TerminalClientFrameSchema.parse(JSON.parse(bytes.toString('utf8')));
    } catch {
      this.send({ type: 'error', code: 'INVALID_FRAME', message: 'text frames are JSON {"type":"resize","cols","rows"} or {"type":"signal","signal"}; keystrokes go in binary frames' });
      return;
    }
    if (frame.type === 'resize') {
      this.request.cols = frame.cols;
      this.request.rows = frame.rows;
      this.sizeApplied = true;
      terminal.resize(frame.cols, frame.rows);
    } else {
      this.session.terminalInput();
      terminal.signal(frame.signal);
    }
  }

  private applySize(): void {
    if (this.sizeApplied) return;
    this.sizeApplied = true;
    const { cols, rows } = this.request;
    if (cols !== undefined && rows !== undefined) this.terminal?.resize(cols, rows);
  }

  private send(frame: TerminalServerFrame): void {
    if (this.ws?.readyState === 1) this.ws.send(JSON.stringify(frame));
  }

  // ---- WorkspaceTerminalSink -------------------------------------------------------------------

  output(bytes: Buffer): void {
    if (!this.ws) {
      this.pending.push(Buffer.from(bytes));
      return;
    }
    if (this.ws.readyState === 1) this.ws.send(bytes, { binary: true });
    if (!this.sizeApplied && this.terminal) this.applySize();
  }

  exit(exitCode: number): void {
    this.exited = true;
    if (!this.ws) this.pending.push({ type: 'exit', exitCode });
    else this.send({ type: 'exit', exitCode });
  }

  error(code: string, message: string): void {
    if (code === 'TAKEN_OVER') {
      this.takenOver = true;
      message = 'another window took this terminal over';
    }
    if (!this.ws) this.pending.push({ type: 'error', code, message });
    else this.send({ type: 'error', code, message });
  }

  closed(code: number): void {
    const ws = this.ws;
    if (!ws) {
      this.pending.push({ closed: code });
      return;
    }
    if (ws.readyState !== 1) return;
    if (this.exited) ws.close(TerminalCloseCode.normal);
    else if (this.takenOver || code === TerminalCloseCode.takenOver) ws.close(TerminalCloseCode.takenOver, 'TAKEN_OVER');
    else {
      this.send({ type: 'error', code: 'SESSION_GONE', message: 'the sandbox closed this terminal (the sandbox is closing or went away)' });
      ws.close(TerminalCloseCode.failed, 'SESSION_GONE');
    }
  }
}
