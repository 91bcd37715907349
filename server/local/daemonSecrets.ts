// Secret values a client hands the gateway daemon for its backends (today: OpenSandbox credential values, which the
// backend puts into a new sandbox's Credential Vault), kept in this process's memory only: never written to the
// state root, a Run record, an annotation or a log, and gone when the daemon stops. A client sends them again
// before each create that needs them (PUT /local/v1/secrets); the daemon's own environment is the fallback.
const values = new Map<string, string>();

/** Sets (a string) or forgets (null) secret values by name. */
export function setDaemonSecrets(update: Record<string, string | null>): void {
  for (const [name, value] of Object.entries(update)) {
    if (value === null) values.delete(name);
    else values.set(name, value);
  }
}

/** The value of secret `name` held in memory, else the one `env` gives under `envVar`, else undefined. */
export function daemonSecret(name: string, envVar: string, env: NodeJS.ProcessEnv): string | undefined {
  const held = values.get(name);
  if (held !== undefined) return held;
  const fromEnv = env[envVar];
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : undefined;
}
