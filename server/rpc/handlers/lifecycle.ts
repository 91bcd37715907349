// Handlers of protocol/companion/lifecycle.ts: the handshake and shutdown.
import { companionMethods, COMPANION_PROTOCOL_VERSION, initializeClient } from '../../../protocol/companion';
import type { lifecycleMethods } from '../../../protocol/companion/lifecycle';
import { SERVER_VERSION } from '../../version';
import type { HandlersOf } from './context';

export function lifecycleHandlers(): HandlersOf<typeof lifecycleMethods> {
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
  };
}
