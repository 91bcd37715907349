// An interactive terminal of a Run's workspace, where the workspace has one (a local sandbox's pty, hostTerminal.ts;
// an OpenSandbox sandbox's execd PTY): what the gateway's `GET P/pty` route bridges to the editor. The
// workspace creates or reattaches to a terminal session and hands back one connection to it;
// the session (its program) outlives a detached connection until it exits, is ended, or the
// Run's sandbox goes away. What the terminal says goes to a sink given up front, so no byte is
// lost between the attach and the caller's first listener.

export type WorkspaceTerminalSignal = 'SIGINT' | 'SIGTERM' | 'SIGKILL' | 'SIGHUP' | 'SIGQUIT';

export interface WorkspaceTerminalOptions {
  /** Reattach to this terminal session instead of starting a new one. */
  sessionId?: string | undefined;
  /** Evict the connection that holds the session (it gets `error` TAKEN_OVER, then closes). */
  takeover?: boolean | undefined;
  /** Replay output from this absolute byte offset. */
  since?: number | undefined;
  /** Workspace-relative start directory of a new session. */
  cwd?: string | undefined;
  /** The size of a new session's terminal (else the program's own, 80×24, until a resize). */
  cols?: number | undefined;
  rows?: number | undefined;
  /** The Run's environment, for a new session's program where the workspace starts it (set by the session). */
  env?: Record<string, string> | undefined;
}

export interface WorkspaceTerminalSink {
  /** Terminal output (replayed bytes first, when `since` was given). */
  output(bytes: Buffer): void;
  exit(exitCode: number): void;
  /** `code` is the substrate's (TAKEN_OVER, SESSION_GONE, …); `message` says it in words. */
  error(code: string, message: string): void;
  /** The connection closed (after exit, a takeover, a failure, the sandbox closing, or `detach`/`end`). */
  closed(code: number): void;
}

export interface WorkspaceTerminal {
  readonly sessionId: string;
  /** The absolute output offset once attached (after any replay). */
  readonly offset: number;
  write(bytes: Buffer): void;
  resize(cols: number, rows: number): void;
  signal(signal: WorkspaceTerminalSignal): void;
  /** Closes this connection; the session's program keeps running. */
  detach(): void;
  /** Ends the session's program and closes this connection. */
  end(): Promise<void>;
}
