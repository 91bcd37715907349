// The interactive terminal of a sandbox that has a PTY (a local sandbox, an OpenSandbox sandbox): a
// Pseudoterminal over the gateway's `GET P/pty` (protocol/kruntimes/terminalSocket.ts) — the
// same gateway, endpoint and token as the sandbox's files and line-based terminal, never the
// substrate's own credentials. Keystrokes go as bytes (Ctrl+C is 0x03, so full-screen programs
// and the program's own Ctrl+C handling work), VS Code's size is sent at open and on every
// change, and the program's exit code closes the terminal with that code. Beside it stays the
// line-based Sandbox terminal, which every substrate has; this one is offered only where the
// sandbox's status advertises `capabilities.terminal`, and says why not elsewhere. Closing the
// terminal ends its program; a window that reloads only lets go of it (the socket drops), and the
// terminal comes back attached to the same program with its output replayed (`reattach`,
// terminalRestore.ts).
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
    ? `its backend (${capabilities.backend}) has no PTY here (a local sandbox needs util-linux's \`script\` on this machine)`
    : `${runtime ? `its runtime (${runtime}) is` : 'it is'} served by a kruntimes gateway, whose API has no PTY`;
  return `Sandbox ${connection.label} has no interactive terminal: ${where}. Use the line-based Sandbox terminal (Sandbox Sessions: Open Terminal); interactive terminals are available in local and OpenSandbox sandboxes.`;
}

export class InteractivePseudoterminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  private readonly closeEmitter = new vscode.EventEmitter<number | void>();
  private readonly attachEmitter = new vscode.EventEmitter<string>();
  readonly onDidWrite = this.writeEmitter.event;
  readonly onDidClose = this.closeEmitter.event;
  /** The terminal is connected to its program, whose id (to reattach after a reload) this gives. */
  readonly onDidAttach = this.attachEmitter.event;
  /** The last 64 KiB written to the terminal (for diagnostics and the tests). */
  transcript = '';
  /** The program's exit code, once it exited. */
  exitCode: number | undefined;
  readonly key: string;
  private socket: TerminalSocket | undefined;
  private size: vscode.TerminalDimensions | undefined;
  private readonly decoder = new TextDecoder('utf-8');
  /** VS Code closed the terminal (`close`), or said why it did (`terminalClosed`). */
  private closedByUser = false;
  /** What happens to the program once the terminal is gone: a reloading window lets go of it, anything else ends it. */
  private afterClose: 'end' | 'detach' | undefined;
  private closeFallback: NodeJS.Timeout | undefined;
  /** After the connection ended without an exit code: the next key closes the terminal. */
  private ended = false;

  /** `reattach`: the id of a terminal the sandbox already runs (this window's, before it reloaded). */
  constructor(
    private readonly connection: LiveSandboxConnection,
    private readonly reattach?: string,
    private readonly log?: vscode.LogOutputChannel,
  ) {
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
    this.write(
      this.reattach === undefined
        ? `${DIM}Interactive terminal of ${this.connection.label} (a PTY in the sandbox)…${RESET}\r\n`
        : `${DIM}${REATTACHED_BANNER}${RESET}\r\n`,
    );
    // A reattach takes the terminal from the connection the reloaded window left (the gateway may not have noticed
    // that it dropped) and replays the output the sandbox still holds.
    const resume = this.reattach === undefined ? {} : { session: this.reattach, takeover: true, since: 0 };
    try {
      const client = await this.connection.client();
      const socket = await client.openTerminal(
        { ...resume, ...(this.size ? { cols: this.size.columns, rows: this.size.rows } : {}) },
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
          closed: (code, reason) => {
            // Before `connected`, a refusal is the connect's to report (below), in its own words.
            if (this.socket === undefined) return;
            this.log?.info(`interactive terminal of ${this.key} closed (${code}${reason ? ` ${reason}` : ''})`);
            if (this.exitCode !== undefined) this.closeEmitter.fire(this.exitCode);
            else if (!this.closedByUser) this.endWith(`The connection to the sandbox's terminal closed (${code}).`);
          },
        },
      );
      this.socket = socket;
      if (this.closedByUser) {
        this.letGo();
        return;
      }
      if (!socket.open) this.endWith("The connection to the sandbox's terminal closed.");
      // The size may have changed while connecting.
      if (this.size) socket.resize(this.size.columns, this.size.rows);
      this.attachEmitter.fire(socket.session);
      if (this.reattach !== undefined) this.log?.info(`reattached to terminal ${this.reattach} of ${this.key} (now ${socket.session})`);
    } catch (err) {
      this.log?.warn(`interactive terminal of ${this.key}${this.reattach !== undefined ? ` (reattaching to ${this.reattach})` : ''}: ${messageOf(err)}`);
      if (err instanceof TerminalRefusedError && err.status === 404 && this.reattach !== undefined) {
        this.endWith(`The terminal's program ended while the window was reloading (${err.message}).`);
      } else if (err instanceof TerminalRefusedError) this.endWith(`The sandbox refused the interactive terminal (${err.status}): ${err.message}`);
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

  /**
   * VS Code is done with the terminal. Whether its program ends depends on why, which only `terminalClosed` hears: a
   * person or an extension closing it ends the program; a window that reloads or closes (Shutdown) leaves it running
   * for the reloaded window to reattach. If that word never comes (it always does while the extension host lives),
   * the program is ended after a while; an extension host that is going away drops the connection, which only
   * detaches.
   */
  close(): void {
    this.closedByUser = true;
    if (this.afterClose !== undefined) return this.letGo();
    this.closeFallback ??= setTimeout(() => this.terminalClosed(undefined), CLOSE_REASON_WAIT_MS);
  }

  /** Why VS Code closed the terminal (window.onDidCloseTerminal's `exitStatus.reason`). */
  terminalClosed(reason: vscode.TerminalExitReason | undefined): void {
    if (this.afterClose !== undefined) return;
    clearTimeout(this.closeFallback);
    this.closedByUser = true;
    this.afterClose = reason === vscode.TerminalExitReason.Shutdown ? 'detach' : 'end';
    this.letGo();
  }

  private letGo(): void {
    if (this.afterClose === 'detach') this.socket?.detach();
    else if (this.afterClose === 'end') this.socket?.end();
  }
}

/** How long a closed terminal waits to hear why before it ends its program anyway. */
const CLOSE_REASON_WAIT_MS = 5_000;

export const REATTACHED_BANNER = 'The window reloaded: reattaching to the same program, its earlier output replayed as far as the sandbox kept it…';

/** The options of an interactive terminal of `connection` (`reattach`: to the program of terminal id `reattach`). */
export function interactiveTerminalOptions(connection: LiveSandboxConnection, reattach?: string, log?: vscode.LogOutputChannel): vscode.ExtensionTerminalOptions {
  return { name: `${connection.label} (interactive)`, pty: new InteractivePseudoterminal(connection, reattach, log), iconPath: new vscode.ThemeIcon('terminal') };
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
    return interactiveTerminalOptions(connection);
  };
  return [
    vscode.window.onDidCloseTerminal((terminal) => {
      const pty = (terminal.creationOptions as Partial<vscode.ExtensionTerminalOptions>).pty;
      if (pty instanceof InteractivePseudoterminal) pty.terminalClosed(terminal.exitStatus?.reason);
    }),
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
