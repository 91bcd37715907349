// VS Code's shell integration sequences (OSC 633), written by the Sandbox shell around its prompt and each command
// line, as a shell with VS Code's integration scripts writes them: VS Code then knows where each prompt, command
// line and output is and how each command ended — a mark beside each command (red when it failed), Go to
// Previous/Next Command, and `Terminal.shellIntegration` with exit codes for other extensions (an agent that runs
// commands in a terminal reads them). They take no room on the screen.
const osc633 = (body: string): string => `\x1b]633;${body}\x07`;

/** Before the prompt. */
export const PROMPT_START = osc633('A');
/** After the prompt: what is typed next is the command line. */
export const PROMPT_END = osc633('B');
/** The command runs: its output starts here. */
export const COMMAND_EXECUTED = osc633('C');

/** The command line, escaped as VS Code reads it: `\` doubled, `;` and characters up to space as `\xAB`. */
export function commandLine(line: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what must be escaped
  return osc633(`E;${line.replace(/[\\;\x00-\x20]/g, (c) => (c === '\\' ? '\\\\' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`))}`);
}

/** The command ended with this exit code. */
export function commandFinished(exitCode: number): string {
  return osc633(`D;${exitCode}`);
}
