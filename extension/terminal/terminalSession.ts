// The Sandbox terminal's behaviour without VS Code: a prompt with the sandbox and working
// directory, each line run as one command through `operations:stream` (live output; falls back
// to `operations:execute` where streaming is missing), `cd` tracked and validated by the
// sandbox, Ctrl+C cancelling the running operation, and failures explained in words.
import path from 'node:path/posix';
import { GatewayError, GatewayTransportError } from '../../protocol/kruntimes/gatewayErrors';
import { decodeCommandResult, type GatewayClient } from '../../protocol/kruntimes/gatewayClient';
import { GrpcCode } from '../../protocol/kruntimes/gateway';
import type { LiveSandboxConnection } from '../sandboxes/connection';
import { CLOSED_PHASES, closedSandboxText, describeGatewayFailure, neverSent } from '../sandboxes/errorText';
import type { CommandCapture } from '../sandboxes/windowCommands';
import { terminalCommand } from './commandEnv';
import { LineEditor } from './lineEditor';
import { COMMAND_EXECUTED, commandFinished, commandLine, PROMPT_END, PROMPT_START } from './shellIntegration';

const DIM = '\x1b[2m';
const RED = '\x1b[31m';
const YELLOW = '\x1b[33m';
const RESET = '\x1b[0m';

export const LINE_BASED_NOTE =
  'This terminal is line-based: each line runs as one command in the sandbox (no PTY, so no full-screen ' +
  'programs or interactive input). Ctrl+C cancels the running command; `cd` changes the working directory.';

export interface TerminalSessionOptions {
  connection: LiveSandboxConnection;
  /** Writes to the terminal (already VT-encoded, CRLF line ends). */
  write(data: string): void;
  /** Ends the terminal (Ctrl+D, `exit`). */
  close(exitCode: number): void;
  /** Told after each command, with the working directory it ran in (to refresh file views). */
  onCommandFinished?(cwd: string): void;
  /** Told when a command is sent; what it returns hears its operation id, output and end (the window's command history). */
  onCommandStarted?(command: string, cwd: string): CommandCapture | undefined;
  /** Told when `cd` changed the working directory (so the terminal can be reopened there after a reload). */
  onDidChangeWorkingDirectory?(cwd: string): void;
  /** Shown once when the terminal opens. */
  showIntroduction: boolean;
  /** A line shown when the terminal opens (e.g. that it was reopened after a window reload). */
  banner?: string;
  initialCwd?: string;
}

/** A result line for the terminal: the exit code of a failed command, a timeout, or nothing. */
export function exitSummary(exitCode: number, timedOut: boolean): string {
  if (timedOut) return `${YELLOW}[command timed out]${RESET}\r\n`;
  if (exitCode === -1) return `${YELLOW}[terminated by a signal]${RESET}\r\n`;
  if (exitCode !== 0) return `${RED}[exit ${exitCode}]${RESET}\r\n`;
  return '';
}

/** Converts command output to terminal text: LF → CRLF, keeping UTF-8 characters split across chunks. */
class OutputWriter {
  private readonly decoders = { stdout: new TextDecoder('utf-8'), stderr: new TextDecoder('utf-8') };
  private endsWithNewline = true;
  constructor(
    private readonly write: (s: string) => void,
    private readonly capture?: CommandCapture,
  ) {}

  chunk(stream: 'stdout' | 'stderr', bytes: Uint8Array): void {
    const text = this.decoders[stream].decode(bytes, { stream: true });
    if (text === '') return;
    this.capture?.output(text);
    this.write(text.replace(/\r?\n/g, '\r\n'));
    this.endsWithNewline = text.endsWith('\n');
  }

  /** Makes sure the next line starts at column 0. */
  finish(): void {
    for (const s of ['stdout', 'stderr'] as const) {
      const rest = this.decoders[s].decode();
      if (rest) this.chunk(s, new TextEncoder().encode(rest));
    }
    if (!this.endsWithNewline) this.write(`${DIM}⏎${RESET}\r\n`);
  }
}

/** Keys kept while a command runs, as a terminal's input queue keeps them (beyond this, dropped). */
const MAX_TYPE_AHEAD = 4096;

export class TerminalSession {
  private readonly editor = new LineEditor();
  private cwd: string;
  private previousCwd: string;
  private running: AbortController | undefined;
  private runningOperationId: string | undefined;
  private streamUnsupported = false;
  private closed = false;
  /** What was typed while a command ran (no stdin without a PTY), replayed at the next prompt. */
  private typeAhead = '';

  constructor(private readonly options: TerminalSessionOptions) {
    this.cwd = options.initialCwd ?? '';
    this.previousCwd = this.cwd;
  }

  get workingDirectory(): string {
    return this.cwd;
  }

  get busy(): boolean {
    return this.running !== undefined;
  }

  open(): void {
    if (this.options.banner) this.options.write(`${DIM}${this.options.banner}${RESET}\r\n`);
    if (this.options.showIntroduction) this.options.write(`${DIM}${LINE_BASED_NOTE}${RESET}\r\n`);
    this.prompt();
  }

  close(): void {
    this.closed = true;
    this.running?.abort();
  }

  /** The terminal's width (Pseudoterminal.setDimensions), so long lines wrap and redraw in place. */
  setColumns(columns: number): void {
    this.editor.setColumns(columns);
  }

  handleInput(data: string): void {
    if (this.closed) return;
    if (this.running) {
      // No stdin without a PTY: Ctrl+C cancels the command (and, as a terminal does on an
      // interrupt, drops what was typed ahead); anything else is typed ahead, for the next prompt.
      if (data.includes('\x03')) {
        this.typeAhead = '';
        this.interrupt();
      } else if (this.typeAhead.length + data.length <= MAX_TYPE_AHEAD) this.typeAhead += data;
      return;
    }
    const { output, actions } = this.editor.handleInput(data);
    if (output) this.options.write(output);
    for (const action of actions) {
      if (action.kind === 'submit') void this.run(action.line);
      else if (action.kind === 'interrupt') this.prompt();
      else if (action.kind === 'eof') this.end(0);
      else if (action.kind === 'complete') void this.complete(action.word);
    }
  }

  private promptText(): string {
    return `\x1b[36m${this.options.connection.label}\x1b[0m:\x1b[34m/${this.cwd}\x1b[0m$ `;
  }

  private prompt(): void {
    if (this.closed) return;
    this.options.write(PROMPT_START + this.editor.begin(this.promptText()) + PROMPT_END);
    const pending = this.editor.takePendingInput();
    if (pending !== undefined) this.handleInput(pending);
    // Keys typed while the last command ran come after the rest of a paste, as in a shell.
    if (!this.running && this.typeAhead !== '') {
      const typed = this.typeAhead;
      this.typeAhead = '';
      this.handleInput(typed);
    }
  }

  private end(code: number): void {
    this.closed = true;
    this.options.close(code);
  }

  private interrupt(): void {
    const controller = this.running;
    if (!controller) return;
    this.options.write('^C\r\n');
    const id = this.runningOperationId;
    const connection = this.options.connection;
    if (id !== undefined && connection.capabilities()?.cancel) {
      // The explicit cancel reaches the operation even when the stream is already gone.
      void connection.client().then((c) => c.cancelOperation(id)).catch(() => undefined);
    }
    controller.abort();
  }

  private async run(line: string): Promise<void> {
    const trimmed = line.trim();
    if (trimmed === '') return this.prompt();
    if (trimmed === 'exit' || trimmed === 'logout') return this.end(0);
    this.options.write(commandLine(trimmed) + COMMAND_EXECUTED);
    const cd = /^cd(?:\s+(.*))?$/.exec(trimmed);
    if (cd) {
      const changed = await this.changeDirectory(unquote(cd[1]?.trim() ?? ''));
      this.options.write(commandFinished(changed ? 0 : 1));
      return this.prompt();
    }
    const controller = new AbortController();
    this.running = controller;
    const capture = this.options.onCommandStarted?.(trimmed, this.cwd);
    let client: GatewayClient | undefined;
    let exitCode = 1; // a command that ended without a result (a failure in words) failed
    try {
      client = await this.options.connection.client();
      try {
        const result = await this.execute(client, trimmed, controller.signal, capture);
        if (result) exitCode = result.exitCode;
        capture?.finished(result === undefined ? 'failed' : result.timedOut ? 'timed out' : 'completed', result?.exitCode);
      } catch (err) {
        if (!neverSent(err) || controller.signal.aborted) throw err;
        // The gateway did not answer, so nothing ran (the local daemon stopped, or the endpoint
        // moved): connect again — the companion server starts the daemon — and run it once more.
        this.options.connection.invalidate(client);
        this.options.write(`${DIM}Reconnecting to ${this.options.connection.label}…${RESET}\r\n`);
        client = await this.options.connection.client();
        const result = await this.execute(client, trimmed, controller.signal, capture);
        if (result) exitCode = result.exitCode;
        capture?.finished(result === undefined ? 'failed' : result.timedOut ? 'timed out' : 'completed', result?.exitCode);
      }
    } catch (err) {
      if (controller.signal.aborted) exitCode = 130; // as a shell reports a command ended by Ctrl+C
      capture?.finished(controller.signal.aborted ? 'cancelled' : 'failed');
      if (controller.signal.aborted) this.options.write(`${YELLOW}[cancelled]${RESET}\r\n`);
      else this.options.write(`${RED}${this.describeFailure(err)}${RESET}\r\n`);
      // A new token or endpoint (the local gateway restarted, a token expired) is fetched on the next command.
      if ((err instanceof GatewayError && err.status === 401) || err instanceof GatewayTransportError) this.options.connection.invalidate(client);
    } finally {
      this.running = undefined;
      this.runningOperationId = undefined;
      this.options.write(commandFinished(exitCode));
      this.options.onCommandFinished?.(this.cwd);
    }
    this.prompt();
  }

  /** A failure in words; a sandbox that is closing or closed says so rather than "not ready". */
  private describeFailure(err: unknown): string {
    const phase = this.options.connection.phase();
    if (phase !== undefined && CLOSED_PHASES.has(phase)) return closedSandboxText(this.options.connection.label, phase);
    return describeGatewayFailure(err, this.options.connection.label);
  }

  /** Runs one line; its exit code and timeout, or undefined when the operation failed without a result. */
  private async execute(client: GatewayClient, shell: string, signal: AbortSignal, capture?: CommandCapture): Promise<{ exitCode: number; timedOut: boolean } | undefined> {
    const command = terminalCommand(shell, this.cwd);
    const out = new OutputWriter(this.options.write, capture);
    if (!this.streamUnsupported) {
      try {
        for await (const event of client.stream({ command }, { signal })) {
          if (event.type === 'accepted') {
            this.runningOperationId = event.accepted.operationID;
            capture?.accepted(event.accepted.operationID);
          }
          else if (event.type === 'output' && event.output.data) out.chunk(event.output.stream === 'stderr' ? 'stderr' : 'stdout', Buffer.from(event.output.data, 'base64'));
          else if (event.type === 'completed') {
            out.finish();
            const result = event.completed.command;
            if (result) {
              // Some runtimes put the output only in the completion.
              const decoded = decodeCommandResult(result);
              if (decoded.stdout.length) out.chunk('stdout', decoded.stdout);
              if (decoded.stderr.length) out.chunk('stderr', decoded.stderr);
              if (decoded.stdout.length || decoded.stderr.length) out.finish();
              this.options.write(exitSummary(decoded.exitCode, decoded.timedOut));
              return { exitCode: decoded.exitCode, timedOut: decoded.timedOut };
            }
            return undefined;
          } else if (event.type === 'failed') {
            out.finish();
            if (event.failed.code === GrpcCode.Unimplemented) {
              this.streamUnsupported = true;
              break;
            }
            if (event.failed.code === GrpcCode.Canceled && signal.aborted) throw new DOMException('cancelled', 'AbortError');
            this.options.write(`${RED}${event.failed.message ?? `operation failed (gRPC code ${event.failed.code})`}${RESET}\r\n`);
            return undefined;
          }
        }
      } catch (err) {
        // Era A/B gateways have no operations:stream; fall back to the unary call.
        if (err instanceof GatewayError && (err.status === 404 || err.status === 405) && /endpoint not found|method not allowed/.test(err.message)) {
          this.streamUnsupported = true;
        } else {
          throw err;
        }
      }
    }
    const result = await client.runCommand(command, { signal });
    if (result.stdout.length) out.chunk('stdout', result.stdout);
    if (result.stderr.length) out.chunk('stderr', result.stderr);
    out.finish();
    this.options.write(exitSummary(result.exitCode, result.timedOut));
    return { exitCode: result.exitCode, timedOut: result.timedOut };
  }

  /**
   * Tab: file names from the sandbox's listing of the word's folder (relative to the working
   * directory). Nothing visible happens when there is no match or the listing fails.
   */
  private async complete(word: string): Promise<void> {
    const slash = word.lastIndexOf('/');
    const typedDir = word.slice(0, slash + 1);
    if (typedDir.startsWith('/')) return; // "/" is the workspace root only in `cd`
    const dir = path.normalize(path.join(this.cwd || '.', typedDir.replace(/\\ /g, ' '))).replace(/\/+$/, '');
    if (dir === '..' || dir.startsWith('../')) return;
    const prefix = word.slice(slash + 1).replace(/\\ /g, ' ');
    try {
      const client = await this.options.connection.client();
      const page = await client.listPage({ path: dir === '.' ? '' : dir, limit: 1000 });
      const candidates = page.entries
        .filter((e) => e.path.startsWith(prefix))
        .map((e) => `${typedDir}${e.path.replace(/ /g, '\\ ')}${e.directory ? '/' : ''}`);
      if (this.closed || this.running) return;
      const out = this.editor.complete(word, candidates);
      if (out) this.options.write(out);
    } catch {
      // No listing, no completion: Tab stays silent, as in a shell.
    }
  }

  /** `cd`: resolved against the working directory, confined to the workspace, checked by a listing. True when it moved. */
  private async changeDirectory(target: string): Promise<boolean> {
    let next: string;
    if (target === '' || target === '~' || target === '/') next = '';
    else if (target === '-') next = this.previousCwd;
    else if (target.startsWith('/')) {
      this.options.write(`${RED}cd: paths are workspace-relative here; "/" is the workspace root (use a relative path)${RESET}\r\n`);
      return false;
    } else {
      const joined = path.normalize(path.join(this.cwd || '.', target)).replace(/\/+$/, '');
      next = joined === '.' ? '' : joined;
    }
    if (next === '..' || next.startsWith('../')) {
      this.options.write(`${RED}cd: ${target}: outside the workspace${RESET}\r\n`);
      return false;
    }
    if (next !== '') {
      try {
        const client = await this.options.connection.client();
        await client.listPage({ path: next, limit: 1 });
      } catch (err) {
        const why =
          err instanceof GatewayError && (err.status === 404 || err.status === 400)
            ? 'no such directory'
            : err instanceof GatewayError && err.status === 500
              ? 'not a directory'
              : describeGatewayFailure(err, this.options.connection.label);
        this.options.write(`${RED}cd: ${target}: ${why}${RESET}\r\n`);
        return false;
      }
    }
    this.previousCwd = this.cwd;
    this.cwd = next;
    this.options.onDidChangeWorkingDirectory?.(next);
    return true;
  }
}

function unquote(text: string): string {
  const m = /^(['"])(.*)\1$/.exec(text);
  return m ? (m[2] as string) : text.replace(/\\ /g, ' ');
}
