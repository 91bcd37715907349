// Where OpenSandbox is and how to authenticate, resolved the way the SDK itself does (explicit
// settings first, else OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY, else `localhost:8080` without
// a key), without loading the SDK: the gateway daemon's OpenSandbox backend answers a probe or
// refuses a Run from this alone, and loads the SDK only when it makes or reaches a sandbox
// (issue 25: an idle daemon does not carry it). connection.ts turns a target into the SDK's config.
// The API key is a field here: never log a target, log describeTarget(target).

export interface OpenSandboxConnectionOptions {
  domain?: string;
  apiKey?: string;
  /** Route execd through the lifecycle server (for sandboxes the client cannot reach directly). */
  useServerProxy?: boolean;
  requestTimeoutSeconds?: number;
  env?: NodeJS.ProcessEnv;
}

export interface OpenSandboxTarget {
  readonly domain: string;
  /** Undefined when no key is set (the SDK then sends none). */
  readonly apiKey: string | undefined;
  readonly useServerProxy: boolean;
  readonly requestTimeoutSeconds: number;
}

export const DEFAULT_DOMAIN = 'localhost:8080';

function nonEmpty(v: string | undefined): string | undefined {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

export function resolveTarget(options: OpenSandboxConnectionOptions = {}): OpenSandboxTarget {
  const env = options.env ?? process.env;
  return {
    domain: nonEmpty(options.domain) ?? nonEmpty(env.OPEN_SANDBOX_DOMAIN) ?? DEFAULT_DOMAIN,
    apiKey: nonEmpty(options.apiKey) ?? nonEmpty(env.OPEN_SANDBOX_API_KEY),
    useServerProxy: options.useServerProxy ?? false,
    requestTimeoutSeconds: options.requestTimeoutSeconds ?? 60,
  };
}

/** Safe to log: the domain and whether a key is set, never the key. */
export function describeTarget(t: OpenSandboxTarget): string {
  return `OpenSandbox at ${t.domain} (${t.apiKey ? 'API key set' : 'no API key'}${t.useServerProxy ? ', via server proxy' : ''})`;
}
