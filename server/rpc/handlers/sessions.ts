// Handlers of protocol/companion/sessions.ts: the session repository (list, revisions, export), a revision's
// files, moving a session between a revision and a sandbox, and importing a bundle file; and of
// protocol/companion/openings.ts: a sandbox's opening snapshot, compared and read as a revision is.
import type { openingMethods } from '../../../protocol/companion/openings';
import type { sessionMethods } from '../../../protocol/companion/sessions';
import { compareSandboxWithRevision } from '../../sessions/sandboxChanges';
import { absolute, bundleProgress, work, type HandlersOf, type Services } from './context';

export function sessionHandlers(services: Services): HandlersOf<typeof sessionMethods> {
  return {
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
    'sessions/import': async (params, ctx) => services.sessions.importBundle({ ...params, path: absolute(params.path, 'path') }, { ...work(ctx), onBundleProgress: bundleProgress(ctx) }),
    'sessions/compareSandbox': async (params, ctx) => compareSandboxWithRevision(services, params, work(ctx)),
    'sessions/openInSandbox': async (params, ctx) => {
      const { sandbox, revision } = await services.sessions.openInSandbox(params, work(ctx));
      return { sandbox, revision: revision.ref };
    },
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

export function openingHandlers(services: Services): HandlersOf<typeof openingMethods> {
  return {
    'openings/compareSandbox': async (params, ctx) => services.openings.compare(params.sandbox, work(ctx)),
    'openings/list': async (params) => ({ entries: await services.openings.list(params.sandbox, params.path) }),
    'openings/read': async (params) => {
      const { contents, size } = await services.openings.read(params.sandbox, params.path, params);
      return { contents: contents.toString('base64'), size, truncated: params.offset + contents.length < size };
    },
  };
}
