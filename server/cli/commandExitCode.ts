// The exit code of an `exec` verb (`sandbox exec`, `kruntimes exec`): the sandbox command's own, so a
// script (or `make`, or CI) branches on it as if the command ran here; the shell's conventions where
// the command has none (it timed out, or was cancelled, or its program is not in the sandbox).

/** How a sandbox command ended, as the gateway's `command` result says it. */
export interface CommandEnd {
  /** -1 when it did not exit by itself (a signal, a timeout, a cancel). */
  exitCode: number;
  timedOut?: boolean;
  cancelled?: boolean;
}

/**
 * Its own exit code (0–255); 124 when it timed out (as timeout(1)); 130 when it was cancelled or this
 * process was interrupted (Ctrl+C, as a shell says it); 1 otherwise (ended by a signal).
 */
export function commandExitCode(cmd: CommandEnd, interrupted = false): number {
  if (cmd.exitCode >= 0) return Math.min(cmd.exitCode, 255);
  return cmd.timedOut === true ? 124 : cmd.cancelled === true || interrupted ? 130 : 1;
}

/** The exit code of a command Ctrl+C cancelled before it said how it ended. */
export const INTERRUPTED_EXIT_CODE = 130;

/** The exit code of a command whose program the sandbox does not have, as a shell's `command not found`. */
export const COMMAND_NOT_FOUND_EXIT_CODE = 127;

/** How a kruntimes gateway (and the local one, which answers as it does) says an argv's program is not there. */
const NOT_FOUND = /start command: exec: "([^"]*)": executable file not found in \$PATH/;

/** The program named in a gateway's "executable file not found" refusal, or undefined for any other failure. */
export function commandNotFound(err: unknown): string | undefined {
  return err instanceof Error ? NOT_FOUND.exec(err.message)?.[1] : undefined;
}
