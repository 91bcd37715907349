// Builds the handler for every method of the protocol table from the server's services.
// Adding a method to protocol/companion.ts without a handler here fails the typecheck.
import { companionMethods, COMPANION_PROTOCOL_VERSION } from '../../protocol/companion';
import { SERVER_VERSION } from '../version';
import type { MethodHandlers } from './companionServer';

export function createMethodHandlers(): MethodHandlers {
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
  };
}
