// Sandboxes as the companion server presents them to any editor: a reference that names one
// sandbox across providers, the summary shown in views, and what opening one returns (all the
// data plane needs: an endpoint and a token).
import { z } from 'zod';
import { OpenSandboxCredentialBindingsSchema } from './opensandboxCredentials';
import { ArtifactRefSchema, RunPhaseSchema, RunSchema, TerminationModeSchema } from './kruntimes/run';
import { GatewayCapabilitiesSchema } from './kruntimes/gateway';
import { LabelsSchema } from './kruntimes/labels';
import { SandboxSessionRevisionSchema } from './sandboxRevision';

export const ProviderKindSchema = z.enum(['local', 'kruntimes']);
export type ProviderKind = z.infer<typeof ProviderKindSchema>;

/** The context name the local provider uses (kruntimes uses kubeconfig context names). */
export const LOCAL_CONTEXT = 'local';

const dnsLabel = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a lowercase DNS name');

export const SandboxRefSchema = z.object({
  provider: ProviderKindSchema,
  /** kubeconfig context for kruntimes; "local" for the local provider. */
  context: z.string().min(1),
  namespace: dnsLabel,
  name: dnsLabel,
});
export type SandboxRef = z.infer<typeof SandboxRefSchema>;

/**
 * A stable key for a sandbox (used as the `sandbox:` URI authority): provider, context, namespace,
 * name joined by `.`. Inside a part every byte other than `a-z 0-9 -` is written `~XX` (hex of
 * its UTF-8), so a key survives URI authorities — which VS Code percent-decodes and may fold to
 * lower case — and parts holding dots (kubeconfig contexts often do) stay separable.
 */
export function sandboxKey(ref: SandboxRef): string {
  return [ref.provider, ref.context, ref.namespace, ref.name].map(escapeKeyPart).join('.');
}

/** The name a sandbox folder has everywhere an editor shows one: `<name> · <provider>`. */
export function sandboxFolderName(ref: SandboxRef): string {
  return `${ref.name} · ${ref.provider}`;
}

/**
 * A `.code-workspace` file that opens one sandbox as a folder named {@link sandboxFolderName}.
 * A folder opened by URI alone is named after its path, and a sandbox's root path is `/`; only a
 * workspace file (or a multi-root entry) can give it a name, so every single-sandbox window is
 * opened through one of these.
 */
export function sandboxWorkspaceFile(ref: SandboxRef): string {
  const file = { folders: [{ uri: `sandbox://${sandboxKey(ref)}/`, name: sandboxFolderName(ref) }], settings: sandboxWindowSettings() };
  return `${JSON.stringify(file, null, 2)}\n`;
}

/** The title of the terminal profile the extension contributes (`contributes.terminal.profiles`). */
export const SANDBOX_TERMINAL_PROFILE = 'Sandbox shell';

/**
 * Workspace settings of a window whose folders are sandboxes, as a Remote-SSH window's terminals are
 * remote shells: a new terminal is a Sandbox shell, and a shell of this machine is offered only
 * under a name that says "host". VS Code does not revive an extension's terminals after a reload
 * (it fills an empty panel with the default shell instead); `hideOnStartup: whenEmpty` keeps the
 * panel closed then, and the extension itself reopens its Sandbox terminals. All of these are
 * window-scoped settings (`restricted`: honoured in a trusted workspace).
 */
export function sandboxWindowSettings(): Record<string, unknown> {
  const hostShell = (shell: string, icon: string) => ({ [`${shell} (host)`]: { path: shell, icon, overrideName: true } });
  const hidden = (names: string[]) => Object.fromEntries(names.map((n) => [n, null]));
  return {
    'terminal.integrated.defaultProfile.linux': SANDBOX_TERMINAL_PROFILE,
    'terminal.integrated.defaultProfile.osx': SANDBOX_TERMINAL_PROFILE,
    'terminal.integrated.defaultProfile.windows': SANDBOX_TERMINAL_PROFILE,
    'terminal.integrated.hideOnStartup': 'whenEmpty',
    'terminal.integrated.profiles.linux': { ...hidden(['bash', 'sh', 'zsh', 'fish', 'tmux', 'pwsh']), ...hostShell('bash', 'terminal-bash') },
    'terminal.integrated.profiles.osx': { ...hidden(['bash', 'zsh', 'fish', 'tmux', 'pwsh']), ...hostShell('zsh', 'terminal') },
  };
}

function escapeKeyPart(part: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(part)) {
    const c = String.fromCharCode(byte);
    out += /[a-z0-9-]/.test(c) ? c : `~${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function unescapeKeyPart(part: string): string | undefined {
  if (!/^(?:[a-z0-9-]|~[0-9A-Fa-f]{2})*$/.test(part)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < part.length; ) {
    if (part[i] === '~') {
      bytes.push(parseInt(part.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(part.charCodeAt(i));
      i += 1;
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return undefined; // not UTF-8
  }
}

export function parseSandboxKey(key: string): SandboxRef | undefined {
  const parts = key.split('.');
  if (parts.length !== 4) return undefined;
  const decoded = parts.map(unescapeKeyPart);
  if (decoded.some((p) => p === undefined)) return undefined;
  const [provider, context, namespace, name] = decoded;
  const parsed = SandboxRefSchema.safeParse({ provider, context, namespace, name });
  return parsed.success ? parsed.data : undefined;
}

export const SandboxSummarySchema = z.object({
  ref: SandboxRefSchema,
  key: z.string(),
  uid: z.string().optional(),
  runtime: z.string(),
  phase: RunPhaseSchema.optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
  createdAt: z.string().optional(),
  startTime: z.string().optional(),
  completionTime: z.string().optional(),
  idleTimeoutSeconds: z.number().int().optional(),
  /** The session lease: the sandbox ends this long after the last heartbeat (the last user let go). */
  leaseTimeoutSeconds: z.number().int().optional(),
  timeout: z.string().optional(),
  terminationMode: TerminationModeSchema.optional(),
  artifacts: z.array(ArtifactRefSchema).optional(),
  /** An agent created it through the MCP server (label `sandbox-sessions.dev/creator: agent`, protocol/agentAccess.ts). */
  createdByAgent: z.boolean().optional(),
  /** A person granted it to agents (label `sandbox-sessions.dev/agents: granted`). */
  grantedToAgents: z.boolean().optional(),
  /** The session revision it was opened from or last saved as, whoever did it (protocol/sandboxRevision.ts). */
  sessionRevision: SandboxSessionRevisionSchema.optional(),
});
export type SandboxSummary = z.infer<typeof SandboxSummarySchema>;

export const SandboxCreateSpecSchema = z.object({
  provider: ProviderKindSchema,
  context: z.string().min(1).optional(),
  namespace: dnsLabel.default('default'),
  /** kruntimes: a Runtime name; local: a backend (`process` or `bubblewrap`). */
  runtime: z.string().min(1),
  /** A name for the Run; a generated one (`sbx-…`) when absent. */
  name: dnsLabel.optional(),
  idleTimeoutSeconds: z.number().int().min(1).optional(),
  leaseTimeoutSeconds: z.number().int().min(1).optional(),
  queueSize: z.number().int().min(1).max(32).optional(),
  operationTimeout: z.string().optional(),
  timeout: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  /** kruntimes: artifacts materialized into the workspace before Ready (`spec.artifactInputs`). */
  artifactInputs: z.array(z.object({ ref: ArtifactRefSchema, path: z.string().min(1) })).max(32).optional(),
  /** Extra labels of the Run (Kubernetes' label rules), e.g. the MCP server's creator mark. */
  labels: LabelsSchema.optional(),
  /** local runtime `opensandbox`: the sandbox's image, limits, TTL (renewed while it lives) and the domains it may reach. */
  opensandbox: z
    .object({
      image: z.string().min(1).max(512).optional(),
      cpu: z.string().min(1).max(32).optional(),
      memory: z.string().min(1).max(32).optional(),
      ttlSeconds: z.number().int().min(60).max(86_400).optional(),
      allowedEgressDomains: z.array(z.string().min(1).max(253)).max(64).optional(),
      /** Credentials injected by OpenSandbox's Credential Vault for these hosts (secret names only; their hosts join the egress allow list). */
      credentialBindings: OpenSandboxCredentialBindingsSchema.optional(),
    })
    .optional(),
});
export type SandboxCreateSpec = z.infer<typeof SandboxCreateSpecSchema>;

export const SandboxConnectionSchema = z.object({
  endpoint: z.object({ url: z.string(), caBundle: z.string().optional() }),
  token: z.string(),
  /**
   * TLS for a port-forwarded hop: the endpoint URL names 127.0.0.1, the certificate names the
   * Service, so the client verifies it against `caBundle` under `servername` (or, without a CA
   * bundle, does not verify that one loopback hop, as the kruntimes SDKs do).
   */
  tls: z.object({ servername: z.string().optional(), rejectUnauthorized: z.boolean().optional() }).optional(),
  capabilities: GatewayCapabilitiesSchema.optional(),
  /** Present when the Run has a session lease, which the companion server now holds until `sandboxes/release`. */
  lease: z.object({ timeoutSeconds: z.number().int().min(1) }).optional(),
});
export type SandboxConnection = z.infer<typeof SandboxConnectionSchema>;

export const DownloadedArtifactSchema = z.object({
  name: z.string(),
  path: z.string(),
  type: z.string(),
  sizeBytes: z.number().int(),
  digest: z.string(),
  /** Where a directory artifact was unpacked, when asked. */
  unpackedTo: z.string().optional(),
});
export type DownloadedArtifact = z.infer<typeof DownloadedArtifactSchema>;

export { RunSchema };

export const BackendInfoSchema = z.object({
  name: z.string(),
  /** What the backend isolates, in words (e.g. "none", "mount, pid and optional network namespaces"). */
  isolation: z.string(),
  available: z.boolean(),
  reason: z.string().optional(),
});

export const ProviderInfoSchema = z.object({
  kind: ProviderKindSchema,
  label: z.string(),
  available: z.boolean(),
  /** Why the provider cannot be used here, when it cannot. */
  reason: z.string().optional(),
  contexts: z.array(
    z.object({
      name: z.string(),
      namespaces: z.array(z.string()),
      /** The namespace the context names (kubectl's default for it). */
      namespace: z.string().optional(),
      /** kubeconfig's current context. */
      current: z.boolean().optional(),
    }),
  ),
  /** The runtimes a new sandbox can name (local: backends; kruntimes: Runtime resources, when listed). */
  runtimes: z.array(BackendInfoSchema),
});
export type ProviderInfo = z.infer<typeof ProviderInfoSchema>;

export const SandboxChangedSchema = z.object({ sandbox: SandboxSummarySchema, removed: z.boolean().optional() });
export type SandboxChanged = z.infer<typeof SandboxChangedSchema>;
