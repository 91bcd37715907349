// Builds the handler for every method of the protocol table from the server's services.
// Adding a method to protocol/companion.ts without a handler here fails the typecheck.
import path from 'node:path';
import { CompanionError, companionMethods, COMPANION_PROTOCOL_VERSION, initializeClient } from '../../protocol/companion';
import { DEFAULT_PEOPLE_LIMITS } from '../../protocol/bundle';
import type { ProviderKind } from '../../protocol/sandboxes';
import { hydrateSessionBundle, inspectSessionBundle, type BundleProgress } from '../bundle';
import { packWorkspace } from '../bundle/packWorkspace';
import type { SandboxSessionService } from '../sessions/sandboxSessions';
import type { ActivationService } from '../activation/service';
import type { RevisionIndexCache } from '../sessions/revisionIndex';
import type { SandboxProvider, WorkOptions } from '../sandboxes/provider';
import { SERVER_VERSION } from '../version';
import type { MethodHandlers, RequestContext } from './companionServer';

export interface Services {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
  sessions: SandboxSessionService;
  /** Opened with the repository, on first use. */
  activations: () => Promise<ActivationService>;
  revisions: RevisionIndexCache;
}

function work(ctx: RequestContext): WorkOptions {
  return { signal: ctx.signal, progress: (phase, message) => ctx.progress({ phase, ...(message ? { message } : {}) }) };
}

/** Codec progress as `$/progress`; throwing here when cancelled aborts the codec (it publishes nothing). */
function bundleProgress(ctx: RequestContext): (p: BundleProgress) => void {
  return (p) => {
    ctx.signal.throwIfAborted();
    ctx.progress({
      phase: p.phase,
      bytesDone: p.bytes,
      ...(p.totalBytes !== undefined ? { bytesTotal: p.totalBytes, percent: p.totalBytes > 0 ? Math.min(99, Math.floor((p.bytes / p.totalBytes) * 100)) : 0 } : {}),
    });
  };
}

function absolute(p: string, what: string): string {
  if (!path.isAbsolute(p)) throw new CompanionError('invalid_params', `${what} must be an absolute path: ${p}`);
  return p;
}

export function createMethodHandlers(services: Services): MethodHandlers {
  const provider = (kind: ProviderKind): SandboxProvider => {
    const p = services.providers.get(kind);
    if (!p) throw new CompanionError('unavailable', `the ${kind} provider is not available in this server`);
    return p;
  };
  return {
    initialize: async (params, ctx) => {
      ctx.log.info('client connected', { client: initializeClient(params) });
      return {
        serverVersion: SERVER_VERSION,
        protocolVersion: COMPANION_PROTOCOL_VERSION,
        nodeVersion: process.version,
        methods: Object.keys(companionMethods),
        serverInfo: { name: 'sandbox-sessions', version: SERVER_VERSION },
        capabilities: {},
      };
    },
    shutdown: async () => null,
    'providers/list': async () => ({ providers: await Promise.all([...services.providers.values()].map((p) => p.info())) }),
    'sandboxes/list': async (params) => ({
      sandboxes: await provider(params.provider).list({
        ...(params.context !== undefined ? { context: params.context } : {}),
        ...(params.namespace !== undefined ? { namespace: params.namespace } : {}),
      }),
    }),
    'sandboxes/create': async (params, ctx) => ({
      sandbox: await provider(params.spec.provider).create(params.spec, {
        ...work(ctx),
        waitForReady: params.waitForReady,
        ...(params.timeoutSeconds ? { timeoutMs: params.timeoutSeconds * 1000 } : {}),
      }),
    }),
    'sandboxes/get': async (params) => provider(params.ref.provider).get(params.ref),
    'sandboxes/open': async (params) => provider(params.ref.provider).open(params.ref),
    'sandboxes/release': async (params) => ({ released: await provider(params.ref.provider).release(params.ref) }),
    'sandboxes/terminate': async (params, ctx) => ({
      sandbox: await provider(params.ref.provider).terminate(params.ref, params.mode, {
        ...work(ctx),
        wait: params.wait,
        ...(params.timeoutSeconds ? { timeoutMs: params.timeoutSeconds * 1000 } : {}),
      }),
    }),
    'sandboxes/delete': async (params) => {
      await provider(params.ref.provider).delete(params.ref);
      return {};
    },
    'sandboxes/logs': async (params, ctx) => {
      const p = provider(params.ref.provider);
      if (!p.logs) throw new CompanionError('unavailable', `reading the log of a ${params.ref.provider} sandbox is not supported yet`);
      const { ref, followId, ...query } = params;
      if (!query.follow) {
        const lines: string[] = [];
        await p.logs(ref, query, (line) => lines.push(line), ctx.signal);
        ctx.signal.throwIfAborted();
        return { lines };
      }
      // Lines that arrive together go out as one notification.
      let batch: string[] = [];
      const flush = (): void => {
        if (batch.length === 0) return;
        ctx.notify('sandboxes/log', { followId: followId as string, lines: batch });
        batch = [];
      };
      await p.logs(
        ref,
        query,
        (line) => {
          if (batch.length === 0) queueMicrotask(flush);
          batch.push(line);
        },
        ctx.signal,
      );
      flush();
      ctx.signal.throwIfAborted();
      return { lines: [] };
    },
    'sandboxes/artifacts/download': async (params, ctx) => ({
      artifacts: await provider(params.ref.provider).downloadArtifacts(params.ref, params.destination, {
        ...work(ctx),
        unpack: params.unpack,
        ...(params.names ? { names: params.names } : {}),
      }),
    }),
    'bundles/pack': async (params, ctx) =>
      packWorkspace({
        stateRoot: absolute(params.stateRoot, 'stateRoot'),
        workspaceRoot: absolute(params.workspaceRoot, 'workspaceRoot'),
        destination: absolute(params.destination, 'destination'),
        sessionId: params.sessionId,
        lastCommittedActivationId: params.lastCommittedActivationId,
        limits: DEFAULT_PEOPLE_LIMITS,
        onProgress: bundleProgress(ctx),
        signal: ctx.signal,
      }),
    'bundles/inspect': async (params, ctx) =>
      inspectSessionBundle({
        source: { path: absolute(params.path, 'path'), ...(params.expectedArchiveDigest ? { expectedArchiveDigest: params.expectedArchiveDigest } : {}) },
        limits: DEFAULT_PEOPLE_LIMITS,
        onProgress: bundleProgress(ctx),
      }),
    'bundles/hydrate': async (params, ctx) =>
      hydrateSessionBundle({
        source: { path: absolute(params.path, 'path') },
        expectedSessionId: params.sessionId,
        destinationRoot: absolute(params.destination, 'destination'),
        limits: DEFAULT_PEOPLE_LIMITS,
        onProgress: bundleProgress(ctx),
      }),
    'sessions/list': async () => ({
      repository: { kind: services.sessions.location.kind, location: services.sessions.location.description },
      sessions: await services.sessions.list(),
    }),
    'sessions/export': async (params) => {
      const out = await services.sessions.export({ ...params, destination: absolute(params.destination, 'destination') });
      return { revision: out.revision.ref, path: out.path, digest: out.digest, bytes: out.bytes };
    },
    'sessions/revisions': async (params) => ({ revisions: await services.sessions.revisions(params.sessionId) }),
    'sessions/saveSandbox': async (params, ctx) => services.sessions.saveSandbox(params, work(ctx)),
    'sessions/openInSandbox': async (params, ctx) => {
      const { sandbox, revision } = await services.sessions.openInSandbox(params, work(ctx));
      return { sandbox, revision: revision.ref };
    },
    'activations/run': async (params, ctx) => {
      const { progressToken: _token, ...request } = params;
      const service = await services.activations();
      return service.run(request, {
        signal: ctx.signal,
        onEvent: (event) => ctx.notify('activations/event', { sessionId: request.sessionId, activationId: request.activationId, provisional: true, event }),
        onProgress: (phase, message) => ctx.progress({ phase, ...(message ? { message } : {}) }),
      });
    },
    'sessions/fork': async (params, ctx) =>
      (await services.activations()).fork(params, { onProgress: (phase, message) => ctx.progress({ phase, ...(message ? { message } : {}) }) }),
    'revisions/list': async (params) => ({
      entries: await services.revisions.list(params.sessionId, params.revision, params.path),
      indexBuilds: services.revisions.builds,
    }),
    'revisions/read': async (params) => {
      const { contents, size } = await services.revisions.read(params.sessionId, params.revision, params.path, params);
      return { contents: contents.toString('base64'), size, truncated: params.offset + contents.length < size };
    },
  };
}
