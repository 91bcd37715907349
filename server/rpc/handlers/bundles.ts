// Handlers of protocol/companion/bundles.ts: the Session Bundle codec on local paths, with codec progress.
import { DEFAULT_PEOPLE_LIMITS } from '../../../protocol/bundle';
import type { bundleMethods } from '../../../protocol/companion/bundles';
import { hydrateSessionBundle, inspectSessionBundle } from '../../bundle';
import { packWorkspace } from '../../bundle/packWorkspace';
import { absolute, bundleProgress, type HandlersOf } from './context';

export function bundleHandlers(): HandlersOf<typeof bundleMethods> {
  return {
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
  };
}
