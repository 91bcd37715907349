// What an `opensandbox` Run asks of its sandbox, carried as annotations of the local Run (the
// Run shape has no field for a backend's settings, and annotations are where Kubernetes keeps
// such knobs): image, CPU and memory limits, the TTL renewed while the Run lives, the
// domains it may reach (egress is denied otherwise) and its credential bindings (secret names
// only). Parsed and checked at admission.
import type { Run } from '../../../protocol/kruntimes/run';
import { type OpenSandboxCredentialBinding, OpenSandboxCredentialBindingsSchema } from '../../../protocol/opensandboxCredentials';

export const OPENSANDBOX_BACKEND = 'opensandbox';
const PREFIX = 'opensandbox.sandbox-sessions.io/';
export const OpenSandboxAnnotations = {
  image: `${PREFIX}image`,
  cpu: `${PREFIX}cpu`,
  memory: `${PREFIX}memory`,
  ttlSeconds: `${PREFIX}ttl-seconds`,
  /** Comma-separated domains (`*.example.com` allowed). */
  allowedEgress: `${PREFIX}allowed-egress`,
  /** JSON list of credential bindings (hosts, auth, the secret's NAME — never its value). */
  credentialBindings: `${PREFIX}credential-bindings`,
} as const;

export const DEFAULT_IMAGE = 'ubuntu:24.04';
export const DEFAULT_TTL_SECONDS = 600;

export interface OpenSandboxRunSettings {
  image: string;
  cpu: string | undefined;
  memory: string | undefined;
  ttlSeconds: number;
  allowedEgress: string[];
  credentialBindings: OpenSandboxCredentialBinding[];
}

/** What a caller (extension settings, CLI flags) may set; undefined fields keep the defaults. */
export interface OpenSandboxRunOptions {
  image?: string;
  cpu?: string;
  memory?: string;
  ttlSeconds?: number;
  allowedEgressDomains?: string[];
  credentialBindings?: OpenSandboxCredentialBinding[];
}

const DOMAIN = /^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]{0,62})(\.[A-Za-z0-9]([-A-Za-z0-9]{0,62}))*$/;
const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/;

/** The annotations for `options` (only the ones set). */
export function openSandboxAnnotations(options: OpenSandboxRunOptions): Record<string, string> {
  const out: Record<string, string> = {};
  if (options.image) out[OpenSandboxAnnotations.image] = options.image;
  if (options.cpu) out[OpenSandboxAnnotations.cpu] = options.cpu;
  if (options.memory) out[OpenSandboxAnnotations.memory] = options.memory;
  if (options.ttlSeconds !== undefined) out[OpenSandboxAnnotations.ttlSeconds] = String(options.ttlSeconds);
  if (options.allowedEgressDomains?.length) out[OpenSandboxAnnotations.allowedEgress] = options.allowedEgressDomains.join(',');
  if (options.credentialBindings?.length) out[OpenSandboxAnnotations.credentialBindings] = JSON.stringify(options.credentialBindings);
  return out;
}

/** The Run's settings, or the reason they are not acceptable (an error a user can act on). */
export function runSettings(run: Run): { ok: true; settings: OpenSandboxRunSettings } | { ok: false; message: string } {
  const a = run.metadata.annotations ?? {};
  const image = a[OpenSandboxAnnotations.image]?.trim() || DEFAULT_IMAGE;
  const cpu = a[OpenSandboxAnnotations.cpu]?.trim() || undefined;
  const memory = a[OpenSandboxAnnotations.memory]?.trim() || undefined;
  if (cpu !== undefined && !QUANTITY.test(cpu)) return { ok: false, message: `annotation ${OpenSandboxAnnotations.cpu}: "${cpu}" is not a CPU quantity (e.g. 1, 500m)` };
  if (memory !== undefined && !QUANTITY.test(memory)) return { ok: false, message: `annotation ${OpenSandboxAnnotations.memory}: "${memory}" is not a memory quantity (e.g. 2Gi)` };
  const ttlText = a[OpenSandboxAnnotations.ttlSeconds]?.trim();
  const ttlSeconds = ttlText === undefined || ttlText === '' ? DEFAULT_TTL_SECONDS : Number(ttlText);
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > 86_400) {
    return { ok: false, message: `annotation ${OpenSandboxAnnotations.ttlSeconds}: the sandbox TTL must be whole seconds from 60 to 86400, not "${ttlText}"` };
  }
  const allowedEgress = (a[OpenSandboxAnnotations.allowedEgress] ?? '')
    .split(',')
    .map((d) => d.trim())
    .filter((d) => d !== '');
  const bad = allowedEgress.find((d) => !DOMAIN.test(d));
  if (bad !== undefined) return { ok: false, message: `annotation ${OpenSandboxAnnotations.allowedEgress}: "${bad}" is not a domain (use example.com or *.example.com)` };
  let credentialBindings: OpenSandboxCredentialBinding[] = [];
  const bindingsText = a[OpenSandboxAnnotations.credentialBindings]?.trim();
  if (bindingsText) {
    let raw: unknown;
    try {
      raw = JSON.parse(bindingsText);
    } catch {
      return { ok: false, message: `annotation ${OpenSandboxAnnotations.credentialBindings}: not JSON` };
    }
    const parsed = OpenSandboxCredentialBindingsSchema.safeParse(raw);
    if (!parsed.success) return { ok: false, message: `annotation ${OpenSandboxAnnotations.credentialBindings}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}` };
    credentialBindings = parsed.data;
  }
  return { ok: true, settings: { image, cpu, memory, ttlSeconds, allowedEgress, credentialBindings } };
}
