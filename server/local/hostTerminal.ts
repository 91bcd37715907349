// The interactive terminal of a local sandbox (the process and bubblewrap backends), behind the gateway's `GET P/pty`
// (terminalBridge.ts). Node makes no pseudo-terminal without a native add-on, so util-linux's `script` makes one: on
// it, `stty` sets the size and the backend's launch of the shell is exec'd; `script` copies the pty's output to its
// stdout and its stdin to the pty (Ctrl+C is the byte the pty's line discipline turns into SIGINT), and exits with the
// shell's code (`-e`). Under bubblewrap the pty is made outside the sandbox, so the host reaches it the same way for
// both backends: a resize is `stty -F` on the pty (the kernel tells the program with SIGWINCH), a signal frame goes to
// the pty's foreground process group (field tpgid of /proc/<pid>/stat). A session outlives a detached connection, its
// last 1 MiB of output kept for a replay from a byte offset, until its program exits, it is ended (hung up, as closing
// a terminal window does), or the Run closes (then every process of the shell's session is killed). One connection holds a session at a time; another one takes
// it only when it asks to (takeover), and the one it evicts is told TAKEN_OVER and closed with 4001. If the daemon
// dies, `script` reads the end of its input and hands the shell an end of file.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { TerminalCloseCode } from '../../protocol/kruntimes/terminalFrames';
import { readProcStat } from '../platform/processIdentity';
import type { ProbeResult, SpawnPlan } from './backend';
import { failedPrecondition, notFound } from './sessionError';
import type { WorkspaceTerminal, WorkspaceTerminalOptions, WorkspaceTerminalSignal, WorkspaceTerminalSink } from './workspaceTerminal';

/** Output kept per session for a replay (a reattaching window gets at most this much back). */
const REPLAY_BYTES = 1024 * 1024;
/** How long an ended session's program has, after SIGHUP, before every process of its session is killed. */
const HANGUP_GRACE_MS = 2_000;
/** A new terminal's size until the editor's applies (the bridge sends it with the program's first output). */
const DEFAULT_SIZE = { cols: 80, rows: 24 };

let probe: Promise<ProbeResult> | undefined;

/** Whether this machine can make a terminal (util-linux's `script` and `stty`), probed once per process. */
export function hostTerminalProbe(): Promise<ProbeResult> {
  probe ??= new Promise((resolve) => {
    execFile('script', ['--version'], { timeout: 10_000 }, (err, stdout) => {
      if (err || !/util-linux/.test(stdout)) {
        resolve({ ok: false, reason: "util-linux's script is not installed here (Debian and Ubuntu: bsdutils; Fedora: util-linux-script)" });
        return;
      }
      execFile('stty', ['--version'], { timeout: 10_000 }, (sttyErr) =>
        resolve(sttyErr ? { ok: false, reason: 'stty is not installed here (coreutils)' } : { ok: true, detail: stdout.trim().split('\n')[0] ?? 'script' }),
      );
    });
  });
  return probe;
}

/** What a new terminal runs: the backend's launch of the shell, in a working directory, with an environment. */
export interface HostTerminalLaunch {
  plan: SpawnPlan;
  cwd: string;
  env: Record<string, string>;
}

/** The terminal sessions of one Run's workspace. */
export class HostTerminals {
  private readonly sessions = new Map<string, HostTerminalSession>();
  private closing = false;

  /** Starts a terminal (`launch` makes its program) or reattaches to one by `o.sessionId`. */
  async open(o: WorkspaceTerminalOptions, sink: WorkspaceTerminalSink, launch: () => Promise<HostTerminalLaunch>): Promise<WorkspaceTerminal> {
    if (this.closing) throw failedPrecondition('the sandbox is closing: its terminals are ending');
    if (o.sessionId !== undefined) {
      const session = this.sessions.get(o.sessionId);
      if (!session) throw notFound(`no terminal session ${o.sessionId} in this sandbox (its program ended, or the sandbox restarted)`);
      return session.attach(sink, o);
    }
    const { plan, cwd, env } = await launch();
    const session = new HostTerminalSession(plan, cwd, env, o, (s) => this.sessions.delete(s.id));
    this.sessions.set(session.id, session);
    return session.attach(sink, {});
  }

  /** Ends every terminal (the Run is closing): attached connections are told the sandbox closed them. */
  async closeAll(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.sessions.values()].map((s) => s.end(true)));
  }
}

/** A terminal size as `stty` takes it (the access API allows 1..10000), else `otherwise`. */
function dimension(n: number | undefined, otherwise: number): number {
  return n !== undefined && Number.isInteger(n) && n >= 1 && n <= 10_000 ? n : otherwise;
}

/** Shell-quotes one word for `sh -c`. */
function quote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** One terminal's program and what it said. */
class HostTerminalSession {
  readonly id = randomBytes(12).toString('base64url');
  private readonly child: ChildProcess;
  /** Output kept for replays: `kept` holds the bytes from absolute offset `total - keptBytes`. */
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private total = 0;
  private holder: HostTerminalConnection | undefined;
  private readonly exited: Promise<number>;
  private exitCode: number | undefined;
  private ptyPath: string | undefined;

  constructor(plan: SpawnPlan, cwd: string, env: Record<string, string>, o: WorkspaceTerminalOptions, onGone: (s: HostTerminalSession) => void) {
    const cols = dimension(o.cols, DEFAULT_SIZE.cols);
    const rows = dimension(o.rows, DEFAULT_SIZE.rows);
    // `script -c` runs its command with $SHELL: /bin/sh here, the session's own SHELL given back to the program.
    const shellVar = env.SHELL !== undefined ? `SHELL=${quote(env.SHELL)}; export SHELL; ` : 'unset SHELL; ';
    const command = `stty cols ${cols} rows ${rows} 2>/dev/null; ${shellVar}exec ${[plan.file, ...plan.args].map(quote).join(' ')}`;
    this.child = spawn('script', ['-q', '-f', '-e', '-c', command, '/dev/null'], {
      cwd,
      env: { ...env, SHELL: '/bin/sh' },
      detached: true, // its own process group: ending the terminal signals all of it, and nothing of the daemon's
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdin?.on('error', () => undefined); // a write after the program ended
    this.child.stdout?.on('data', (b: Buffer) => this.output(b));
    this.child.stderr?.on('data', (b: Buffer) => this.output(b));
    this.exited = new Promise((resolve) => {
      this.child.on('error', (err) => {
        this.output(Buffer.from(`\r\nthe terminal could not start: ${err.message}\r\n`));
        resolve(127);
      });
      this.child.on('close', (code, signal) => resolve(code ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 0)));
    });
    void this.exited.then((code) => {
      this.exitCode = code;
      onGone(this);
      const holder = this.holder;
      this.holder = undefined;
      holder?.sink.exit(code);
      holder?.sink.closed(TerminalCloseCode.normal);
    });
  }

  get offset(): number {
    return this.total;
  }

  /** A connection to this session; an earlier one is evicted only with `takeover`. */
  attach(sink: WorkspaceTerminalSink, o: WorkspaceTerminalOptions): HostTerminalConnection {
    if (this.exitCode !== undefined) throw notFound(`terminal session ${this.id} has ended`);
    const held = this.holder;
    if (held && !o.takeover) throw failedPrecondition('another window holds this terminal; attach with takeover to move it here');
    if (held) {
      this.holder = undefined;
      held.sink.error('TAKEN_OVER', 'another connection took this terminal over');
      held.sink.closed(TerminalCloseCode.takenOver);
    }
    if (o.since !== undefined) {
      const from = Math.max(o.since, this.total - this.keptBytes);
      const kept = Buffer.concat(this.kept);
      const replay = kept.subarray(kept.length - (this.total - from));
      if (replay.length > 0) sink.output(replay);
    }
    const connection = new HostTerminalConnection(this, sink);
    this.holder = connection;
    return connection;
  }

  holds(connection: HostTerminalConnection): boolean {
    return this.holder === connection;
  }

  release(connection: HostTerminalConnection): void {
    if (this.holder !== connection) return;
    this.holder = undefined;
    connection.sink.closed(TerminalCloseCode.normal);
  }

  write(bytes: Buffer): void {
    if (this.exitCode === undefined) this.child.stdin?.write(bytes);
  }

  resize(cols: number, rows: number): void {
    const pty = this.pty();
    if (pty !== undefined && dimension(cols, 0) > 0 && dimension(rows, 0) > 0) execFile('stty', ['-F', pty, 'cols', String(cols), 'rows', String(rows)], () => undefined);
  }

  signal(signal: WorkspaceTerminalSignal): void {
    const shell = this.shellPid();
    if (shell === undefined) return;
    const tpgid = readProcStat(shell)?.tpgid ?? -1;
    try {
      if (tpgid > 1) process.kill(-tpgid, signal);
      else process.kill(shell, signal);
    } catch {
      // ended meanwhile
    }
  }

  /**
   * Ends the program as closing a terminal window does: SIGHUP to the shell and the pty's foreground job, as the
   * kernel's hang-up would (`script` itself ignores SIGHUP; it exits with the shell); after a grace, SIGKILL to both.
   * When the Run closes (`sandboxClosing`), whatever else of the shell's session is left (a job that ignores SIGHUP)
   * is killed too, and the holder is told the sandbox closed the terminal.
   */
  async end(sandboxClosing = false): Promise<void> {
    const holder = this.holder;
    this.holder = undefined;
    if (holder && sandboxClosing) holder.sink.error('SESSION_GONE', 'the sandbox closed this terminal');
    holder?.sink.closed(sandboxClosing ? TerminalCloseCode.failed : TerminalCloseCode.normal);
    if (this.exitCode !== undefined) return;
    const shell = this.shellPid();
    const pgid = this.child.pid;
    if (shell !== undefined) {
      const tpgid = readProcStat(shell)?.tpgid ?? -1;
      if (tpgid > 1) signalQuietly(-tpgid, 'SIGHUP');
      signalQuietly(shell, 'SIGHUP');
    }
    const timer = setTimeout(() => {
      if (shell !== undefined) signalQuietly(shell, 'SIGKILL');
      if (pgid !== undefined) signalQuietly(-pgid, 'SIGKILL');
    }, HANGUP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
    if (sandboxClosing && shell !== undefined) for (const pid of sessionMembers(shell)) signalQuietly(pid, 'SIGKILL');
  }

  private output(bytes: Buffer): void {
    this.total += bytes.length;
    this.kept.push(bytes);
    this.keptBytes += bytes.length;
    while (this.keptBytes - (this.kept[0]?.length ?? 0) >= REPLAY_BYTES) this.keptBytes -= (this.kept.shift() as Buffer).length;
    this.holder?.sink.output(bytes);
  }

  /** The pid of the program `script` started on the pty (the session leader of the terminal). */
  private shellPid(): number | undefined {
    const parent = this.child.pid;
    if (parent === undefined) return undefined;
    for (const name of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      if (readProcStat(Number(name))?.ppid === parent) return Number(name);
    }
    return undefined;
  }

  /** The pty's device (`/dev/pts/N`), read from the program's standard input once it runs. */
  private pty(): string | undefined {
    if (this.ptyPath !== undefined) return this.ptyPath;
    const shell = this.shellPid();
    try {
      const link = shell !== undefined ? fs.readlinkSync(`/proc/${shell}/fd/0`) : undefined;
      if (link?.startsWith('/dev/pts/')) this.ptyPath = link;
    } catch {
      // not started yet, or gone
    }
    return this.ptyPath;
  }
}

/** One editor's connection to a session (the WorkspaceTerminal the bridge drives); an evicted one does nothing. */
class HostTerminalConnection implements WorkspaceTerminal {
  /** The session's output offset when this connection attached (after its replay). */
  readonly offset: number;

  constructor(
    private readonly session: HostTerminalSession,
    readonly sink: WorkspaceTerminalSink,
  ) {
    this.offset = session.offset;
  }

  get sessionId(): string {
    return this.session.id;
  }

  write(bytes: Buffer): void {
    if (this.session.holds(this)) this.session.write(bytes);
  }

  resize(cols: number, rows: number): void {
    if (this.session.holds(this)) this.session.resize(cols, rows);
  }

  signal(signal: WorkspaceTerminalSignal): void {
    if (this.session.holds(this)) this.session.signal(signal);
  }

  detach(): void {
    this.session.release(this);
  }

  async end(): Promise<void> {
    if (this.session.holds(this)) await this.session.end();
  }
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // gone already
  }
}

/** Live processes of the session whose leader is `sid`. */
function sessionMembers(sid: number): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = readProcStat(Number(name));
    if (st && st.sid === sid && st.state !== 'Z') out.push(Number(name));
  }
  return out;
}
