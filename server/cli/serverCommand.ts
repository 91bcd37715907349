// `sandbox-sessions server --stdio`: the companion server an editor starts and talks to over
// stdin/stdout (JSON-RPC with Content-Length framing); logs go to stderr.
import { parseArgs } from 'node:util';
import { createLogger } from '../log';
import { startCompanionServer } from '../rpc/companionServer';
import { createMethodHandlers } from '../rpc/methods';
import { KruntimesSandboxProvider } from '../sandboxes/kruntimes/kruntimesProvider';
import { LocalSandboxProvider } from '../sandboxes/localProvider';
import type { SandboxProvider } from '../sandboxes/provider';
import type { ProviderKind } from '../../protocol/sandboxes';
import type { SessionRepository } from '../repository/contract';
import { describeRepositoryLocation, openSessionRepository, resolveRepositoryLocation } from '../repository/open';
import { SandboxSessionService } from '../sessions/sandboxSessions';
import { RevisionIndexCache } from '../sessions/revisionIndex';
import { ActivationService } from '../activation/service';
import type { ActivationCommandConfig } from '../activation/sandboxLayout';
import { z } from 'zod';
import type { CommandHelp } from './args';
import type { CommandIo } from './io';

/**
 * The activation command from SANDBOX_SESSIONS_ACTIVATION_COMMAND (a JSON array of strings, e.g.
 * `["maka","activate"]`; the extension sets it from `sandboxSessions.activation.command`).
 */
function activationCommandFromEnv(): ActivationCommandConfig | undefined {
  const raw = process.env.SANDBOX_SESSIONS_ACTIVATION_COMMAND;
  if (!raw) return undefined;
  const parsed = z.array(z.string().min(1)).min(1).safeParse(JSON.parse(raw));
  if (!parsed.success) throw new Error('SANDBOX_SESSIONS_ACTIVATION_COMMAND must be a JSON array of strings, e.g. ["maka","activate"]');
  return { argv: parsed.data };
}

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
  // kruntimes reads KUBECONFIG (else ~/.kube/config, else the in-cluster service account) lazily.
  const providers = new Map<ProviderKind, SandboxProvider>([
    ['local', new LocalSandboxProvider({ log })],
    ['kruntimes', new KruntimesSandboxProvider({ log })],
  ]);
  // The repository opens on first use (a misconfigured one fails only the requests that need it).
  let repository: Promise<SessionRepository> | undefined;
  const openRepository = () => {
    repository ??= openSessionRepository();
    repository.catch(() => (repository = undefined));
    return repository;
  };
  const location = resolveRepositoryLocation();
  const sessions = new SandboxSessionService(openRepository, providers, { kind: location.kind, description: describeRepositoryLocation(location) });
  const revisions = new RevisionIndexCache(openRepository);
  let activations: Promise<ActivationService> | undefined;
  const openActivations = () => {
    activations ??= openRepository().then(
      (repository) =>
        new ActivationService({
          repository,
          providers: Object.fromEntries(providers),
          log,
          ...(activationCommandFromEnv() ? { command: activationCommandFromEnv() } : {}),
        }),
    );
    activations.catch(() => (activations = undefined));
    return activations;
  };
  const server = startCompanionServer({
    input: process.stdin,
    output: process.stdout,
    handlers: createMethodHandlers({ providers, sessions, activations: openActivations, revisions }),
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
  await revisions.dispose();
  if (repository) await (await repository.catch(() => undefined))?.close();
  for (const stop of stopWatches) stop();
  await Promise.all([...providers.values()].map((p) => p.dispose()));
  log.info('client closed the connection; exiting');
  server.dispose();
  // Stop reading stdin so nothing keeps the process alive after `exit` (LSP) or EOF.
  process.stdin.destroy();
  return 0;
}
