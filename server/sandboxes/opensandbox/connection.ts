// An OpenSandbox connection for the SDK: a resolved target (connectionTarget.ts: explicit settings,
// else OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY, else `localhost:8080` without a key) and the
// SDK's ConnectionConfig made from it. The API key is held here and handed only to the SDK's
// ConnectionConfig; describe() is what may be logged. Importing this module loads the SDK.
import { ConnectionConfig } from '@alibaba-group/opensandbox';
import { describeTarget, resolveTarget, type OpenSandboxConnectionOptions, type OpenSandboxTarget } from './connectionTarget';

export { DEFAULT_DOMAIN, type OpenSandboxConnectionOptions } from './connectionTarget';

export interface OpenSandboxConnection {
  readonly domain: string;
  readonly hasApiKey: boolean;
  readonly useServerProxy: boolean;
  /** A fresh SDK ConnectionConfig (each Sandbox/SandboxManager owns and closes its transport). */
  config(): ConnectionConfig;
  /** Safe to log: the domain and whether a key is set, never the key. */
  describe(): string;
}

export function resolveConnection(options: OpenSandboxConnectionOptions = {}): OpenSandboxConnection {
  return connectionTo(resolveTarget(options));
}

export function connectionTo(target: OpenSandboxTarget): OpenSandboxConnection {
  const { domain, apiKey, useServerProxy, requestTimeoutSeconds } = target;
  return {
    domain,
    hasApiKey: apiKey !== undefined,
    useServerProxy,
    // `apiKey: ''` (not undefined) keeps the SDK from reading the environment behind our back.
    config: () => new ConnectionConfig({ domain, apiKey: apiKey ?? '', useServerProxy, requestTimeoutSeconds, disableMetrics: true }),
    describe: () => describeTarget(target),
  };
}
