// Where OpenSandbox is and how to authenticate, resolved the way the SDK itself does:
// explicit settings first, else OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY, else
// `localhost:8080` without a key. The API key is held here and handed only to the SDK's
// ConnectionConfig; describe() is what may be logged or shown.
import { ConnectionConfig } from '@alibaba-group/opensandbox';

export interface OpenSandboxConnectionOptions {
  domain?: string;
  apiKey?: string;
  /** Route execd through the lifecycle server (for sandboxes the client cannot reach directly). */
  useServerProxy?: boolean;
  requestTimeoutSeconds?: number;
  env?: NodeJS.ProcessEnv;
}

export interface OpenSandboxConnection {
  readonly domain: string;
  readonly hasApiKey: boolean;
  readonly useServerProxy: boolean;
  /** A fresh SDK ConnectionConfig (each Sandbox/SandboxManager owns and closes its transport). */
  config(): ConnectionConfig;
  /** Safe to log: the domain and whether a key is set, never the key. */
  describe(): string;
}

export const DEFAULT_DOMAIN = 'localhost:8080';

function nonEmpty(v: string | undefined): string | undefined {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

export function resolveConnection(options: OpenSandboxConnectionOptions = {}): OpenSandboxConnection {
  const env = options.env ?? process.env;
  const domain = nonEmpty(options.domain) ?? nonEmpty(env.OPEN_SANDBOX_DOMAIN) ?? DEFAULT_DOMAIN;
  const apiKey = nonEmpty(options.apiKey) ?? nonEmpty(env.OPEN_SANDBOX_API_KEY);
  const useServerProxy = options.useServerProxy ?? false;
  const requestTimeoutSeconds = options.requestTimeoutSeconds ?? 60;
  return {
    domain,
    hasApiKey: apiKey !== undefined,
    useServerProxy,
    // `apiKey: ''` (not undefined) keeps the SDK from reading the environment behind our back.
    config: () => new ConnectionConfig({ domain, apiKey: apiKey ?? '', useServerProxy, requestTimeoutSeconds, disableMetrics: true }),
    describe: () => `OpenSandbox at ${domain} (${apiKey ? 'API key set' : 'no API key'}${useServerProxy ? ', via server proxy' : ''})`,
  };
}
