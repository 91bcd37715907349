// A Run's workspace as a directory of this machine, its commands run by a local backend
// (process, bubblewrap): the host side of the SessionWorkspace port. The code the local runtime
// always had for commands and files, moved here unchanged so that a remote workspace can stand
// beside it; and, where this machine can make a pty, its interactive terminals (hostTerminal.ts).
import fs from 'node:fs/promises';
import type { Backend } from './backend';
import { runCommand, type CommandOutcome } from './execution';
import {
  createSessionDirectory,
  deleteSessionFile,
  listSessionFiles,
  readSessionFile,
  renameSessionFile,
  writeSessionFile,
  type ListPage,
  type ReadResult,
} from './fileOperations';
import { HostTerminals, type HostTerminalLaunch } from './hostTerminal';
import type { SessionWorkspace, WorkspaceCommand } from './sessionWorkspace';
import { invalidArgument } from './sessionError';
import { resolveFollow } from './workspacePaths';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSink } from './workspaceTerminal';

export interface HostWorkspaceConfig {
  backend: Backend;
  /** Where relative paths start (the workspace, or workspace/repo with a repoURL source). */
  sessionRoot: string;
  /** Directories commands may write: the workspace and the artifacts dir (bound into isolating backends). */
  writable: string[];
  tmpDir: string;
  /** Directories isolating backends hide from commands. */
  hide: string[];
  /** This machine makes ptys (hostTerminalProbe): the workspace has interactive terminals. */
  terminals?: boolean;
}

let bashPath: string | undefined;
async function shellProgram(): Promise<string> {
  if (bashPath === undefined) {
    bashPath = '/bin/sh';
    for (const candidate of ['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash']) {
      if (await fs.access(candidate).then(() => true, () => false)) {
        bashPath = candidate;
        break;
      }
    }
  }
  return bashPath;
}

/**
 * `bash -c` with the host user's start-up files left out: bash sources ~/.bashrc even
 * non-interactively when its stdin is a socket (Node's pipes are), so every command of a local
 * sandbox would run the user's shell set-up (seen: 0.8 s of `pyenv init` per command) — a sandbox
 * command must not depend on the host's dotfiles.
 */
function shellArgv(shell: string, line: string): string[] {
  return shell.endsWith('bash') ? [shell, '--norc', '--noprofile', '-c', line] : [shell, '-c', line];
}

export class HostWorkspace implements SessionWorkspace {
  /** Present only where this machine makes ptys: the session advertises `capabilities.terminal` by it. */
  readonly openTerminal?: (o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink) => Promise<WorkspaceTerminal>;
  private readonly terminals = new HostTerminals();

  constructor(readonly config: HostWorkspaceConfig) {
    if (config.terminals) this.openTerminal = (o, sink) => this.terminals.open(o, sink, () => this.terminalLaunch(o));
  }

  get hostRoot(): string {
    return this.config.sessionRoot;
  }

  /** A working directory in the workspace (`rel` from its root), as the absolute path commands start in. */
  private async workingDirectory(rel: string): Promise<string> {
    const target = await resolveFollow(this.config.sessionRoot, rel, { allowRoot: true });
    const st = await fs.stat(target.abs).catch(() => undefined);
    if (!st?.isDirectory()) throw invalidArgument(`working directory ${rel} is not a directory in the workspace`);
    return target.abs;
  }

  /**
   * A new terminal's program: the shell (bash when there is one) interactive, without the host user's start-up
   * files as for every command here, its prompt naming the folder, launched by the Run's backend like a command.
   */
  private async terminalLaunch(o: WorkspaceTerminalOptions): Promise<HostTerminalLaunch> {
    const cwd = await this.workingDirectory(o.cwd ?? '');
    const shell = await shellProgram();
    const bash = shell.endsWith('bash');
    const argv = bash ? [shell, '--norc', '--noprofile', '-i'] : [shell, '-i'];
    const env = { ...(o.env ?? {}), TERM: 'xterm-256color', PS1: bash ? '\\W \\$ ' : '$ ' };
    const { writable, tmpDir, hide } = this.config;
    return { plan: this.config.backend.plan({ argv, cwd, env, writable, tmpDir, hide, isolateNetwork: false }), cwd, env };
  }

  async runCommand(c: WorkspaceCommand): Promise<CommandOutcome> {
    const cmd = c.command;
    const cwd = await this.workingDirectory(cmd.workingDirectory ?? '');
    const argv = cmd.argv && cmd.argv.length > 0 ? cmd.argv : shellArgv(await shellProgram(), cmd.shell ?? '');
    return runCommand(this.config.backend, {
      spec: {
        argv,
        cwd,
        env: c.env,
        writable: this.config.writable,
        tmpDir: this.config.tmpDir,
        hide: this.config.hide,
        isolateNetwork: cmd.isolateNetwork ?? false,
      },
      stdin: cmd.stdin ? Buffer.from(cmd.stdin, 'base64') : undefined,
      timeoutMs: cmd.timeoutMillis ?? 0,
      signal: c.signal,
      onOutput: c.onOutput,
      onStarted: (pgid, startTime) => c.onStarted({ kill: { pgid, leaderStartTime: startTime } }, argv.join(' ')),
    });
  }

  writeFile(p: string, contents: Buffer, createParents: boolean): Promise<void> {
    return writeSessionFile(this.config.sessionRoot, p, contents, createParents);
  }

  createDirectory(p: string): Promise<void> {
    return createSessionDirectory(this.config.sessionRoot, p);
  }

  deleteFile(p: string, recursive: boolean): Promise<void> {
    return deleteSessionFile(this.config.sessionRoot, p, recursive);
  }

  renameFile(from: string, to: string, overwrite: boolean): Promise<void> {
    return renameSessionFile(this.config.sessionRoot, from, to, overwrite);
  }

  read(p: string, maxBytes: number, offset: number): Promise<ReadResult> {
    return readSessionFile(this.config.sessionRoot, p, maxBytes, offset);
  }

  list(dir: string, limit: number, pageToken: string): Promise<ListPage> {
    return listSessionFiles(this.config.sessionRoot, dir, limit, pageToken);
  }

  async close(): Promise<void> {
    // The directory stays with the Run; its terminals end with it.
    await this.terminals.closeAll();
  }
}
