// What the Sandbox terminal and `sandbox` tasks send as one command line: its shell text, its
// working directory, and PYTHONUNBUFFERED=1. No PTY stands behind either of them, so Python would
// hold what it prints in a block buffer until it exits: `python3 -m http.server 8000` would never
// show its "Serving HTTP on … (http://0.0.0.0:8000/)" line, whose address the terminal offers to
// forward. The per-command env comes after the Runtime's and the Run's, so the line itself is where
// a person turns it off (`PYTHONUNBUFFERED= python3 …`).
import type { SessionCommand } from '../../protocol/kruntimes/gateway';

/** Added to the environment of every command a Sandbox terminal or task runs. */
export const TERMINAL_COMMAND_ENV: Readonly<Record<string, string>> = { PYTHONUNBUFFERED: '1' };

export function terminalCommand(shell: string, workingDirectory?: string): SessionCommand {
  return { shell, ...(workingDirectory ? { workingDirectory } : {}), env: { ...TERMINAL_COMMAND_ENV } };
}
