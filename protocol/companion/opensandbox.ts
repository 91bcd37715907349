// The companion method that tells the local gateway daemon where OpenSandbox is: one feature of the
// method table in index.ts, the only place an OpenSandbox credential crosses the protocol.
import { z } from 'zod';
import { defineMethod } from './contract';
import { SECRET_NAME } from '../opensandboxCredentials';

export const openSandboxMethods = {
  'opensandbox/configure': defineMethod('opensandbox/configure', {
    description:
      'Tells the local gateway daemon where OpenSandbox is (`domain`, e.g. `opensandbox.example.com:8080`) and its API key, ' +
      'for sandboxes on the `opensandbox` backend. Written to a 0600 file in the daemon\'s state root and read on every ' +
      'use; the key is never logged or put into Run records. Without `domain` (and not only `credentials`) the file is removed (the daemon then uses its ' +
      'own OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY, if any). `credentials` (secret name → value, for credential ' +
      'bindings) are never written anywhere: kept in memory and handed to the daemon before each create that needs them.',
    params: z.object({
      domain: z.string().max(2048).optional(),
      apiKey: z.string().max(4096).optional(),
      /**
       * Values of the secrets named by credential bindings (from the editor's secret storage), by name. Held in the
       * companion's and the daemon's memory only and put into each new sandbox's Credential Vault; replaces the set.
       */
      credentials: z.record(z.string().regex(SECRET_NAME), z.string().min(1).max(16_384)).optional(),
    }),
    result: z.object({ configured: z.boolean() }),
    example: { params: { domain: 'opensandbox.example.com:8080', apiKey: '<key>' }, result: { configured: true } },
  }),
} as const;
