// `--credential SECRET=HOST[,HOST…][:AUTH]` of `sandbox create --runtime opensandbox` and `session activate
// --provider opensandbox`: the command-line form of the setting `sandboxSessions.opensandbox.credentialBindings`
// (which Credential Vault credential goes to which hosts, in which header), checked by the same zod schema. Only
// the secret's NAME is on the command line; its value comes from SANDBOX_SESSIONS_CREDENTIAL_<SECRET> in the CLI's
// environment (else the gateway daemon's). A wrong flag is a usage error that never echoes what was typed after
// the secret name, so a value pasted by mistake is not printed back.
import {
  credentialEnvVar,
  OpenSandboxCredentialBindingSchema,
  OpenSandboxCredentialBindingsSchema,
  SECRET_NAME,
  type OpenSandboxCredentialBinding,
} from '../../protocol/opensandboxCredentials';
import { UsageError } from './args';

export const CREDENTIAL_FLAG_SYNOPSIS = '--credential SECRET=HOST[,HOST…][:bearer|:basic|:apiKey=HEADER]';

/** The --help lines of the flag (after the synopsis). */
export const CREDENTIAL_FLAG_HELP = `--credential: OpenSandbox's Credential Vault adds secret SECRET to requests to HOST as
\`Authorization: Bearer\` (default), \`Authorization: Basic\` or the header HEADER; the hosts join the
allowed egress domains. Repeatable. The value: ${credentialEnvVar('<SECRET>')} in this environment
(else the gateway daemon's); it goes to the daemon's memory and the sandbox's vault only`;

const AUTHS = new Set(['bearer', 'basic', 'apiKey']);

function issues(error: { issues: { path: PropertyKey[]; message: string }[] }): string {
  return error.issues.map((i) => (i.path.length > 0 ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)).join('; ');
}

/** One `--credential` value as a binding, or a UsageError saying what is wrong (`n`: its 1-based position). */
function parseOne(spec: string, n: number, names: Map<string, number>): OpenSandboxCredentialBinding {
  const eq = spec.indexOf('=');
  const secret = (eq >= 0 ? spec.slice(0, eq) : spec).trim();
  // Only a well-formed secret NAME is ever echoed back; what follows it could be a value typed by mistake.
  const which = SECRET_NAME.test(secret) ? `--credential ${secret}` : `--credential #${n}`;
  if (eq <= 0) throw new UsageError(`${which}: expected ${CREDENTIAL_FLAG_SYNOPSIS.slice('--credential '.length)} (e.g. GITHUB_TOKEN=api.github.com)`);
  if (!SECRET_NAME.test(secret)) throw new UsageError(`${which}: the secret name before "=" is uppercase letters, digits and _ (e.g. GITHUB_TOKEN)`);
  const rest = spec.slice(eq + 1);
  const colon = rest.indexOf(':');
  const hosts = (colon < 0 ? rest : rest.slice(0, colon))
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  const authText = colon < 0 ? 'bearer' : rest.slice(colon + 1).trim();
  const authEq = authText.indexOf('=');
  const auth = authEq < 0 ? authText : authText.slice(0, authEq);
  if (!AUTHS.has(auth)) throw new UsageError(`${which}: the part after ":" is bearer, basic or apiKey=HEADER`);
  const header = authEq < 0 ? undefined : authText.slice(authEq + 1).trim();
  if (auth === 'apiKey' && !header) throw new UsageError(`${which}: apiKey needs the header it sets, e.g. :apiKey=X-Api-Key`);
  if (auth !== 'apiKey' && header !== undefined) throw new UsageError(`${which}: only apiKey takes a header (:apiKey=HEADER)`);
  const base = secret.toLowerCase();
  const seen = (names.get(base) ?? 0) + 1;
  names.set(base, seen);
  const parsed = OpenSandboxCredentialBindingSchema.safeParse({
    name: seen === 1 ? base : `${base}-${seen}`,
    hosts,
    auth,
    ...(header !== undefined ? { header } : {}),
    secret,
  });
  if (!parsed.success) throw new UsageError(`${which}: ${issues(parsed.error)}`);
  return parsed.data;
}

/** Every `--credential` value as the bindings the setting would hold (checked by the setting's schema). */
export function parseCredentialFlags(specs: readonly string[]): OpenSandboxCredentialBinding[] {
  const names = new Map<string, number>();
  const bindings = specs.map((spec, i) => parseOne(spec, i + 1, names));
  const all = OpenSandboxCredentialBindingsSchema.safeParse(bindings);
  if (!all.success) throw new UsageError(`--credential: ${issues(all.error)}`);
  return all.data;
}

/** The values this environment has for the bindings' secrets (SANDBOX_SESSIONS_CREDENTIAL_<NAME>), by name. */
export function credentialValues(bindings: readonly OpenSandboxCredentialBinding[], env: NodeJS.ProcessEnv): Record<string, string> {
  const values: Record<string, string> = {};
  for (const b of bindings) {
    const value = env[credentialEnvVar(b.secret)];
    if (value !== undefined && value !== '') values[b.secret] = value;
  }
  return values;
}
