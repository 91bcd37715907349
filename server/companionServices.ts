// The services behind the companion server's methods, built once per process from the environment:
// the sandbox providers (local, kruntimes), the session repository (opened on first use), sessions
// made from sandboxes and back, revision indexes and activations. The companion server
// (`sandbox-sessions server`) and the MCP server (`sandbox-sessions mcp`) both start from here, so
// an agent's save, open, fork and activation run the very code a person's do.
import type { ProviderKind } from '../protocol/sandboxes';
import { activationCommandFromEnv } from './activation/sandboxLayout';
import { ActivationService } from './activation/service';
import type { Logger } from './log';
import type { SessionRepository } from './repository/contract';
import { describeRepositoryLocation, openSessionRepository, resolveRepositoryLocation } from './repository/open';
import { KruntimesSandboxProvider } from './sandboxes/kruntimes/kruntimesProvider';
import { LocalSandboxProvider } from './sandboxes/localProvider';
import type { SandboxProvider } from './sandboxes/provider';
import type { PortForwardService } from './ports/portForwardService';
import { portForwardService } from './ports/portSubstrates';
import { defaultStateDir, StateLayout } from './local/stateRoot';
import { OpeningSnapshots } from './sessions/openingSnapshots';
import { RevisionIndexCache } from './sessions/revisionIndex';
import { SandboxSessionService } from './sessions/sandboxSessions';

export interface CompanionServices {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
  sessions: SandboxSessionService;
  revisions: RevisionIndexCache;
  /** Sandboxes' opening snapshots, kept in the state root. */
  openings: OpeningSnapshots;
  /** Opened with the repository, on first use. */
  activations: () => Promise<ActivationService>;
  /** The client's port forwards (closed by dispose(): nothing keeps listening after the client goes). */
  ports: PortForwardService;
  /** Closes the port forwards, the revision indexes, the repository (if it was opened) and the providers. */
  dispose(): Promise<void>;
}

export function createCompanionServices(log: Logger): CompanionServices {
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
  const revisions = new RevisionIndexCache(openRepository);
  const sessions = new SandboxSessionService(openRepository, providers, { kind: location.kind, description: describeRepositoryLocation(location) }, log, revisions);
  const openings = new OpeningSnapshots(new StateLayout(defaultStateDir()).openingSnapshotsDir, sessions, providers, revisions, log);
  let activations: Promise<ActivationService> | undefined;
  const openActivations = () => {
    activations ??= openRepository().then((repo) => {
      const command = activationCommandFromEnv(process.env);
      return new ActivationService({ repository: repo, providers: Object.fromEntries(providers), log, ...(command ? { command } : {}) });
    });
    activations.catch(() => (activations = undefined));
    return activations;
  };
  const ports = portForwardService(providers, log);
  return {
    providers,
    sessions,
    revisions,
    openings,
    activations: openActivations,
    ports,
    dispose: async () => {
      await ports.dispose();
      await revisions.dispose();
      if (repository) await (await repository.catch(() => undefined))?.close();
      await Promise.all([...providers.values()].map((p) => p.dispose()));
    },
  };
}
