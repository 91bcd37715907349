// VS Code's side of the Sandbox terminal: a Pseudoterminal over TerminalSession, the
// "Sandbox shell" terminal profile, and `sandbox` tasks (CustomExecution, which is what works
// in a virtual workspace) that run one command and end with its exit code.
import * as vscode from 'vscode';
import { decodeCommandResult } from '../../protocol/kruntimes/gatewayClient';
import type { LiveSandboxConnection } from '../sandboxes/connection';
import type { CommandCapture, WindowCommands } from '../sandboxes/windowCommands';
import { describeGatewayFailure, neverSent } from '../sandboxes/errorText';
import type { StreamEvent } from '../../protocol/kruntimes/gateway';
import { terminalCommand } from './commandEnv';
import { exitSummary, TerminalSession } from './terminalSession';

const INTRODUCED_KEY = 'sandboxSessions.terminal.introduced';

const TRANSCRIPT_LIMIT = 64 * 1024;

export class SandboxPseudoterminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  private readonly closeEmitter = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writeEmitter.event;
  readonly onDidClose = this.closeEmitter.event;
  readonly session: TerminalSession;
  /** The last 64 KiB written to the terminal (for diagnostics and the integration tests). */
  transcript = '';
  /** The sandbox key this terminal runs commands in. */
  readonly key: string;
  /** The terminal's width in columns, once VS Code has told it. */
  columns: number | undefined;

  private readonly cwdEmitter = new vscode.EventEmitter<string>();
  /** Fires with the new working directory after `cd`. */
  readonly onDidChangeWorkingDirectory = this.cwdEmitter.event;

  constructor(
    connection: LiveSandboxConnection,
    options: {
      showIntroduction: boolean;
      cwd?: string;
      banner?: string;
      onCommandFinished?: (cwd: string) => void;
      onCommandStarted?: (command: string, cwd: string) => CommandCapture | undefined;
    },
  ) {
    this.key = connection.key;
    this.session = new TerminalSession({
      connection,
      write: (d) => {
        this.transcript = (this.transcript + d).slice(-TRANSCRIPT_LIMIT);
        this.writeEmitter.fire(d);
      },
      close: (code) => this.closeEmitter.fire(code),
      showIntroduction: options.showIntroduction,
      onDidChangeWorkingDirectory: (cwd) => this.cwdEmitter.fire(cwd),
      ...(options.banner !== undefined ? { banner: options.banner } : {}),
      ...(options.cwd !== undefined ? { initialCwd: options.cwd } : {}),
      ...(options.onCommandFinished ? { onCommandFinished: options.onCommandFinished } : {}),
      ...(options.onCommandStarted ? { onCommandStarted: options.onCommandStarted } : {}),
    });
  }

  open(initialDimensions: vscode.TerminalDimensions | undefined): void {
    if (initialDimensions) this.setDimensions(initialDimensions);
    this.session.open();
  }

  setDimensions(dimensions: vscode.TerminalDimensions): void {
    this.columns = dimensions.columns;
    this.session.setColumns(dimensions.columns);
  }

  close(): void {
    this.session.close();
  }

  handleInput(data: string): void {
    this.session.handleInput(data);
  }
}

/** The sandbox key of a Sandbox terminal, or undefined for other terminals. */
export function sandboxTerminalKey(terminal: vscode.Terminal): string | undefined {
  const options = terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>;
  return options.pty instanceof SandboxPseudoterminal ? options.pty.key : undefined;
}

export interface TerminalFactoryDeps {
  globalState: vscode.Memento;
  onCommandFinished(key: string, cwd: string): void;
  /** Where the commands run from this window are kept (Operations: re-run, open output). */
  commands?: WindowCommands;
}

/** Creates the terminal options for a sandbox; the line-based note shows on first use only. */
export function sandboxTerminalOptions(connection: LiveSandboxConnection, deps: TerminalFactoryDeps, cwd?: string, banner?: string): vscode.ExtensionTerminalOptions {
  const showIntroduction = !deps.globalState.get<boolean>(INTRODUCED_KEY, false);
  if (showIntroduction) void deps.globalState.update(INTRODUCED_KEY, true);
  const pty = new SandboxPseudoterminal(connection, {
    showIntroduction,
    ...(cwd !== undefined ? { cwd } : {}),
    ...(banner !== undefined ? { banner } : {}),
    onCommandFinished: (dir) => deps.onCommandFinished(connection.key, dir),
    onCommandStarted: (command, dir) => deps.commands?.start(connection.key, command, dir, 'terminal'),
  });
  return { name: `Sandbox: ${connection.label}`, pty, iconPath: new vscode.ThemeIcon('vm') };
}

/** A task's terminal: runs one command in the sandbox, streams its output, ends with its exit code. */
export class SandboxTaskTerminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  private readonly closeEmitter = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writeEmitter.event;
  readonly onDidClose = this.closeEmitter.event;
  private readonly controller = new AbortController();

  constructor(
    private readonly connection: LiveSandboxConnection,
    private readonly command: string,
    private readonly cwd: string | undefined,
    private readonly onFinished: (cwd: string) => void,
    private readonly commands?: WindowCommands,
  ) {}

  open(): void {
    void this.run();
  }

  close(): void {
    this.controller.abort();
  }

  handleInput(data: string): void {
    if (data.includes('\x03')) this.controller.abort();
  }

  private async run(): Promise<void> {
    const write = (s: string) => this.writeEmitter.fire(s.replace(/\r?\n/g, '\r\n'));
    write(`\x1b[2m> ${this.command}\x1b[0m\n`);
    let exitCode = 1;
    let ending: 'completed' | 'timed out' | 'cancelled' | 'failed' = 'failed';
    const capture = this.commands?.start(this.connection.key, this.command, this.cwd ?? '', 'task');
    const hold = this.connection.hold(); // a running task uses the sandbox like a terminal does
    try {
      const command = terminalCommand(this.command, this.cwd);
      let events: AsyncGenerator<StreamEvent>;
      const client = await this.connection.client();
      try {
        events = await this.firstEvent(client.stream({ command }, { signal: this.controller.signal }));
      } catch (err) {
        if (!neverSent(err) || this.controller.signal.aborted) throw err;
        // Nothing ran (the gateway did not answer): connect again, which starts a stopped local daemon.
        this.connection.invalidate(client);
        events = await this.firstEvent((await this.connection.client()).stream({ command }, { signal: this.controller.signal }));
      }
      for await (const event of events) {
        if (event.type === 'accepted') capture?.accepted(event.accepted.operationID);
        if (event.type === 'output' && event.output.data) {
          const text = Buffer.from(event.output.data, 'base64').toString('utf8');
          capture?.output(text);
          write(text);
        }
        if (event.type === 'completed' && event.completed.command) {
          const r = decodeCommandResult(event.completed.command);
          exitCode = r.exitCode;
          ending = r.timedOut ? 'timed out' : 'completed';
          this.writeEmitter.fire(exitSummary(r.exitCode, r.timedOut));
        }
        if (event.type === 'failed') write(`${event.failed.message ?? `failed (code ${event.failed.code})`}\n`);
      }
    } catch (err) {
      if (this.controller.signal.aborted) ending = 'cancelled';
      write(this.controller.signal.aborted ? '[cancelled]\n' : `${describeGatewayFailure(err, this.connection.label)}\n`);
    } finally {
      capture?.finished(ending, ending === 'completed' || ending === 'timed out' ? exitCode : undefined);
      hold.dispose();
      this.onFinished(this.cwd ?? '');
    }
    this.closeEmitter.fire(exitCode);
  }

  /** Starts the stream (so a refused connection fails here) and gives back all of its events. */
  private async firstEvent(stream: AsyncGenerator<StreamEvent>): Promise<AsyncGenerator<StreamEvent>> {
    const first = await stream.next();
    return (async function* () {
      if (first.done) return;
      yield first.value;
      yield* stream;
    })();
  }
}
