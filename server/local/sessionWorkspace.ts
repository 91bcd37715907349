// Where a Run's workspace lives, as its LocalSession sees it: the port behind which a session's
// commands and file operations run. The session keeps everything else (the FIFO queue, exec
// records, audit, clocks); a workspace only does the work — on a host directory through a local
// backend (hostWorkspace.ts), or in a remote sandbox (OpenSandbox's execd, server/sandboxes/opensandbox).
// Paths are workspace-relative as the access API gives them; every implementation refuses the same
// absolute and `..` paths with the kruntimes messages.
import type { SessionCommand } from '../../protocol/kruntimes/gateway';
import type { ExecRecord } from './execRecord';
import type { CommandOutcome, OutputStream } from './execution';
import type { ListPage, ReadResult } from './fileOperations';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSink } from './workspaceTerminal';

/** What another process (or a restarted daemon) needs to stop a command: a host process group or a remote command. */
export type CommandHandle = { kill: NonNullable<ExecRecord['kill']> } | { remote: NonNullable<ExecRecord['remote']> };

export interface WorkspaceCommand {
  command: SessionCommand;
  operationId: string;
  /** The session's environment merged with the command's. */
  env: Record<string, string>;
  /** Aborting stops the command; `signal.reason` comes back as the outcome's `abortReason`. */
  signal: AbortSignal;
  onOutput?: (stream: OutputStream, data: Buffer) => void;
  /**
   * Called as soon as the command's process exists, with how to stop it and a summary for people. Where the workspace
   * can hold the command back (a host process at its gate), it does so until the returned promise settles.
   */
  onStarted(handle: CommandHandle, summary: string): void | Promise<void>;
}

/** Where a port of a remote sandbox is reached from this machine: a URL and the headers every request to it must carry. */
export interface PortEndpoint {
  url: string;
  headers: Record<string, string>;
}

export interface SessionWorkspace {
  /** The workspace as a directory of this machine; undefined when it lives elsewhere. */
  readonly hostRoot: string | undefined;
  runCommand(c: WorkspaceCommand): Promise<CommandOutcome>;
  writeFile(p: string, contents: Buffer, createParents: boolean): Promise<void>;
  createDirectory(p: string): Promise<void>;
  deleteFile(p: string, recursive: boolean): Promise<void>;
  renameFile(from: string, to: string, overwrite: boolean): Promise<void>;
  /** Up to `maxBytes` (≤ 1 MiB) from `offset`; `truncated` when more bytes follow. */
  read(p: string, maxBytes: number, offset: number): Promise<ReadResult>;
  list(dir: string, limit: number, pageToken: string): Promise<ListPage>;
  /**
   * Stops a remote command a previous daemon started (`rec.remote`); true when it was still running.
   * Host workspaces have none: their commands are killed through the record's process group.
   */
  interruptRecorded?(rec: ExecRecord): Promise<boolean>;
  /** An interactive terminal (a PTY), where the workspace has one; the access API's `GET P/pty` bridges it. */
  openTerminal?(o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink): Promise<WorkspaceTerminal>;
  /**
   * Where port `port` of a remote sandbox is reached (OpenSandbox's endpoint for it). Host workspaces have none:
   * their servers listen on this machine already.
   */
  portEndpoint?(port: number): Promise<PortEndpoint>;
  /** Lets go of what the workspace holds open (connections, timers); the workspace itself stays. */
  close(): Promise<void>;
}
