// `sandbox-sessions server --stdio`: the companion server an editor starts and talks to over
// stdin/stdout (JSON-RPC with Content-Length framing); logs go to stderr.
import { parseArgs } from 'node:util';
import { createLogger } from '../log';
import { createCompanionServices } from '../companionServices';
import { startCompanionServer } from '../rpc/companionServer';
import { createMethodHandlers } from '../rpc/methods';
import type { CommandHelp } from './args';
import type { CommandIo } from './io';

const USAGE = `usage: sandbox-sessions server --stdio [--clientProcessId PID]
  the companion JSON-RPC server an editor starts: Content-Length framed JSON-RPC on stdin/stdout
  (methods: docs/protocol.md), structured logs on stderr; --clientProcessId ends it when that process does`;
export const SERVER_HELP: CommandHelp = { usage: USAGE };

export async function runServerCommand(argv: string[], io: CommandIo): Promise<number> {
  // --clientProcessId is what vscode-languageclient passes: the server ends when its editor does.
  const { values } = parseArgs({ args: argv, options: { stdio: { type: 'boolean' }, clientProcessId: { type: 'string' } }, strict: true });
  if (!values.stdio) {
    io.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const log = createLogger(io.stderr);
  const services = createCompanionServices(log);
  const { providers } = services;
  const server = startCompanionServer({
    input: process.stdin,
    output: process.stdout,
    handlers: createMethodHandlers(services),
    log,
  });
  log.info('companion server listening on stdio', { pid: process.pid });
  // Phase changes become `sandboxes/changed` notifications (watches start lazily, on first use of a provider).
  const stopWatches = [...providers.values()].map((p) =>
    p.watch(
      (change) => void server.notify('sandboxes/changed', { sandbox: change.sandbox, ...(change.removed ? { removed: true } : {}) }),
      (state) => void server.notify('gateway/changed', { provider: p.kind, ...state }),
    ),
  );
  const clientPid = values.clientProcessId !== undefined ? Number(values.clientProcessId) : undefined;
  const orphanCheck =
    clientPid !== undefined && Number.isInteger(clientPid) && clientPid > 0
      ? setInterval(() => {
          try {
            process.kill(clientPid, 0);
          } catch {
            log.warn('the editor process is gone; exiting', { clientPid });
            server.dispose();
            process.exit(0);
          }
        }, 3000).unref()
      : undefined;
  await server.closed;
  if (orphanCheck) clearInterval(orphanCheck);
  for (const stop of stopWatches) stop();
  await services.dispose();
  log.info('client closed the connection; exiting');
  server.dispose();
  // Stop reading stdin so nothing keeps the process alive after `exit` (LSP) or EOF.
  process.stdin.destroy();
  return 0;
}
