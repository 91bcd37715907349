// VS Code's side of the Sandbox terminal: a Pseudoterminal over TerminalSession, the
// "Sandbox shell" terminal profile, and `sandbox` tasks (CustomExecution, which is what works
// in a virtual workspace) that run one command and end with its exit code.
import * as vscode from 'vscode';
import { decodeCommandResult } from '../../protocol/kruntimes/gatewayClient';
import type { SandboxConnection } from '../sandboxes/connection';
import { describeGatewayFailure } from '../sandboxes/errorText';
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

  constructor(connection: SandboxConnection, options: { showIntroduction: boolean; cwd?: string; onCommandFinished?: (cwd: string) => void }) {
    this.key = connection.key;
    this.session = new TerminalSession({
      connection,
      write: (d) => {
        this.transcript = (this.transcript + d).slice(-TRANSCRIPT_LIMIT);
        this.writeEmitter.fire(d);
      },
      close: (code) => this.closeEmitter.fire(code),
      showIntroduction: options.showIntroduction,
      ...(options.cwd !== undefined ? { initialCwd: options.cwd } : {}),
      ...(options.onCommandFinished ? { onCommandFinished: options.onCommandFinished } : {}),
    });
  }

  open(): void {
    this.session.open();
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
}

/** Creates the terminal options for a sandbox; the line-based note shows on first use only. */
export function sandboxTerminalOptions(connection: SandboxConnection, deps: TerminalFactoryDeps, cwd?: string): vscode.ExtensionTerminalOptions {
  const showIntroduction = !deps.globalState.get<boolean>(INTRODUCED_KEY, false);
  if (showIntroduction) void deps.globalState.update(INTRODUCED_KEY, true);
  const pty = new SandboxPseudoterminal(connection, {
    showIntroduction,
    ...(cwd !== undefined ? { cwd } : {}),
    onCommandFinished: (dir) => deps.onCommandFinished(connection.key, dir),
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
    private readonly connection: SandboxConnection,
    private readonly command: string,
    private readonly cwd: string | undefined,
    private readonly onFinished: (cwd: string) => void,
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
    const hold = this.connection.hold(); // a running task uses the sandbox like a terminal does
    try {
      const client = await this.connection.client();
      const command = { shell: this.command, ...(this.cwd ? { workingDirectory: this.cwd } : {}) };
      for await (const event of client.stream({ command }, { signal: this.controller.signal })) {
        if (event.type === 'output' && event.output.data) write(Buffer.from(event.output.data, 'base64').toString('utf8'));
        if (event.type === 'completed' && event.completed.command) {
          const r = decodeCommandResult(event.completed.command);
          exitCode = r.exitCode;
          this.writeEmitter.fire(exitSummary(r.exitCode, r.timedOut));
        }
        if (event.type === 'failed') write(`${event.failed.message ?? `failed (code ${event.failed.code})`}\n`);
      }
    } catch (err) {
      write(this.controller.signal.aborted ? '[cancelled]\n' : `${describeGatewayFailure(err, this.connection.label)}\n`);
    } finally {
      hold.dispose();
      this.onFinished(this.cwd ?? '');
    }
    this.closeEmitter.fire(exitCode);
  }
}
