// An OpenSandbox credential binding as a user configures it (setting `sandboxSessions.opensandbox.credentialBindings`,
// a create spec, an activation's sandbox): which hosts get which auth header from which secret. Only the secret's
// NAME travels here — its value comes from the editor's secret storage or SANDBOX_SESSIONS_CREDENTIAL_<NAME> and
// goes to OpenSandbox's Credential Vault, never into settings, Run records, annotations, logs or bundles.
import { z } from 'zod';

// The schemas are built on first parse (z.lazy): zod 4 binds every method to every schema instance, a cost
// at the start of the daemon and the CLI, which rarely check a binding (issue 25).

/** A host the binding matches: an FQDN or a leftmost `*.` wildcard (OpenSandbox refuses IPs and single labels). */
const HOST = /^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$/;
/** HTTP token characters (RFC 9110), as the egress sidecar checks header names. */
const HEADER = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
/** A secret's name: usable in an environment variable name (SANDBOX_SESSIONS_CREDENTIAL_<NAME>). */
export const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;

export const OpenSandboxCredentialBindingSchema = z.lazy(() =>
  z
    .strictObject({
      /** The binding's name in the sandbox's vault. */
      name: z.string().regex(/^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$/, 'a binding name is letters, digits, - _ . (≤ 63)'),
      hosts: z.array(z.string().toLowerCase().regex(HOST, 'a host is an FQDN such as api.example.com or *.example.com')).min(1).max(16),
      /** bearer: `Authorization: Bearer <secret>`; basic: `Authorization: Basic <secret>` (base64 of user:password); apiKey: `<header>: <secret>`. */
      auth: z.enum(['bearer', 'basic', 'apiKey']),
      /** The header apiKey sets (e.g. X-Api-Key). */
      header: z.string().regex(HEADER, 'a header name is an HTTP token').max(128).optional(),
      /** The NAME of the secret (uppercase letters, digits, _), never its value. */
      secret: z.string().regex(SECRET_NAME, 'a secret name is uppercase letters, digits and _ (e.g. GITHUB_TOKEN)'),
    })
    .refine((b) => b.auth !== 'apiKey' || b.header !== undefined, { message: 'an apiKey binding needs "header" (the header it sets)', path: ['header'] })
    .refine((b) => b.auth === 'apiKey' || b.header === undefined, { message: '"header" is only for apiKey bindings', path: ['header'] }),
);
export type OpenSandboxCredentialBinding = z.infer<typeof OpenSandboxCredentialBindingSchema>;

export const OpenSandboxCredentialBindingsSchema = z.lazy(() =>
  z
    .array(OpenSandboxCredentialBindingSchema)
    .max(32)
    .refine((bs) => new Set(bs.map((b) => b.name)).size === bs.length, { message: 'binding names must be unique' }),
);

/** Where a CLI (or the gateway daemon) finds the value of secret `name`. */
export function credentialEnvVar(name: string): string {
  return `SANDBOX_SESSIONS_CREDENTIAL_${name}`;
}

/** The editor command that stores a secret value. */
export const SET_CREDENTIAL_COMMAND_TITLE = 'Sandbox Sessions: Set OpenSandbox Credential…';

/** What to tell a user whose binding names a secret nobody supplied. */
export function missingSecretMessage(binding: { name: string; secret: string }): string {
  return `OpenSandbox credential binding "${binding.name}" needs the secret ${binding.secret}: run "${SET_CREDENTIAL_COMMAND_TITLE}" and enter ${binding.secret}, or set ${credentialEnvVar(binding.secret)} in the environment of the CLI (or of the gateway daemon)`;
}
