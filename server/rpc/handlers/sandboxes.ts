// Handlers of protocol/companion/sandboxes.ts, agents.ts and opensandbox.ts: a sandbox's lifecycle through its
// provider (list, create, open, terminate, delete, artifacts), the agents' grant label, and OpenSandbox's settings.
import { CompanionError } from '../../../protocol/companion';
import type { agentMethods } from '../../../protocol/companion/agents';
import type { openSandboxMethods } from '../../../protocol/companion/opensandbox';
import type { sandboxMethods } from '../../../protocol/companion/sandboxes';
import { agentGrantLabels } from '../../../protocol/agentAccess';
import { providerLookup, work, type HandlersOf, type Services } from './context';

export function sandboxHandlers(services: Services): HandlersOf<typeof sandboxMethods> {
  const provider = providerLookup(services);
  return {
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
      await services.openings.forget(params.ref);
      return {};
    },
    'sandboxes/artifacts/download': async (params, ctx) => ({
      artifacts: await provider(params.ref.provider).downloadArtifacts(params.ref, params.destination, {
        ...work(ctx),
        unpack: params.unpack,
        ...(params.names ? { names: params.names } : {}),
      }),
    }),
  };
}

export function agentHandlers(services: Services): HandlersOf<typeof agentMethods> {
  const provider = providerLookup(services);
  return {
    'sandboxes/grantAgents': async (params, ctx) => {
      const sandbox = await provider(params.ref.provider).patchMetadata(params.ref, { labels: agentGrantLabels(params.granted) });
      ctx.log.info(params.granted ? 'sandbox granted to agents' : "agents' grant revoked", { sandbox: sandbox.key });
      return { sandbox };
    },
  };
}

export function openSandboxHandlers(services: Services): HandlersOf<typeof openSandboxMethods> {
  const provider = providerLookup(services);
  return {
    'opensandbox/configure': async (params) => {
      const local = provider('local');
      if (!local.configureOpenSandbox) throw new CompanionError('unavailable', 'this server has no local runtime to configure OpenSandbox for');
      await local.configureOpenSandbox(params);
      return { configured: params.domain !== undefined && params.domain.trim() !== '' };
    },
  };
}
