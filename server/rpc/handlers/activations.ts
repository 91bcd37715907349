// Handlers of protocol/companion/activations.ts: one activation of a session (events streamed as notifications)
// and fork.
import type { activationMethods } from '../../../protocol/companion/activations';
import type { HandlersOf, Services } from './context';

export function activationHandlers(services: Services): HandlersOf<typeof activationMethods> {
  return {
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
  };
}
