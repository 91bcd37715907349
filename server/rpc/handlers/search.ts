// Handlers of protocol/companion/search.ts: text search in a sandbox's files, streamed as progress when asked.
import type { searchMethods } from '../../../protocol/companion/search';
import { SandboxSearchService } from '../../search/searchService';
import type { HandlersOf, Services } from './context';

export function searchHandlers(services: Services): HandlersOf<typeof searchMethods> {
  const search = new SandboxSearchService(services.providers);
  return {
    'sandboxes/search': async (params, ctx) =>
      search.search(params.ref, params.query, {
        signal: ctx.signal,
        // Results stream only to a caller that asked for progress; otherwise they are all in the response.
        ...(params.progressToken !== undefined ? { onPartial: (partial) => ctx.progress({ phase: 'results', partial }) } : {}),
        onPhase: (phase, message) => ctx.progress({ phase, message }),
      }),
  };
}
