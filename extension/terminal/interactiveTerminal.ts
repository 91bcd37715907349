// The interactive terminal of a sandbox that has a PTY (an OpenSandbox sandbox): a
// Pseudoterminal over the gateway's `GET P/pty` (protocol/kruntimes/terminalSocket.ts) — the
// same gateway, endpoint and token as the sandbox's files and line-based terminal, never the
// substrate's own credentials. Keystrokes go as bytes (Ctrl+C is 0x03, so full-screen programs
// and the program's own Ctrl+C handling work), VS Code's size is sent at open and on every
// change, and the program's exit code closes the terminal with that code. Beside it stays the
// line-based Sandbox terminal, which every substrate has; this one is offered only where the
// sandbox's status advertises `capabilities.terminal`, and says why not elsewhere.
import * as vscode from 'vscode';
import { TerminalRefusedError, type TerminalSocket } from '../../protocol/kruntimes/terminalSocket';
import type { LiveSandboxConnection } from '../sandboxes/connection';
import { messageOf } from '../sandboxes/errorText';
import type { SandboxRegistry } from '../sandboxes/registry';
import type { SandboxResolver, SandboxTarget } from '../sandboxes/sandboxPicker';
import { activeSandboxKey } from '../sandboxes/activeSandbox';

export const OPEN_INTERACTIVE_TERMINAL_COMMAND = 'sandboxSessions.openInteractiveTerminal';
export const INTERACTIVE_PROFILE_ID = 'sandboxSessions.interactiveShell';

const TRANSCRIPT_LIMIT = 64 * 1024;
const DIM = '\x1b[2m';
const YELLOW = '\x1b[33m';
const RESET = '\x1b[0m';

/** Why this sandbox has no interactive terminal, in words; undefined when it has one. */
export async function interactiveTerminalUnavailable(connection: LiveSandboxConnection, runtime: string | undefined): Promise<string | undefined> {
  let capabilities;
  try {
    capabilities = (await (await connection.client()).status()).capabilities;
  } catch (err) {
    return `Sandbox ${connection.label} did not answer: ${messageOf(err)}`;
  }
  if (capabilities?.terminal) return undefined;
  const where = capabilities?.backend
    ? `its backend (${capabilities.backend}) runs each command on its own, without a PTY`
    : `${runtime ? `its runtime (${runtime}) is` : 'it is'} served by a kruntimes gateway, whose API has no PTY`;
  return `Sandbox ${connection.label} has no interactive terminal: ${where}. Use the line-based Sandbox terminal (Sandbox Sessions: Open Terminal); interactive terminals are available in OpenSandbox sandboxes.`;
}

export class InteractivePseudoterminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  private readonly closeEmitter = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writeEmitter.event;
  readonly onDidClose = this.closeEmitter.event;
  /** The last 64 KiB written to the terminal (for diagnostics and the tests). */
  transcript = '';
  /** The program's exit code, once it exited. */
  exitCode: number | undefined;
  readonly key: string;
  private socket: TerminalSocket | undefined;
  private size: vscode.TerminalDimensions | undefined;
  private readonly decoder = new TextDecoder('utf-8');
  private closedByUser = false;
  /** After the connection ended without an exit code: the next key closes the terminal. */
  private ended = false;

  constructor(private readonly connection: LiveSandboxConnection) {
    this.key = connection.key;
  }

  private write(text: string): void {
    this.transcript = (this.transcript + text).slice(-TRANSCRIPT_LIMIT);
    this.writeEmitter.fire(text);
  }

  private endWith(message: string): void {
    if (this.ended || this.closedByUser) return;
    this.ended = true;
    this.write(`\r\n${YELLOW}${message}${RESET}\r\n${DIM}Press any key to close this terminal.${RESET}\r\n`);
  }

  open(initialDimensions: vscode.TerminalDimensions | undefined): void {
    this.size = initialDimensions;
    void this.connect();
  }

  private async connect(): Promise<void> {
    this.write(`${DIM}Interactive terminal of ${this.connection.label} (a PTY in the sandbox)…${RESET}\r\n`);
    try {
      const client = await this.connection.client();
      const socket = await client.openTerminal(
        { ...(this.size ? { cols: this.size.columns, rows: this.size.rows } : {}) },
        {
          output: (bytes) => this.write(this.decoder.decode(bytes, { stream: true })),
          exit: (code) => {
            this.exitCode = code;
          },
          error: (code, message) => {
            if (code === 'TAKEN_OVER') this.endWith('Another window took this terminal over.');
            else if (code === 'SESSION_GONE') this.endWith(`The terminal ended: ${message}.`);
            else this.write(`\r\n${YELLOW}[${code}] ${message}${RESET}\r\n`);
          },
          closed: (code) => {
            if (this.exitCode !== undefined) this.closeEmitter.fire(this.exitCode);
            else if (!this.closedByUser) this.endWith(`The connection to the sandbox's terminal closed (${code}).`);
          },
        },
      );
      if (this.closedByUser) {
        socket.end();
        return;
      }
      this.socket = socket;
      // The size may have changed while connecting.
      if (this.size) socket.resize(this.size.columns, this.size.rows);
    } catch (err) {
      if (err instanceof TerminalRefusedError) this.endWith(`The sandbox refused the interactive terminal (${err.status}): ${err.message}`);
      else this.endWith(`Could not open the interactive terminal: ${messageOf(err)}`);
      this.connection.invalidate();
    }
  }

  setDimensions(dimensions: vscode.TerminalDimensions): void {
    this.size = dimensions;
    this.socket?.resize(dimensions.columns, dimensions.rows);
  }

  handleInput(data: string): void {
    if (this.ended) {
      this.closeEmitter.fire();
      return;
    }
    this.socket?.write(data);
  }

  /** The user closed the terminal: its program ends too. */
  close(): void {
    this.closedByUser = true;
    this.socket?.end();
  }
}

/** The Open Interactive Terminal command and the "Sandbox interactive shell" terminal profile. */
export function registerInteractiveTerminal(deps: { registry: SandboxRegistry; resolveSandbox: SandboxResolver }): vscode.Disposable[] {
  const { registry, resolveSandbox } = deps;
  /** Terminal options for `key`, or the reason there can be none (shown to the user). */
  const optionsFor = async (key: string): Promise<vscode.ExtensionTerminalOptions | string> => {
    const connection = registry.connection(key);
    if (!connection) return 'Open a Ready sandbox first (Sandbox Sessions: Open Sandbox…).';
    const why = await interactiveTerminalUnavailable(connection, registry.summary(key)?.runtime);
    if (why) return why;
    return { name: `${connection.label} (interactive)`, pty: new InteractivePseudoterminal(connection), iconPath: new vscode.ThemeIcon('terminal') };
  };
  return [
    vscode.commands.registerCommand(OPEN_INTERACTIVE_TERMINAL_COMMAND, async (target?: SandboxTarget) => {
      const s = await resolveSandbox(target ?? activeSandboxKey(), ['Ready'], 'Select a Ready sandbox for the interactive terminal');
      if (!s) return undefined;
      const options = await optionsFor(s.key);
      if (typeof options === 'string') {
        void vscode.window.showWarningMessage(options, 'Open Terminal').then((a) => a && vscode.commands.executeCommand('sandboxSessions.openTerminal', s.key));
        return options; // the reason, for scripts and tests (the palette ignores it)
      }
      const terminal = vscode.window.createTerminal(options);
      terminal.show();
      return terminal;
    }),
    vscode.window.registerTerminalProfileProvider(INTERACTIVE_PROFILE_ID, {
      provideTerminalProfile: async () => {
        const s = await resolveSandbox(activeSandboxKey(), ['Ready'], 'Select a Ready sandbox for the interactive terminal');
        if (!s) throw new Error('Open a Ready sandbox first (Sandbox Sessions: Open Sandbox…).');
        const options = await optionsFor(s.key);
        if (typeof options === 'string') throw new Error(options);
        return new vscode.TerminalProfile(options);
      },
    }),
  ];
}
