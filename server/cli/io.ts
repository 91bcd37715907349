// The streams a CLI command writes to, passed in so commands run in-process in tests.
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** A CLI subcommand: its arguments after the command name → the process exit code. */
export type CommandHandler = (argv: string[], io: CommandIo) => Promise<number>;
