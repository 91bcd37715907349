// `sandbox-sessions server --stdio`: the companion server an editor starts and talks to over
// stdin/stdout (JSON-RPC with Content-Length framing); logs go to stderr.
import { parseArgs } from 'node:util';
import { createLogger } from '../log';
import { startCompanionServer } from '../rpc/companionServer';
import { createMethodHandlers } from '../rpc/methods';
import type { CommandIo } from './io';

export async function runServerCommand(argv: string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { stdio: { type: 'boolean' } }, strict: true });
  if (!values.stdio) {
    io.stderr.write('usage: sandbox-sessions server --stdio\n');
    return 2;
  }
  const log = createLogger(io.stderr);
  const server = startCompanionServer({ input: process.stdin, output: process.stdout, handlers: createMethodHandlers(), log });
  log.info('companion server listening on stdio', { pid: process.pid });
  await server.closed;
  log.info('client closed the connection; exiting');
  server.dispose();
  // Stop reading stdin so nothing keeps the process alive after `exit` (LSP) or EOF.
  process.stdin.destroy();
  return 0;
}
