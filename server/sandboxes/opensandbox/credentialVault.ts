// A Run's credential bindings as OpenSandbox's Credential Vault takes them (spec §4): one inline credential per
// secret name, one binding per configured binding (bearer/basic/apiKey on the configured hosts). The values are
// resolved in the gateway daemon — handed over in memory by the client (server/local/daemonSecrets.ts), else the
// daemon's own SANDBOX_SESSIONS_CREDENTIAL_<NAME> — and exist only in this request; OpenSandbox never gives them back.
import type { CredentialBinding, CredentialVaultCreateRequest } from '@alibaba-group/opensandbox';
import { credentialEnvVar, missingSecretMessage, type OpenSandboxCredentialBinding } from '../../../protocol/opensandboxCredentials';
import { daemonSecret } from '../../local/daemonSecrets';

/** The first binding whose secret has no value here, if any. */
export function bindingWithoutSecret(bindings: OpenSandboxCredentialBinding[], env: NodeJS.ProcessEnv): OpenSandboxCredentialBinding | undefined {
  return bindings.find((b) => daemonSecret(b.secret, credentialEnvVar(b.secret), env) === undefined);
}

/** The vault's create request; throws the message naming the command / env var when a secret is missing. */
export function vaultRequest(bindings: OpenSandboxCredentialBinding[], env: NodeJS.ProcessEnv): CredentialVaultCreateRequest {
  const credentials = new Map<string, string>();
  for (const b of bindings) {
    const value = daemonSecret(b.secret, credentialEnvVar(b.secret), env);
    if (value === undefined) throw new Error(missingSecretMessage(b));
    credentials.set(b.secret, value);
  }
  return {
    credentials: [...credentials].map(([name, value]) => ({ name, source: { type: 'inline' as const, value } })),
    bindings: bindings.map((b): CredentialBinding => ({
      name: b.name,
      match: { hosts: b.hosts },
      auth: b.auth === 'apiKey' ? { type: 'apiKey', name: b.header ?? '', credential: b.secret } : { type: b.auth, credential: b.secret },
    })),
  };
}

/** Every binding host, for the egress allow list (the vault refuses a host the policy does not explicitly allow). */
export function bindingHosts(bindings: OpenSandboxCredentialBinding[]): string[] {
  return [...new Set(bindings.flatMap((b) => b.hosts))];
}
