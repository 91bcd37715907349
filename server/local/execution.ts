// Runs one command to completion through a backend: its own process group, stdin fed from
// the request, stdout/stderr captured up to 1 MiB each (then `\n[output truncated]\n`) or
// streamed in ≤32 KiB chunks, a per-command timeout, and cancellation that sends SIGTERM to
// the whole group and SIGKILL after a 2 s grace. Exit code −1 whenever a signal ended it.
// When the command's main process exits, anything it left behind in its group is killed:
// a command's processes never outlive it (as under bubblewrap's pid namespace). The outcome
// (finished, cancelled, timed out) is reported only once nothing of the group is left; if
// something survives SIGKILL past a bound, the command fails with CommandLostError instead.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
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
  /** Called synchronously right after spawn(), with the group id and the leader's start time. */
  onStarted?: (pgid: number, startTime: string) => void;
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

class Capture {
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

  return new Promise<CommandOutcome>((resolve, reject) => {
    // The command starts behind a gate: a shell that waits for one line on fd 3 and then execs
    // it (same pid, same group). The exec record is written before the gate opens, so there is
    // no moment at which the command runs and nothing on disk says how to kill it; if the
    // daemon dies first, the gate reads EOF and the command never starts.
    const child = spawn(GATE_SHELL, ['-c', GATE_SCRIPT, plan.file, ...plan.args], {
      cwd: run.spec.cwd,
      env: run.spec.env,
      detached: true, // setsid(): a new session and process group
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    const stdout = new Capture('stdout', cap, run.onOutput);
    const stderr = new Capture('stderr', cap, run.onOutput);
    let timedOut = false;
    let aborted = false;
    let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    let timeoutTimer: NodeJS.Timeout | undefined;
    let settled = false;
    let settleTimer: NodeJS.Timeout | undefined;
    const pgid = child.pid;

    const terminate = (): void => {
      if (pgid === undefined) return;
      signalGroup(pgid, 'SIGTERM');
      killTimer ??= setTimeout(() => signalGroup(pgid, 'SIGKILL'), grace);
    };
    const onAbort = (): void => {
      aborted = true;
      terminate();
    };

    child.on('error', (err: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      cleanup();
      if (err.code === 'ENOENT') {
        reject(new SessionError('InvalidArgument', `start command: exec: "${plan.file}": executable file not found in $PATH`));
      } else {
        reject(new SessionError('Internal', `start command: ${err.message}`));
      }
    });
    if (pgid === undefined) return; // 'error' follows

    const startTime = processStartTime(pgid) ?? '0';
    try {
      run.onStarted?.(pgid, startTime);
    } finally {
      const gate = child.stdio[3] as Writable | null;
      gate?.on('error', () => undefined);
      gate?.end('go\n');
    }

    run.signal.addEventListener('abort', onAbort, { once: true });
    if (run.timeoutMs > 0) {
      timeoutTimer = setTimeout(() => {
        timedOut = true;
        terminate();
      }, run.timeoutMs);
    }

    child.stdout.on('data', (d: Buffer) => stdout.push(d));
    child.stderr.on('data', (d: Buffer) => stderr.push(d));
    child.stdin.on('error', () => undefined); // a command that does not read stdin
    child.stdin.end(run.stdin ?? Buffer.alloc(0));

    let openStreams = 2;
    const onStreamClosed = (): void => {
      openStreams--;
      maybeFinish();
    };
    child.stdout.on('close', onStreamClosed);
    child.stderr.on('close', onStreamClosed);

    child.on('exit', (code, signal) => {
      exited = { code, signal };
      // Background processes may hold stdout open: give them a moment (the rest of the grace
      // when a cancel or timeout already sent SIGTERM), then end the group.
      settleTimer = setTimeout(() => {
        signalGroup(pgid, 'SIGKILL');
        child.stdout.destroy();
        child.stderr.destroy();
        finish();
      }, killTimer ? grace : STDIO_SETTLE_MS);
      maybeFinish();
    });

    function maybeFinish(): void {
      if (exited && openStreams === 0) finish();
    }
    function cleanup(): void {
      run.signal.removeEventListener('abort', onAbort);
      if (timeoutTimer) clearTimeout(timeoutTimer);
      if (settleTimer) clearTimeout(settleTimer);
    }
    function finish(): void {
      if (settled || !exited) return;
      settled = true;
      cleanup();
      if (killTimer) clearTimeout(killTimer);
      const signalled = exited.signal !== null || exited.code === null;
      const outcome: CommandOutcome = {
        exitCode: timedOut || aborted || signalled ? -1 : (exited.code as number),
        stdout: stdout.result(),
        stderr: stderr.result(),
        timedOut,
        ...(aborted ? { abortReason: run.signal.reason as unknown } : {}),
      };
      // Nothing of the command may survive it: its group is killed (the grace timer, if a
      // cancel started one, is no longer needed), and the outcome waits until the kernel has
      // really removed every process of it.
      void killGroupAndWait(pgid as number, GROUP_EXIT_BOUND_MS).then((survivors) => {
        if (survivors.length === 0) resolve(outcome);
        else reject(new CommandLostError(pgid as number, survivors, GROUP_EXIT_BOUND_MS));
      }, reject);
    }
  });
}
