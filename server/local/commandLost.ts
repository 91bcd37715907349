// A command whose processes outlived SIGKILL. Cancelled, timed out or finished means nothing
// the command started is left (seed 003 §5.4/§8); when the runtime cannot confirm that, it
// says so — outcome `lost`, this error (gRPC Internal, so HTTP 500) — and never reports
// `cancelled` for a command that may still be running.
import { SessionError } from './sessionError';

/** Stable code for logs and callers (`code`); the exec record's outcome is `lost`. */
export class CommandLostError extends SessionError {
  constructor(
    readonly pgid: number,
    /** Pids still running when the runtime gave up waiting. */
    readonly survivors: readonly number[],
    boundMs: number,
  ) {
    super(
      'Internal',
      `command lost: ${survivors.length} process(es) of its group ${pgid} (pid ${survivors.join(', ')}) still running ` +
        `${boundMs / 1000} s after SIGKILL (stuck in the kernel?); inspect them with \`ps -o pid,stat,wchan,cmd -p ${survivors.join(',')}\``,
      'CommandLost',
    );
  }
}
