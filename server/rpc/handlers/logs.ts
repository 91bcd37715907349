// Handlers of protocol/companion/logs.ts: a sandbox's log, whole or followed as `sandboxes/log` notifications.
import { CompanionError } from '../../../protocol/companion';
import type { logMethods } from '../../../protocol/companion/logs';
import { providerLookup, type HandlersOf, type Services } from './context';

export function logHandlers(services: Services): HandlersOf<typeof logMethods> {
  const provider = providerLookup(services);
  return {
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
  };
}
