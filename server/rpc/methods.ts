// Builds the handler for every method of the protocol table from the server's services.
// Adding a method to protocol/companion.ts without a handler here fails the typecheck.
import { CompanionError, companionMethods, COMPANION_PROTOCOL_VERSION } from '../../protocol/companion';
import type { ProviderKind } from '../../protocol/sandboxes';
import type { SandboxProvider, WorkOptions } from '../sandboxes/provider';
import { SERVER_VERSION } from '../version';
import type { MethodHandlers, RequestContext } from './companionServer';

export interface Services {
  providers: ReadonlyMap<ProviderKind, SandboxProvider>;
}

function work(ctx: RequestContext): WorkOptions {
  return { signal: ctx.signal, progress: (phase, message) => ctx.progress({ phase, ...(message ? { message } : {}) }) };
}

export function createMethodHandlers(services: Services): MethodHandlers {
  const provider = (kind: ProviderKind): SandboxProvider => {
    const p = services.providers.get(kind);
    if (!p) throw new CompanionError('unavailable', `the ${kind} provider is not available in this server`);
    return p;
  };
  return {
    initialize: async () => ({
      serverVersion: SERVER_VERSION,
      protocolVersion: COMPANION_PROTOCOL_VERSION,
      nodeVersion: process.version,
      methods: Object.keys(companionMethods),
      serverInfo: { name: 'sandbox-sessions', version: SERVER_VERSION },
      capabilities: {},
    }),
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
    'sandboxes/artifacts/download': async (params, ctx) => ({
      artifacts: await provider(params.ref.provider).downloadArtifacts(params.ref, params.destination, {
        ...work(ctx),
        unpack: params.unpack,
        ...(params.names ? { names: params.names } : {}),
      }),
    }),
  };
}
