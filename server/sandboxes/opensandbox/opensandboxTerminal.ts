// An OpenSandbox sandbox's interactive terminal as the local runtime's WorkspaceTerminal port:
// execd's PTY socket (spec §5) reached with the connection the daemon holds (the API key and
// execd's token stay in the daemon). A new terminal starts in the Run's workspace (or a
// directory under it); reattaching by session id, taking over and replay are execd's own.
// Resolves once execd's `connected` frame arrived, so every replayed byte has reached the sink.
import path from 'node:path';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSignal, WorkspaceTerminalSink } from '../../local/workspaceTerminal';
import { cleanRelative } from '../../local/workspacePaths';
import { OpenSandboxError } from './errors';
import type { OpenSandboxSandbox } from './opensandboxClient';
import type { PtyConnection } from './ptyConnection';

/** How long execd may take between the handshake and its `connected` frame. */
const CONNECTED_TIMEOUT_MS = 15_000;

export class OpenSandboxTerminal implements WorkspaceTerminal {
  private constructor(
    private readonly sandbox: OpenSandboxSandbox,
    private readonly conn: PtyConnection,
  ) {}

  get sessionId(): string {
    return this.conn.sessionId;
  }

  get offset(): number {
    return this.conn.offset;
  }

  /** Opens (or reattaches to) a terminal of `sandbox`; `root` is the workspace inside it. */
  static async open(sandbox: OpenSandboxSandbox, root: string, o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink, onClosed: (t: OpenSandboxTerminal) => void): Promise<OpenSandboxTerminal> {
    let connected!: () => void;
    let failed!: (err: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      connected = resolve;
      failed = reject;
    });
    /** Set once attached: the close handler needs it, and frames may arrive before. */
    const made: { terminal?: OpenSandboxTerminal } = {};
    const listen = (conn: PtyConnection): void => {
      conn.on('data', (bytes) => sink.output(bytes));
      conn.on('connected', () => connected());
      conn.on('exit', (code) => sink.exit(code));
      conn.on('error', (err) => {
        const code = err.upstream?.code ?? 'RUNTIME_ERROR';
        sink.error(code, err.message);
        failed(err);
      });
      conn.on('close', (code) => {
        failed(new OpenSandboxError('Unavailable', `the terminal closed before it was ready (${code})`));
        if (made.terminal) onClosed(made.terminal);
        sink.closed(code);
      });
    };
    const opts = { ...(o.takeover ? { takeover: true } : {}), ...(o.since !== undefined ? { since: o.since } : {}) };
    let conn: PtyConnection;
    if (o.sessionId) {
      conn = await sandbox.attachPty(o.sessionId, opts, listen);
    } else {
      const rel = cleanRelative(o.cwd ?? '', { allowRoot: true });
      conn = await sandbox.openPty({ cwd: rel === '' ? root : path.posix.join(root, rel), ...opts }, listen);
    }
    const terminal = new OpenSandboxTerminal(sandbox, conn);
    made.terminal = terminal;
    const timer = setTimeout(() => failed(new OpenSandboxError('DeadlineExceeded', 'the sandbox did not start the terminal in time')), CONNECTED_TIMEOUT_MS);
    try {
      await ready;
    } catch (err) {
      conn.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return terminal;
  }

  write(bytes: Buffer): void {
    this.conn.write(bytes);
  }

  resize(cols: number, rows: number): void {
    this.conn.resize(cols, rows);
  }

  signal(signal: WorkspaceTerminalSignal): void {
    this.conn.signal(signal);
  }

  detach(): void {
    this.conn.close();
  }

  async end(): Promise<void> {
    this.conn.close();
    await this.sandbox.deletePty(this.conn.sessionId);
  }
}
