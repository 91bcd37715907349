// The streams a CLI command writes to, passed in so commands run in-process in tests.
export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** What the command may read (default: the process's stdin). */
  stdin?: NodeJS.ReadableStream;
}

/** All of a stream, refusing more than `maxBytes` (a command's stdin travels in one request). */
export async function readAll(stream: NodeJS.ReadableStream, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    total += buf.length;
    if (total > maxBytes) throw new RangeError(`stdin is larger than ${maxBytes} bytes, the most one command can take`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

/** A CLI subcommand: its arguments after the command name → the process exit code. */
export type CommandHandler = (argv: string[], io: CommandIo) => Promise<number>;
