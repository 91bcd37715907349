// Builds the handler for every method of the protocol table from the server's services: one file per feature in
// handlers/ (like protocol/companion/), assembled here. Adding a method to protocol/companion/ without a handler
// fails the typecheck.
import type { MethodHandlers } from './companionServer';
import { activationHandlers } from './handlers/activations';
import { bundleHandlers } from './handlers/bundles';
import type { Services } from './handlers/context';
import { fileHandlers } from './handlers/files';
import { lifecycleHandlers } from './handlers/lifecycle';
import { logHandlers } from './handlers/logs';
import { portHandlers } from './handlers/ports';
import { agentHandlers, openSandboxHandlers, sandboxHandlers } from './handlers/sandboxes';
import { searchHandlers } from './handlers/search';
import { openingHandlers, sessionHandlers } from './handlers/sessions';

export type { Services } from './handlers/context';

export function createMethodHandlers(services: Services): MethodHandlers {
  return {
    ...lifecycleHandlers(),
    ...sandboxHandlers(services),
    ...agentHandlers(services),
    ...openSandboxHandlers(services),
    ...logHandlers(services),
    ...searchHandlers(services),
    ...fileHandlers(services),
    ...bundleHandlers(),
    ...sessionHandlers(services),
    ...openingHandlers(services),
    ...activationHandlers(services),
    ...portHandlers(services),
  };
}
