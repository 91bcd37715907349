// Runs one command to completion through a backend: its own process group, stdin fed from
// the request, stdout/stderr captured up to 1 MiB each (then `\n[output truncated]\n`) or
// streamed in ≤32 KiB chunks, a per-command timeout, and cancellation that sends SIGTERM to
// the whole group and SIGKILL after a 2 s grace. Exit code −1 whenever a signal ended it.
// When the command's main process exits, anything it left behind in its group is killed:
// a command's processes never outlive it (as under bubblewrap's pid namespace). The outcome
// (finished, cancelled, timed out) is reported only once nothing of the group is left; if
// something survives SIGKILL past a bound, the command fails with CommandLostError instead.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { GatewayLimits, OUTPUT_TRUNCATED_MARKER } from '../../protocol/kruntimes/gateway';
import type { Backend, LaunchSpec } from './backend';
import { processStartTime } from '../platform/processIdentity';
import { CommandLostError } from './commandLost';
import { GROUP_EXIT_BOUND_MS, killGroupAndWait, signalGroup } from './procInfo';
import { SessionError } from './sessionError';

export type OutputStream = 'stdout' | 'stderr';

export interface CommandRun {
  spec: LaunchSpec;
  stdin?: Buffer;
  /** Per-command timeout; 0 = none. */
  timeoutMs: number;
  /** Aborting kills the command; `signal.reason` is passed back as `abortReason`. */
  signal: AbortSignal;
  /** Streaming mode: output goes here instead of being collected. */
  onOutput?: (stream: OutputStream, data: Buffer) => void;
  /**
   * Called right after spawn(), with the group id and the leader's start time. The command waits at its gate (it
   * cannot do anything yet) until what this returns has settled: the caller records how to kill it first.
   */
  onStarted?: (pgid: number, startTime: string) => void | Promise<void>;
  maxOutputBytes?: number;
  graceMs?: number;
}

export interface CommandOutcome {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  /** Set when `signal` aborted the command. */
  abortReason?: unknown;
}

/** Drain time for stdio after the main process exits, before leftovers are killed. */
const STDIO_SETTLE_MS = 150;

export class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private truncated = false;
  constructor(
    private readonly name: OutputStream,
    private readonly cap: number,
    private readonly sink?: (stream: OutputStream, data: Buffer) => void,
  ) {}
  push(data: Buffer): void {
    if (this.truncated) return;
    const room = this.cap - this.size;
    const part = data.length > room ? data.subarray(0, room) : data;
    this.size += part.length;
    if (this.sink) {
      for (let i = 0; i < part.length; i += GatewayLimits.streamChunkBytes) {
        this.sink(this.name, part.subarray(i, i + GatewayLimits.streamChunkBytes));
      }
    } else if (part.length > 0) {
      this.chunks.push(part);
    }
    if (data.length > room) {
      this.truncated = true;
      const marker = Buffer.from(OUTPUT_TRUNCATED_MARKER);
      if (this.sink) this.sink(this.name, marker);
      else this.chunks.push(marker);
    }
  }
  result(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

const GATE_SHELL = '/bin/sh';
const GATE_SCRIPT = 'read -r gate <&3 || exit 125; exec 3<&-; exec "$0" "$@"';

/** The absolute path `file` resolves to through `PATH`, as execvp would find it; undefined if none. */
export function resolveExecutable(file: string, pathVar: string | undefined): string | undefined {
  const executable = (p: string): boolean => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (file.includes('/')) return executable(file) ? file : undefined;
  for (const dir of (pathVar ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    const candidate = path.join(dir || '.', file);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

export function runCommand(backend: Backend, run: CommandRun): Promise<CommandOutcome> {
  const plan = backend.plan(run.spec); // throws a SessionError when the backend refuses
  // Checked up front (the gate shell would only exit 127): the same lookup execvp does.
  const cwdFile = plan.file.includes('/') && !path.isAbsolute(plan.file) ? path.resolve(run.spec.cwd, plan.file) : plan.file;
  if (resolveExecutable(cwdFile, run.spec.env.PATH) === undefined) {
    throw new SessionError('InvalidArgument', `start command: exec: "${plan.file}": executable file not found in $PATH`);
  }
  const cap = run.maxOutputBytes ?? GatewayLimits.maxOutputBytes;
  const grace = run.graceMs ?? GatewayLimits.terminationGraceMs;
  if (run.signal.aborted) return Promise.reject(run.signal.reason);

  return new Promise<CommandOutcome>((resolve, reject) => new RunningCommand(plan.file, run, cap, grace, resolve, reject).start([plan.file, ...plan.args]));
}

/** One started command: its process group, its output, its timers, and the outcome it settles once. */
class RunningCommand {
  private readonly stdout: Capture;
  private readonly stderr: Capture;
  private timedOut = false;
  private aborted = false;
  private exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private settled = false;
  private openStreams = 2;
  private child!: ChildProcessByStdio<Writable, Readable, Readable>;
  private pgid: number | undefined;

  constructor(
    private readonly file: string,
    private readonly run: CommandRun,
    cap: number,
    private readonly grace: number,
    private readonly resolve: (outcome: CommandOutcome) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.stdout = new Capture('stdout', cap, run.onOutput);
    this.stderr = new Capture('stderr', cap, run.onOutput);
  }

  start(argv: string[]): void {
    const { run } = this;
    // The command starts behind a gate: a shell that waits for one line on fd 3 and then execs
    // it (same pid, same group). The exec record is written before the gate opens, so there is
    // no moment at which the command runs and nothing on disk says how to kill it; if the
    // daemon dies first, the gate reads EOF and the command never starts.
    const child = spawn(GATE_SHELL, ['-c', GATE_SCRIPT, ...argv], {
      cwd: run.spec.cwd,
      env: run.spec.env,
      detached: true, // setsid(): a new session and process group
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    this.pgid = child.pid;
    child.on('error', (err: NodeJS.ErrnoException) => this.onSpawnError(err));
    if (this.pgid === undefined) return; // 'error' follows

    this.openGate(this.pgid);
    run.signal.addEventListener('abort', this.onAbort, { once: true });
    if (run.timeoutMs > 0) {
      this.timeoutTimer = setTimeout(() => {
        this.timedOut = true;
        this.terminate();
      }, run.timeoutMs);
    }
    this.connectStdio();
    const pgid = this.pgid;
    child.on('exit', (code, signal) => {
      this.exited = { code, signal };
      // Background processes may hold stdout open: give them a moment (the rest of the grace
      // when a cancel or timeout already sent SIGTERM), then end the group.
      this.settleTimer = setTimeout(() => {
        signalGroup(pgid, 'SIGKILL');
        child.stdout.destroy();
        child.stderr.destroy();
        this.finish();
      }, this.killTimer ? this.grace : STDIO_SETTLE_MS);
      this.maybeFinish();
    });
  }

  /**
   * Tells the caller the group id and start time (to record them), then lets the command run — once the caller's
   * record is written, off the event loop: a daemon that dies before the gate opens leaves a shell that exits 125
   * at end of input, having run nothing.
   */
  private openGate(pgid: number): void {
    const release = (): void => {
      const gate = this.child.stdio[3] as Writable | null;
      gate?.on('error', () => undefined);
      gate?.end('go\n');
    };
    let recorded: void | Promise<void>;
    try {
      recorded = this.run.onStarted?.(pgid, processStartTime(pgid) ?? '0');
    } catch {
      recorded = undefined;
    }
    if (recorded instanceof Promise) void recorded.catch(() => undefined).then(release);
    else release();
  }

  private connectStdio(): void {
    const child = this.child;
    child.stdout.on('data', (d: Buffer) => this.stdout.push(d));
    child.stderr.on('data', (d: Buffer) => this.stderr.push(d));
    child.stdin.on('error', () => undefined); // a command that does not read stdin
    child.stdin.end(this.run.stdin ?? Buffer.alloc(0));
    const onStreamClosed = (): void => {
      this.openStreams--;
      this.maybeFinish();
    };
    child.stdout.on('close', onStreamClosed);
    child.stderr.on('close', onStreamClosed);
  }

  private readonly onAbort = (): void => {
    this.aborted = true;
    this.terminate();
  };

  private terminate(): void {
    const pgid = this.pgid;
    if (pgid === undefined) return;
    signalGroup(pgid, 'SIGTERM');
    this.killTimer ??= setTimeout(() => signalGroup(pgid, 'SIGKILL'), this.grace);
  }

  private onSpawnError(err: NodeJS.ErrnoException): void {
    if (this.settled) return;
    this.settled = true;
    this.cleanup();
    if (err.code === 'ENOENT') {
      this.reject(new SessionError('InvalidArgument', `start command: exec: "${this.file}": executable file not found in $PATH`));
    } else {
      this.reject(new SessionError('Internal', `start command: ${err.message}`));
    }
  }

  private maybeFinish(): void {
    if (this.exited && this.openStreams === 0) this.finish();
  }

  private cleanup(): void {
    this.run.signal.removeEventListener('abort', this.onAbort);
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    if (this.settleTimer) clearTimeout(this.settleTimer);
  }

  private finish(): void {
    const exited = this.exited;
    if (this.settled || !exited) return;
    this.settled = true;
    this.cleanup();
    if (this.killTimer) clearTimeout(this.killTimer);
    const signalled = exited.signal !== null || exited.code === null;
    const outcome: CommandOutcome = {
      exitCode: this.timedOut || this.aborted || signalled ? -1 : (exited.code as number),
      stdout: this.stdout.result(),
      stderr: this.stderr.result(),
      timedOut: this.timedOut,
      ...(this.aborted ? { abortReason: this.run.signal.reason as unknown } : {}),
    };
    // Nothing of the command may survive it: its group is killed (the grace timer, if a
    // cancel started one, is no longer needed), and the outcome waits until the kernel has
    // really removed every process of it.
    const pgid = this.pgid as number;
    void killGroupAndWait(pgid, GROUP_EXIT_BOUND_MS).then((survivors) => {
      if (survivors.length === 0) this.resolve(outcome);
      else this.reject(new CommandLostError(pgid, survivors, GROUP_EXIT_BOUND_MS));
    }, this.reject);
  }
}
